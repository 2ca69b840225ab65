"""``toolkit profile crop|query|export`` through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.profile import crop, synthetic_profile, write_capnp, write_parquet

runner = CliRunner()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("cli")
    p = synthetic_profile(4, 10, seed=2)
    return write_capnp(p, d / "run.capnp"), write_parquet(p, d / "run.parquet")


def test_crop_json(files: tuple[Path, Path]) -> None:
    want = crop(synthetic_profile(4, 10, seed=2))
    for path in files:
        r = runner.invoke(app, ["profile", "crop", str(path), "--json"])
        assert r.exit_code == 0, r.output
        out = json.loads(r.stdout)
        assert out["cropped_cycles"] == want.cropped_cycles
        assert (out["clock_hz"], out["tiles"], out["samples"]) == (1.5e9, 4, 40)
    r = runner.invoke(app, ["profile", "crop", str(files[0]), "--shared-clock"])
    assert r.exit_code == 0 and "shared clock" in r.stdout


def test_query_table_and_json(files: tuple[Path, Path]) -> None:
    r = runner.invoke(app, ["profile", "query", str(files[0]), "--group-by", "kernel", "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert {"kernel", "work_cycles", "p95_cycles"} <= set(rows[0])
    r = runner.invoke(app, ["profile", "query", str(files[1]), "--group-by", "phase"])
    assert r.exit_code == 0 and "cycles by phase" in r.stdout
    r = runner.invoke(app, ["profile", "query", str(files[0]), "--group-by", "colour"])
    assert r.exit_code == 2 and "by='colour' is not a group key" in r.stderr


def test_export(files: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    r = runner.invoke(app, ["profile", "export", str(files[0]), "--perfetto", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["traceEvents"]


def test_bad_file_exits_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.capnp"
    bad.write_bytes(b"\x00\x00\x00\x00\x10\x00\x00\x00garbage")
    r = runner.invoke(app, ["profile", "crop", str(bad)])
    assert r.exit_code == 2
    assert "bad.capnp: truncated" in r.stderr and "Traceback" not in r.output
