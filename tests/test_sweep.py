"""Sweeps: grids, point ids, the one schema, durable points and resume (fast cases on mlp-small-repeat)."""

import re

import polars as pl
import pytest
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.errors import OptionError
from toolkit.sweep import SWEEP_SCHEMA, grid_points, load_sweep, sweep, sweep_points
from toolkit.sweep.rows import _first_failure
from toolkit.tables import FAILURES_SCHEMA, frame
from toolkit.target import ipu21

SMALL = "mlp-small-repeat"


def test_grid_points_validate_names():
    assert grid_points({"row_block": [18, 36], "inner_split": [1]}) == [
        {"row_block": 18, "inner_split": 1}, {"row_block": 36, "inner_split": 1}]
    assert grid_points({"batch": [1, 2]}) == [{"batch": 1}, {"batch": 2}]   # workload parameters are grid keys
    with pytest.raises(OptionError, match="unknown option 'rowblock'"):
        grid_points({"rowblock": [1]})
    with pytest.raises(OptionError, match="must be a non-empty list"):
        grid_points({"row_block": []})
    with pytest.raises(OptionError, match="grid row_block lists 18 twice") as err:
        grid_points({"row_block": [18, 18]})
    assert err.value.field == "row_block"
    with pytest.raises(OptionError, match=r"grid batch=0 must be a positive integer") as err:
        grid_points({"batch": [1, 0]})
    assert err.value.field == "batch"
    with pytest.raises(OptionError, match=r"weight_class='wide' must be one of") as err:
        grid_points({"weight_class": ["standard", "wide"]})
    assert err.value.field == "weight_class"


def test_point_ids_are_stable_and_follow_what_is_compiled():
    t = ipu21()
    a, b = sweep_points([SMALL], {"row_block": [18, 36]}, t)
    assert [p.id for p in sweep_points([SMALL], {"row_block": [18, 36]}, t)] == [a.id, b.id]   # stable
    assert a.id != b.id and len(a.id) == 16
    # the canonical options: plan pins in any order, a default given explicitly, are the same point
    p1 = sweep_points([SMALL], {"plans": [{"fc1": "4x16x1", "fc2": "4x4x4"}]}, t)[0]
    p2 = sweep_points([SMALL], {"plans": [{"fc2": "4x4x4", "fc1": "4x16x1"}], "seed": [0]}, t)[0]
    assert p1.id == p2.id
    # the workload's parameters, the target and the preset all enter the id
    default = sweep_points([SMALL], None, t)[0]
    assert default.batch == 1 and default.blocks == 3 and default.weight_dtype == "f8_143"
    assert sweep_points([SMALL], {"batch": [1]}, t)[0].id == default.id
    assert sweep_points([SMALL], {"batch": [2]}, t)[0].id != default.id
    assert sweep_points([SMALL], None, t.replace(exchange_bytes_per_cycle=8))[0].id != default.id
    assert sweep_points(["mlp-single-b1"], None, t)[0].id != default.id


def test_rows_have_the_one_schema_typed(tmp_path):
    df = sweep([SMALL], {"row_block": [18, 36]}, workers=1, out=tmp_path / "ds")
    assert dict(df.schema) == SWEEP_SCHEMA
    assert df["opt_row_block"].to_list() == [18, 36] and df["opt_weight_class"].dtype == pl.String
    assert df["status"].to_list() == ["ok", "ok"] and df["error"].is_null().all()
    assert df["placed"].all() and (df["cropped_cycles"] >= df["lowered_cycles"] * 0.9).all()
    assert (df["peak_rss_bytes"] > 0).all() and (df["compile_seconds"] > 0).all()
    assert df.select("workload", "batch", "blocks", "weight_dtype").unique().rows() == [(SMALL, 1, 3, "f8_143")]
    assert dict(load_sweep(tmp_path / "ds").schema) == SWEEP_SCHEMA


def test_first_placement_failure_is_named():
    failures = frame({"tile": [7, 3], "event": [4, 2], "live_bytes": [700, 650], "capacity_bytes": [600, 600],
                      "largest_objects": [[1], [2]], "proven": [True, False], "reason": ["a", "b"]},
                     FAILURES_SCHEMA)
    assert _first_failure(failures) == {"fail_tile": 3, "fail_event": 2, "fail_reason": "b", "fail_bytes_over": 50}
    assert _first_failure(failures.head(0)) == {}


def test_points_are_files_and_a_rerun_skips_them(tmp_path):
    out = tmp_path / "ds"
    first = sweep([SMALL], {"row_block": [18, 36]}, workers=1, out=out)
    files = sorted(p.name for p in out.glob("point-*.parquet"))
    assert files == sorted(f"point-{i}.parquet" for i in first["point_id"])
    again = sweep([SMALL], {"row_block": [18, 36]}, workers=1, out=out)   # nothing runs: same rows, same times
    assert again.equals(first)
    more = sweep([SMALL], {"row_block": [36, 24]}, workers=1, out=out)    # one old point, one new
    assert more["opt_row_block"].to_list() == [36, 24]
    assert more.filter(pl.col("opt_row_block") == 36).equals(first.filter(pl.col("opt_row_block") == 36))
    everything = load_sweep(out)
    assert everything.height == 3 and everything["point_id"].n_unique() == 3   # the first grid's 18 is kept


