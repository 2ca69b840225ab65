"""Cases are confined and crash-safe: manifest paths stay inside the case, only regular listed files are read,
a kill at any step of an --overwrite keeps a complete case and the next write recovers the debris."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

import toolkit
from toolkit.artifacts import check_artifacts, load_case, verify_case, write_case
from toolkit.cli import app
from toolkit.errors import FormatError, OptionError
from toolkit.files import replace

runner = CliRunner()


@pytest.fixture(scope="module")
def small():
    return toolkit.compile("mlp-small-repeat")


@pytest.fixture
def case(tmp_path, small):
    return write_case(small, tmp_path / "mlp-small-repeat", profile=small.profile, capnp="none")


def _list(case: Path, name: str, data: bytes) -> None:
    m = json.loads((case / "manifest.json").read_text())
    m["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (case / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize("name", ["../secret.txt", "/etc/hostname", "tables/../../secret.txt", "./log.txt",
                                  "tables//graph.ops.parquet", "manifest.json"])
def test_manifest_paths_outside_the_case_are_reported_and_never_opened(tmp_path, case, name) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    _list(case, name, secret.read_bytes())
    problems = verify_case(case)
    assert any(name in p and "not read" in p for _, p in problems), problems
    assert "top secret" not in str(problems)
    with pytest.raises(FormatError, match="integrity check"):
        load_case(case)


@pytest.mark.parametrize("kind", ["outside-link", "fifo", "dev-zero", "unlisted"])
def test_links_fifos_devices_and_unlisted_files_are_reported_not_loaded(tmp_path, case, kind) -> None:
    secret = tmp_path / "secret.parquet"
    secret.write_bytes((case / "tables" / "graph.ops.parquet").read_bytes())
    target = case / "tables" / "graph.ops.parquet"
    if kind == "outside-link":
        target.unlink()
        target.symlink_to(secret)
    elif kind == "fifo":
        target.unlink()
        os.mkfifo(target)
    elif kind == "dev-zero":
        target.unlink()
        target.symlink_to("/dev/zero")
    else:
        (case / "tables" / "extra.parquet").write_bytes(secret.read_bytes())
    problems = check_artifacts(tmp_path)   # returns (a FIFO never blocks it; /dev/zero is never read)
    assert problems.height >= 1
    text = " ".join(problems["problem"])
    assert ("not a regular file" in text) or ("not listed in the manifest" in text)
    if kind == "unlisted":   # reported by the check; the load reads only what the manifest lists
        assert "extra" not in load_case(case).tables and set(problems["field"]) == {"unlisted"}
        return
    with pytest.raises(FormatError):
        load_case(case)


def test_a_fifo_manifest_neither_blocks_an_overwrite_nor_the_check(tmp_path, small, case) -> None:
    (case / "manifest.json").unlink()
    os.mkfifo(case / "manifest.json")
    with pytest.raises(OptionError, match="is not a case directory"):
        write_case(small, case, overwrite=True)
    assert "FIFO" in " ".join(check_artifacts(tmp_path)["problem"])


class Killed(BaseException):
    pass


@pytest.mark.parametrize("fallback", [False, True])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_a_killed_overwrite_keeps_a_case_is_reported_and_recovered(tmp_path, small, case, monkeypatch, k,
                                                                  fallback) -> None:
    if fallback:
        monkeypatch.setattr(replace, "_renameat2", lambda: None)
    calls = []
    reals = {name: getattr(replace, name) for name in ("_rename", "exchange", "remove")}
    for name, real in reals.items():

        def op(*args, _real=real):
            calls.append(args)
            if len(calls) == k:
                raise Killed
            return _real(*args)
        monkeypatch.setattr(replace, name, op)
    with contextlib.suppress(Killed):
        write_case(small, case, overwrite=True, capnp="none", extra_log=["run=2"])
    for name, real in reals.items():
        monkeypatch.setattr(replace, name, real)
    if not fallback:
        assert verify_case(case) == []   # a complete case at its name at every moment
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    if leftovers:
        report = check_artifacts(tmp_path)
        assert "debris" in set(report["field"]), report
    monkeypatch.setattr(replace, "alive", lambda pid: False)   # the killed run is gone
    write_case(small, case, overwrite=True, capnp="none", extra_log=["run=3"])
    assert verify_case(case) == [] and load_case(case).log["run"] == "3"
    assert sorted(p.name for p in tmp_path.iterdir()) == [case.name]
    assert check_artifacts(tmp_path).height == 0


def test_two_concurrent_overwrites_leave_one_case_and_no_copy(tmp_path, small, case) -> None:
    gate = threading.Barrier(2)
    errors = []

    def run(i: int) -> None:
        gate.wait()
        try:
            write_case(small, case, overwrite=True, capnp="none", extra_log=[f"run={i}"])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and verify_case(case) == [] and load_case(case).log["run"] in ("0", "1")
    assert sorted(p.name for p in tmp_path.iterdir()) == [case.name]


def test_a_symlinked_out_is_refused_naming_its_target(tmp_path, small, case) -> None:
    link = tmp_path / "link"
    link.symlink_to(case)
    with pytest.raises(OptionError, match=r"symbolic link to .*mlp-small-repeat"):
        write_case(small, link, overwrite=True)
    assert link.is_symlink() and verify_case(case) == []


def test_out_dot_is_refused_before_the_compile(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for out in (".", str(tmp_path), ".."):
        r = runner.invoke(app, ["compile", "no-such-workload", "--out", out, "--overwrite"])
        assert r.exit_code == 2 and "current directory" in r.output, r.output


def test_a_full_disk_while_writing_a_case_is_an_error_not_a_traceback(tmp_path, small, monkeypatch) -> None:
    import polars as pl

    def full(*_a, **_k):
        raise pl.exceptions.ComputeError("failed to write: No space left on device (os error 28)")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full)
    with pytest.raises(OptionError, match="No space left on device"):
        write_case(small, tmp_path / "c")
    assert list(tmp_path.iterdir()) == []
    r = runner.invoke(app, ["compile", "mlp-small-repeat", "--out", str(tmp_path / "c"), "-q"])
    assert r.exit_code == 2 and "error: cannot write case" in r.output and "Traceback" not in r.output


def test_a_non_utf8_log_and_out_are_errors_or_written(tmp_path, small, case) -> None:
    log = case / "log.txt"
    log.write_bytes(log.read_bytes() + b"\xff\xfe\n")
    _list(case, "log.txt", log.read_bytes())
    with pytest.raises(FormatError, match="not UTF-8"):
        load_case(case)
    assert "not UTF-8" in " ".join(check_artifacts(tmp_path)["problem"])
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9"))
    r = runner.invoke(app, ["compile", "mlp-small-repeat", "--out", str(odd), "-q", "--json"])
    assert r.exit_code == 0 and verify_case(odd) == [], r.output
