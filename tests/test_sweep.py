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


def test_bad_sweeps_fail_before_any_point_runs(tmp_path) -> None:
    """Generators, unknown workloads, a file as --out and repeated grid keys are refused up front."""
    import pytest
    from typer.testing import CliRunner

    from toolkit.cli import app
    from toolkit.errors import OptionError
    from toolkit.sweep import grid_points, sweep
    with pytest.raises(OptionError, match=r"a generator or iterator would be used up once") as err:
        grid_points({"row_block": (b for b in (18, 36))})
    assert err.value.field == "row_block"
    with pytest.raises(OptionError, match=r"unknown workload\(s\) \['mlp-nope'\]"):
        sweep(["mlp-nope"], {"row_block": [18]})
    f = tmp_path / "rows.parquet"
    f.write_text("x")
    with pytest.raises(OptionError, match=r"is a file; give a directory"):
        sweep(["mlp-small-repeat"], {"row_block": [18]}, out=f)
    r = CliRunner().invoke(app, ["sweep", "mlp-small-repeat", "-g", "row_block=16", "-g", "row_block=24"])
    assert r.exit_code == 2 and "given twice" in r.output and "Traceback" not in r.output


@pytest.mark.slow
def test_an_unreachable_scheduler_is_named() -> None:
    """(slow: the client waits its 10 s timeout)"""
    import pytest

    from toolkit.errors import OptionError
    from toolkit.sweep import sweep
    with pytest.raises(OptionError, match=r"cannot reach the Dask scheduler at 'tcp://127.0.0.1:1'") as err:
        sweep(["mlp-small-repeat"], {"row_block": [18]}, scheduler="tcp://127.0.0.1:1")
    assert err.value.field == "scheduler"