def test_crashed_points_run_again(tmp_path):
    from toolkit.sweep.rows import crashed_row
    from toolkit.sweep.store import write_row
    out = tmp_path / "ds"
    out.mkdir()
    point = sweep_points([SMALL], {"row_block": [18]}, ipu21())[0]
    write_row(out, crashed_row(point, "worker lost"))
    assert load_sweep(out)["status"].to_list() == ["crashed"]
    df = sweep([SMALL], {"row_block": [18]}, workers=1, out=out)
    assert df["status"].to_list() == ["ok"] and load_sweep(out).height == 1


def test_failed_point_is_a_row_not_a_crash(tmp_path):
    df = sweep(["encoder-b8"], {"row_block": [96], "row_shard": [64], "inner_split": [1]}, workers=1,
               out=tmp_path / "ds")
    assert df.height == 1 and df["status"].item() == "error" and "no layout candidate fits" in df["error"].item()
    assert load_sweep(tmp_path / "ds")["status"].to_list() == ["error"]   # recorded; a rerun does not repeat it


def test_bad_sweeps_fail_before_any_point_runs(tmp_path) -> None:
    """Generators, unknown workloads, a bad --out and repeated grid keys are refused up front."""
    with pytest.raises(OptionError, match=r"a generator or iterator would be used up once") as err:
        grid_points({"row_block": (b for b in (18, 36))})
    assert err.value.field == "row_block"
    with pytest.raises(OptionError, match=r"unknown workload\(s\) \['mlp-nope'\]"):
        sweep(["mlp-nope"], {"row_block": [18]})
    with pytest.raises(OptionError, match=r"workload 'mlp-small-repeat' is given twice"):
        sweep([SMALL, SMALL], {"row_block": [18]})
    f = tmp_path / "rows.parquet"
    f.write_text("x")
    with pytest.raises(OptionError, match=r"is a file; give a directory") as err:
        sweep([SMALL], {"row_block": [18]}, out=f)
    assert err.value.field == "out"
    with pytest.raises(OptionError, match=r"sweep --out .*/rows.parquet/ds: cannot create the directory") as err:
        sweep([SMALL], {"row_block": [18]}, out=f / "ds")
    assert err.value.field == "out"
    r = CliRunner().invoke(app, ["sweep", SMALL, "-g", "row_block=16", "-g", "row_block=24"])
    assert r.exit_code == 2 and "given twice" in r.output and "Traceback" not in r.output


def test_grid_file(tmp_path):
    from toolkit.sweep import read_grid_file
    g = tmp_path / "grid.toml"
    g.write_text('workloads = ["mlp-small-repeat"]\n[grid]\nrow_block = [18, 36]\nbatch = [1]\n')
    assert read_grid_file(g) == (["mlp-small-repeat"], {"row_block": [18, 36], "batch": [1]})
    r = CliRunner().invoke(app, ["sweep", "--grid-file", str(g), "--workers", "1", "--json", "--quiet",
                                 "--out", str(tmp_path / "ds")])
    assert r.exit_code == 0 and r.stdout == "", r.output
    assert load_sweep(tmp_path / "ds")["opt_row_block"].sort().to_list() == [18, 36]


@pytest.mark.parametrize(("text", "flags", "message"), [
    ("[grid]\nrow_block = [18]\nrow_block = [36]\n", [], r"not valid TOML: Cannot overwrite a value"),
    ('workloads = ["mlp-small-repeat"]\n[grid]\nrow_block = []\n', [], r"grid row_block=\[\] must be a non-empty"),
    ('workloads = ["mlp-small-repeat"]\n[grid]\nrow_block = 18\n', [], r"must be an array of values"),
    ('workloads = ["mlp-small-repeat"]\n[grid]\nrow_block = ["x"]\n', [], r"row_block"),
    ('workloads = ["mlp-nope"]\n', [], r"unknown workload\(s\) \['mlp-nope'\]"),
    ('workload = ["mlp-small-repeat"]\n', [], r"unknown key 'workload'"),
    ('workloads = ["mlp-small-repeat"]\n[grid]\nrow_block = [18]\n', ["-g", "row_block=36"],
     r"grid key 'row_block' is given twice"),
])
def test_bad_grid_files_fail_naming_the_key(tmp_path, text, flags, message):
    g = tmp_path / "grid.toml"
    g.write_text(text)
    r = CliRunner().invoke(app, ["sweep", "--grid-file", str(g), *flags, "--out", str(tmp_path / "ds")])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert re.search(message, r.output.replace("\n", " ")), r.output
    assert not list((tmp_path / "ds").glob("point-*"))


def test_sweep_command_shows_progress_and_a_table(tmp_path):
    r = CliRunner().invoke(app, ["sweep", SMALL, "-g", "row_block=18,36", "--workers", "1",
                                 "--out", str(tmp_path / "ds")], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    assert "opt_row_block" in r.stdout and "2/2" in r.stderr and "points/min" in r.stderr


@pytest.mark.slow
def test_dask_cluster_sweep():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        df = sweep([SMALL], {"row_block": [24, 48]}, scheduler=client)
    assert df.height == 2 and df["error"].is_null().all()


@pytest.mark.slow
def test_an_unreachable_scheduler_is_named() -> None:
    """(slow: the client waits its 10 s timeout)"""
    with pytest.raises(OptionError, match=r"cannot reach the Dask scheduler at 'tcp://127.0.0.1:1'") as err:
        sweep([SMALL], {"row_block": [18]}, scheduler="tcp://127.0.0.1:1")
    assert err.value.field == "scheduler"
