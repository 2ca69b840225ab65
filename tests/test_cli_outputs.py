"""Outputs never destroy inputs, are checked before any work, and leave no debris: each command that writes is
refused when its output is its input (or inside an input case), a killed export's temporary is removed by the
next export, and an export into fewer chunks removes the old chunk files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import toolkit
from toolkit.artifacts import verify_case, write_case
from toolkit.cli import app
from toolkit.profile import export_perfetto, synthetic_profile, write_capnp

runner = CliRunner()


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    c = toolkit.compile("mlp-small-repeat")
    return write_case(c, tmp_path_factory.mktemp("case") / "mlp-small-repeat", profile=c.profile)


@pytest.fixture
def run(tmp_path) -> Path:
    return write_capnp(synthetic_profile(4, 10, seed=2), tmp_path / "run.capnp")


@pytest.mark.parametrize("argv", [
    ["profile", "export", "{run}", "--perfetto", "{run}"],
    ["profile", "render", "{run}", "-o", "{run}"],
    ["sram", "render", "{case}", "-o", "{case}/manifest.json"],
    ["sram", "render", "{case}", "-o", "{case}/tables/graph.ops.parquet"],
    ["placement", "solve", "{csv}", "--capacity", "100", "-o", "{csv}"],
])
def test_an_output_that_is_an_input_is_refused_before_any_work(tmp_path, run, case, argv) -> None:
    csv = tmp_path / "in.csv"
    csv.write_text("id,lower,upper,size\n0,0,2,8\n")
    before = {p: p.read_bytes() for p in (run, csv, case / "manifest.json")}
    r = runner.invoke(app, [a.format(run=run, case=case, csv=csv) for a in argv])
    assert r.exit_code == 2 and "would destroy the input" in r.output, r.output
    assert {p: p.read_bytes() for p in before} == before and verify_case(case) == []


def test_compile_out_holding_its_target_file_is_refused(tmp_path) -> None:
    out = tmp_path / "case"
    out.mkdir()
    (out / "target.toml").write_text("tiles = 1472\n")
    r = runner.invoke(app, ["compile", "mlp-small-repeat", "--out", str(out), "--target",
                            str(out / "target.toml"), "--overwrite"])
    assert r.exit_code == 2 and ("would destroy the input" in r.output or "not a case" in r.output)
    assert (out / "target.toml").exists()


def test_a_killed_exports_temporary_is_removed_and_fewer_chunks_remove_the_old(tmp_path) -> None:
    p = synthetic_profile(6, 20, seed=1)
    trace = tmp_path / "trace.json"
    dead = tmp_path / ".trace.json.999999.tmp"   # left by an export that was killed (no process 999999)
    dead.write_text("x" * 1000)
    many = export_perfetto(p, trace, max_events_per_file=30)
    assert len(many) > 2 and not dead.exists()
    keep = tmp_path / "trace.007.json"            # a file of the same pattern that is not a trace: kept
    keep.write_text("mine")
    one = export_perfetto(p, trace)
    assert one == [trace] and sorted(x.name for x in tmp_path.iterdir()) == ["trace.007.json", "trace.json"]
    again = export_perfetto(p, trace, max_events_per_file=30)
    assert not trace.exists() and set(again) <= set(tmp_path.iterdir())


def test_query_limit_must_not_be_negative(run) -> None:
    r = runner.invoke(app, ["profile", "query", str(run), "--limit", "-5"])
    assert r.exit_code == 2 and "--limit=-5" in r.output


def test_git_filter_on_a_missing_path_says_it_is_missing(tmp_path) -> None:
    r = runner.invoke(app, ["git-filter", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "does not exist" in r.output and "git is not on PATH" not in r.output


def test_a_symlinked_output_file_is_refused(tmp_path, run) -> None:
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    os.symlink(real, link)
    r = runner.invoke(app, ["profile", "export", str(run), "--perfetto", str(link)])
    assert r.exit_code == 2 and "symbolic link to" in r.output and link.is_symlink()


def test_a_cost_constant_that_would_overflow_is_an_error_before_the_compile(tmp_path) -> None:
    t = tmp_path / "t.toml"
    t.write_text(f"[costs]\nsync_cycles = {2**63 - 1}\n")
    r = runner.invoke(app, ["compile", "mlp-small-repeat", "--target", str(t), "-q"])
    assert r.exit_code == 2 and "costs.sync_cycles=9223372036854775807" in r.output and "Traceback" not in r.output


def test_compile_out_a_symlink_to_a_case_is_refused_before_the_compile(tmp_path, case) -> None:
    link = tmp_path / "link"
    link.symlink_to(case)
    r = runner.invoke(app, ["compile", "no-such-workload", "--out", str(link), "--overwrite"])
    assert r.exit_code == 2 and f"symbolic link to {case}" in r.output and link.is_symlink()
