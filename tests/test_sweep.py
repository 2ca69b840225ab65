import polars as pl
import pytest

from toolkit.errors import OptionError
from toolkit.sweep import grid_points, sweep


def test_grid_points_validate_names():
    assert grid_points({"row_block": [18, 36], "inner_split": [1]}) == [
        {"row_block": 18, "inner_split": 1}, {"row_block": 36, "inner_split": 1}]
    with pytest.raises(OptionError, match="unknown option 'rowblock'"):
        grid_points({"rowblock": [1]})
    with pytest.raises(OptionError, match="must be a non-empty list"):
        grid_points({"row_block": []})


def test_local_sweep_writes_a_dataset(tmp_path):
    df = sweep(["mlp-small-repeat"], {"row_block": [18, 36]}, workers=1, out=tmp_path / "ds")
    assert df.height == 2 and df["error"].is_null().all()
    assert df["row_block"].to_list() == [18, 36]
    back = pl.read_parquet(tmp_path / "ds" / "*.parquet")
    assert back.height == 2


def test_failed_point_is_a_row_not_a_crash():
    df = sweep(["encoder-b8"], {"row_block": [96], "row_shard": [64], "inner_split": [1]}, workers=1)
    assert df.height == 1 and "no layout candidate fits" in df["error"].item()


@pytest.mark.slow
def test_dask_cluster_sweep():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        df = sweep(["mlp-small-repeat"], {"row_block": [24, 48]}, scheduler=client)
    assert df.height == 2 and df["error"].is_null().all()
