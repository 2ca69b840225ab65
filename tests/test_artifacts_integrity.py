"""Cases are never lost and never lie: overwrite replaces only a case, integrity is recorded and checked,
and output paths that cannot be written fail before the work, naming the path."""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import toolkit
from toolkit.artifacts import check_artifacts, load_case, verify_case, write_case
from toolkit.cli import app
from toolkit.errors import FormatError, OptionError

runner = CliRunner()


@pytest.fixture(scope="module")
def small():
    return toolkit.compile("mlp-small-repeat")


def _case(tmp_path, small):
    return write_case(small, tmp_path / "mlp-small-repeat", profile=small.profile)


def test_a_fresh_case_records_sizes_and_hashes_and_passes(tmp_path, small) -> None:
    case = _case(tmp_path, small)
    files = json.loads((case / "manifest.json").read_text())["files"]
    assert files and all(set(r) == {"bytes", "sha256"} for r in files.values())
    assert verify_case(case) == [] and check_artifacts(tmp_path).height == 0
    assert load_case(case).tables


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete"])
def test_a_changed_table_fails_the_check_and_the_load(tmp_path, small, damage) -> None:
    case = _case(tmp_path, small)
    table = case / "tables" / "layout.candidates.parquet"
    data = bytearray(table.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
        data[len(data) // 3] ^= 0x0F
        table.write_bytes(bytes(data))
    elif damage == "truncate":
        table.write_bytes(bytes(data[:100]))
    else:
        table.unlink()
    problems = check_artifacts(tmp_path)
    assert problems.height == 1 and "layout.candidates.parquet" in problems["problem"][0]
    with pytest.raises(FormatError, match="integrity check"):
        load_case(case)


def test_a_manifest_of_the_wrong_shape_is_reported_not_a_traceback(tmp_path, small) -> None:
    case = _case(tmp_path, small)
    m = json.loads((case / "manifest.json").read_text())
    m.update(workload=42, params="x")
    (case / "manifest.json").write_text(json.dumps(m))
    fields = set(check_artifacts(tmp_path)["field"])
    assert {"workload", "params"} <= fields
    with pytest.raises(FormatError, match=r"workload=42 must be str"):
        load_case(case)


def test_cases_without_a_manifest_and_file_roots_are_not_called_consistent(tmp_path, small) -> None:
    case = _case(tmp_path, small)
    (case / "manifest.json").unlink()
    assert "without manifest.json" in check_artifacts(tmp_path)["problem"][0]
    with pytest.raises(OptionError, match="is a file"):
        check_artifacts(case / "log.txt")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no case" in check_artifacts(empty)["problem"][0]


def test_overwrite_only_ever_replaces_a_case(tmp_path, small) -> None:
    precious = tmp_path / "results"
    precious.mkdir()
    (precious / "thesis.txt").write_text("keep")
    with pytest.raises(OptionError, match="is not a case directory"):
        write_case(small, precious, overwrite=True)
    assert (precious / "thesis.txt").read_text() == "keep"
    with pytest.raises(OptionError, match="is a file"):
        write_case(small, precious / "thesis.txt", overwrite=True)
    case = _case(tmp_path, small)
    before = (case / "manifest.json").read_text()
    write_case(small, case, overwrite=True)   # a case is replaced, atomically
    assert (case / "manifest.json").read_text() != before and verify_case(case) == []
    assert not list(tmp_path.glob(".*"))      # nothing left aside


def test_a_second_writer_never_silently_replaces_the_first(tmp_path, small, monkeypatch) -> None:
    """The existence check passes for both; the one that lands second is refused, not applied."""
    out = tmp_path / "mlp-small-repeat"
    import toolkit.artifacts.case as art
    real = art._move_into_place

    def race(tmp, dest, overwrite):
        shutil.copytree(tmp, dest)                       # another run's case lands first
        return real(tmp, dest, overwrite)

    monkeypatch.setattr(art, "_move_into_place", race)
    with pytest.raises(OptionError, match="written by another run meanwhile"):
        write_case(small, out)
    assert verify_case(out) == []


def test_temporary_directories_of_killed_runs_are_cleaned(tmp_path, small) -> None:
    stale = tmp_path / ".mlp-small-repeat.999999.rx1.tmp"   # no process 999999
    stale.mkdir()
    _case(tmp_path, small)
    assert not stale.exists()


@pytest.mark.parametrize("args", [
    ["compile", "mlp-small-repeat", "--out", "{file}"],
    ["profile", "export", "{case}/profile.capnp", "--perfetto", "{missing}/trace.json"],
    ["placement", "solve", "{csv}", "--capacity", "100", "-o", "{missing}/out.csv"],
])
def test_unwritable_outputs_fail_before_the_work_with_the_path(tmp_path, small, args) -> None:
    case = _case(tmp_path, small)
    file = tmp_path / "a-file"
    file.write_text("x")
    csv = tmp_path / "in.csv"
    csv.write_text("id,lower,upper,size\n0,0,2,8\n")
    argv = [a.format(file=file, case=case, missing=tmp_path / "nope", csv=csv) for a in args]
    r = runner.invoke(app, argv)
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert str(tmp_path) in r.output and ("is a file" in r.output or "does not exist" in r.output)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_any_byte_mutation_of_any_case_file_is_caught(tmp_path_factory, small, data) -> None:
    """Flip, drop or add bytes anywhere in any file of a case: the check reports that file, load refuses."""
    case = _case(tmp_path_factory.mktemp("case"), small)
    files = sorted(p for p in case.rglob("*") if p.is_file() and p.name != "manifest.json")
    path = data.draw(st.sampled_from(files))
    raw = bytearray(path.read_bytes())
    kind = data.draw(st.sampled_from(["flip", "truncate", "append"]))
    at = data.draw(st.integers(0, max(len(raw) - 1, 0)))
    if kind == "flip" and raw:
        raw[at] ^= data.draw(st.integers(1, 255))
    elif kind == "truncate":
        raw = raw[:at]
    else:
        raw += b"\0"
    path.write_bytes(bytes(raw))
    problems = verify_case(case)
    assert problems and any(path.relative_to(case).as_posix() in p for _, p in problems)
    with pytest.raises(FormatError):
        load_case(case)
