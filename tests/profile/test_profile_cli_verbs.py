"""``toolkit profile phases|barriers|inspect`` and the filters shared with ``query``, on a synthetic profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.profile import barriers, crop, query, synthetic_profile, write_capnp

runner = CliRunner()
PROFILE = synthetic_profile(6, 13, seed=4)


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_capnp(PROFILE, tmp_path_factory.mktemp("verbs") / "run.capnp")


def run(*args: str):
    return runner.invoke(app, ["profile", *args], env={"COLUMNS": "80"})


def test_phases_json_is_the_phase_query(path: Path) -> None:
    r = run("phases", str(path), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == query(crop(PROFILE), by="phase").to_dicts()


def test_barriers_json_is_barriers(path: Path) -> None:
    r = run("barriers", str(path), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == barriers(crop(PROFILE, shared_clock=True)).phases.to_dicts()


def test_inspect_per_tile_and_phase(path: Path) -> None:
    r = run("inspect", str(path), "--tile", "2", "--phase", "1-3", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [(x["tile"], x["phase"]) for x in rows] == [(2, 1), (2, 2), (2, 3)]
    waits = barriers(crop(PROFILE, shared_clock=True)).waits
    want = waits.filter((waits["tile"] == 2) & (waits["phase"] == 2))["wait_cycles"].item()
    assert rows[1]["wait_cycles"] == want
    assert rows[1]["compute_cycles"] + rows[1]["exchange_cycles"] + rows[1]["sync_cycles"] > 0


@pytest.mark.parametrize("verb", ["query", "phases", "barriers", "inspect"])
def test_tables_fit_80_columns(path: Path, verb: str) -> None:
    r = run(verb, str(path))
    assert r.exit_code == 0, r.output
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    if verb != "query":   # the short headers keep a real table (no one-row-per-block fallback)
        assert "| phase" in r.stdout or "| tile" in r.stdout
        assert "--json has every column" in r.stdout


def test_filters_select_samples(path: Path) -> None:
    r = run("query", str(path), "--kind", "compute", "--group-by", "kind", "--json")
    assert [x["kind"] for x in json.loads(r.stdout)] == ["compute"]
    r = run("query", str(path), "--kernel", "gelu", "--group-by", "tile", "--json")
    assert r.exit_code == 0 and {x["tile"] for x in json.loads(r.stdout)} <= set(range(6))
    r = run("query", str(path), "--tile", "0,3-4", "--group-by", "tile", "--json")
    assert [x["tile"] for x in json.loads(r.stdout)] == [0, 3, 4]
    r = run("phases", str(path), "--sort-by", "span", "--json")
    spans = [x["span_cycles"] for x in json.loads(r.stdout)]
    assert spans == sorted(spans, reverse=True)
    r = run("barriers", str(path), "--sort-by", "max_wait_cycles")
    assert r.exit_code == 0 and "only" not in r.stdout


@pytest.mark.parametrize(("args", "named"), [
    (["--kind", "colour"], "--kind='colour' is not a sample kind"),
    (["--kernel", "fft"], "--kernel='fft' runs nowhere in this profile"),
    (["--tile", "99"], "--tile='99' names 1 id(s) this profile does not have"),
    (["--tile", "a-b"], "--tile='a-b' is not a number"),
    (["--phase", "5-2"], "--phase='5-2': the range 5-2 is empty"),
    (["--sort-by", "colour"], "--sort-by='colour' is not a column"),
    (["--kind", "idle", "--kernel", "gelu"], "the filters select no samples"),
])
@pytest.mark.parametrize("verb", ["query", "phases", "barriers", "inspect"])
def test_bad_filters_exit_2_by_name(path: Path, verb: str, args: list[str], named: str) -> None:
    r = run(verb, str(path), *args)
    assert r.exit_code == 2, r.output
    assert named in r.stderr and "Traceback" not in r.output
