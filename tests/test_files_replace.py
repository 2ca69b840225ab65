"""Directory replacement never leaves a moment without a complete directory, and the next run recovers
whatever a kill at any step left (fault injection: every rename, exchange and delete dies in turn)."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from toolkit.files import replace


class Killed(BaseException):
    """A SIGKILL, as far as the code under test can tell: nothing after it runs."""


def _make(path: Path, tag: str, files: int = 4) -> Path:
    path.mkdir(exist_ok=True)
    for i in range(files):
        (path / f"part{i}").write_text(tag)
    (path / "DONE").write_text(tag)   # written last: a directory with it and every part is complete
    return path


def _complete(path: Path) -> bool:
    return (path / "DONE").is_file() and all((path / f"part{i}").is_file() for i in range(4))


def _tag(path: Path) -> str:
    return (path / "DONE").read_text()


STEPS = ("_rename", "exchange", "remove")


def _kill_at(monkeypatch, k: int, *, half_delete: bool) -> list[str]:
    """Make the k-th operation (counting renames, exchanges and deletes) die; a delete dies half done."""
    seen: list[str] = []
    for name in STEPS:
        real = getattr(replace, name)

        def op(*args, _real=real, _name=name):
            seen.append(_name)
            if len(seen) == k:
                if _name == "remove" and half_delete and args[0].is_dir():
                    for p in sorted(args[0].iterdir())[:2]:
                        p.unlink()
                raise Killed
            return _real(*args)
        monkeypatch.setattr(replace, name, op)
    return seen


@pytest.fixture(params=["exchange", "fallback"])
def mode(request, monkeypatch):
    if request.param == "fallback":
        monkeypatch.setattr(replace, "_renameat2", lambda: None)
    elif replace._renameat2() is None:
        pytest.skip("no renameat2 on this system")
    return request.param


@pytest.mark.parametrize("half_delete", [False, True])
@pytest.mark.parametrize("k", range(1, 6))
def test_a_kill_at_any_step_keeps_a_complete_case_and_the_next_run_recovers(tmp_path, monkeypatch, mode, k,
                                                                           half_delete) -> None:
    out = _make(tmp_path / "case", "old")
    new = _make(replace.make_tmp(out), "new")
    seen = _kill_at(monkeypatch, k, half_delete=half_delete)
    try:
        replace.replace_dir(new, out)
        killed = False
    except Killed:
        killed = True
    monkeypatch.undo()
    if not killed:
        assert len(seen) < k and _tag(out) == "new" and not list(tmp_path.glob(".*"))
        return
    if mode == "exchange":   # no moment without a complete case
        assert _complete(out), f"killed at {seen[-1]} (step {k}): {sorted(os.listdir(tmp_path))}"
    else:   # the old case stays complete and reachable until the new one is
        assert _complete(out) or any(_complete(d.path) for d in replace.debris(out))
    before = _tag(out) if out.exists() else None
    monkeypatch.setattr(replace, "alive", lambda pid: False)   # the next run: the killed process is gone
    done = replace.recover(out, _complete)
    assert _complete(out) and not list(tmp_path.glob(".*")), (seen, done, os.listdir(tmp_path))
    assert before is None or _tag(out) == before   # a complete case at the name is never replaced by debris


def test_debris_of_a_running_writer_is_left_alone(tmp_path) -> None:
    out = _make(tmp_path / "case", "old")
    mine = _make(replace.make_tmp(out), "new")   # this process is alive: its temporary is not debris yet
    assert replace.recover(out, _complete) == [] and mine.exists()
    assert [d.running for d in replace.debris(out)] == [True]


def test_a_missing_case_is_rolled_back_from_its_old_copy(tmp_path, monkeypatch) -> None:
    old = _make(tmp_path / ".case.999999.t1.old", "old")   # no process 999999
    half = _make(tmp_path / ".case.999999.rab12cd.tmp", "new")
    (half / "part3").unlink()                                # the new one never finished
    done = replace.recover(tmp_path / "case", _complete)
    assert _tag(tmp_path / "case") == "old" and not old.exists() and not half.exists()
    assert any("rolled back" in d for d in done)


def test_two_concurrent_replacements_both_finish_and_leave_no_copy(tmp_path, mode) -> None:
    out = _make(tmp_path / "case", "old")
    news = [_make(replace.make_tmp(out), f"new{i}") for i in range(2)]
    gate = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(tmp: Path) -> None:
        gate.wait()
        try:
            replace.replace_dir(tmp, out)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(t,)) for t in news]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and _tag(out) in ("new0", "new1")
    assert sorted(os.listdir(tmp_path)) == ["case"]


def test_debris_under_names_the_case_and_the_writer(tmp_path) -> None:
    sub = tmp_path / "exp"
    sub.mkdir()
    _make(sub / ".mlp.b1.999999.rx9y8z7w.tmp", "x")
    (sub / ".trace.json.999999.tmp").write_text("half")
    found = {(d.target.name, d.kind, d.pid, d.running) for d in replace.debris_under(tmp_path)}
    assert found == {("mlp.b1", "tmp", 999999, False), ("trace.json", "tmp", 999999, False)}
    shutil.rmtree(sub)
