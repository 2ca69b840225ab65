"""A path component longer than the file system allows (300 bytes under an existing folder) is refused by name,
exit 2, before any work, by every command that reads or writes a path: the one check is in toolkit.files."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import toolkit
from toolkit.artifacts import write_case
from toolkit.cli import app
from toolkit.errors import OptionError, ToolkitError
from toolkit.files import check_name_lengths
from toolkit.profile import synthetic_profile, write_capnp

runner = CliRunner()
LONG = "a" * 300


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    c = toolkit.compile("mlp-small-repeat")
    return write_case(c, tmp_path_factory.mktemp("case") / "mlp-small-repeat", profile=c.profile)


@pytest.mark.parametrize("argv", [
    ["compile", "mlp-small-repeat", "--out", "{long}"],
    ["compile", "mlp-small-repeat", "--out", "{long}/case"],
    ["profile", "export", "{run}", "--perfetto", "{long}"],
    ["profile", "export", "{long}", "--perfetto", "{tmp}/t.json"],
    ["profile", "render", "{run}", "-o", "{long}"],
    ["profile", "render", "{long}", "-o", "{tmp}/r.html"],
    ["profile", "query", "{long}"],
    ["profile", "crop", "{long}"],
    ["sram", "render", "{case}", "-o", "{long}"],
    ["sram", "render", "{long}", "-o", "{tmp}/s.html"],
    ["placement", "solve", "{csv}", "--capacity", "100", "-o", "{long}"],
    ["placement", "solve", "{long}", "--capacity", "100", "-o", "{tmp}/o.csv"],
    ["sweep", "mlp-small-repeat", "--out", "{long}", "-q"],
    ["sweep", "mlp-small-repeat", "--out", "{long}/d", "-q"],
    ["sweep", "mlp-small-repeat", "--grid-file", "{long}", "-q"],
    ["artifacts", "check", "{long}"],
    ["artifacts", "check", "{long}/x"],
])
def test_a_name_too_long_is_refused_by_name_before_any_work(tmp_path, case, argv) -> None:
    run = write_capnp(synthetic_profile(4, 10, seed=2), tmp_path / "run.capnp")
    csv = tmp_path / "in.csv"
    csv.write_text("id,lower,upper,size\n0,0,2,8\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    args = [a.format(long=tmp_path / LONG, run=run, case=case, csv=csv, tmp=tmp_path) for a in argv]
    r = runner.invoke(app, args)
    assert r.exit_code == 2, (r.output, r.exception)
    assert "300 bytes" in r.output and "at most 255" in r.output, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("name", [LONG, f"{LONG}/x", f"ok/{LONG}/x.json", "é" * 150])
def test_check_name_lengths_names_the_component(tmp_path, name) -> None:
    with pytest.raises(OptionError, match=r"component '.{8}.*' is \d+ bytes; the file system allows at most 255"):
        check_name_lengths(tmp_path / name, "out")


@pytest.mark.parametrize("name", ["x", "a" * 255, f"{'b' * 200}/{'c' * 200}"])
def test_names_within_the_limit_pass(tmp_path, name) -> None:
    assert check_name_lengths(tmp_path / name, "out") == tmp_path / name


def test_library_writers_and_readers_refuse_too(tmp_path) -> None:
    c = toolkit.compile("mlp-small-repeat")
    with pytest.raises(ToolkitError, match="300 bytes"):
        write_case(c, tmp_path / LONG)
    with pytest.raises(ToolkitError, match="300 bytes"):
        toolkit.profile.read_profile(tmp_path / LONG)
    assert list(tmp_path.iterdir()) == []
