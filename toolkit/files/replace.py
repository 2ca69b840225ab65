"""Replace a directory (a case, a Parquet profile) so that a complete one is at its name at every moment,
and recover what a killed replacement left on the next run.

A new directory is written as a hidden sibling ``.<name>.<pid>.<random>.tmp``. Then:

- ``<name>`` absent: one ``rename`` puts it in place;
- ``<name>`` present, on Linux: ``renameat2(RENAME_EXCHANGE)`` (reached through ``ctypes`` on the C
  library) swaps the two directories in one step, so ``<name>`` is the old case until it is the new one;
  the old one, now at the temporary name, is deleted;
- elsewhere (no ``renameat2``, or a file system that refuses the exchange): the old directory is renamed to
  ``.<name>.<pid>.old``, the new one renamed in, the old one deleted. Between the two renames ``<name>`` is
  missing but the old case stays complete and reachable at the ``.old`` name, and recovery puts it back.

Recovery (:func:`recover`, run by every writer before it writes, and reported by ``toolkit artifacts
check`` through :func:`debris`): for the siblings of ``<name>`` named for a process that is gone, when
``<name>`` is missing the newest complete one is renamed in (a finished ``.tmp`` finishes the replacement,
else an ``.old`` rolls it back); every other sibling, including one half deleted, is removed. Two runs
replacing the same name at once both succeed (the last exchange wins) and leave no copy behind.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from toolkit.files.write import alive

RENAME_EXCHANGE = 2
AT_FDCWD = -100
SUFFIXES = (".tmp", ".old")
#: what follows ``.<name>.`` in a temporary's name: the writer's pid, a random or thread part, the kind
DEBRIS = re.compile(r"(?P<pid>\d+)(\.r[a-z0-9_]+|\.t\d+)?\.(?P<kind>tmp|old)")
NAMED = re.compile(r"\.(?P<name>.+?)\.(?P<pid>\d+)(\.r[a-z0-9_]+|\.t\d+)?\.(?P<kind>tmp|old)")
ATTEMPTS = 8


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def _rename(a: Path, b: Path) -> None:
    os.rename(a, b)   # one name for every rename here (the kill tests patch it)


def exchange(a: Path, b: Path) -> bool:
    """Swap directories ``a`` and ``b`` atomically; False when the system or file system cannot."""
    fn = _renameat2()
    if fn is None:
        return False
    if fn(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(b))


def make_tmp(out: Path) -> Path:
    """A new empty hidden sibling directory of ``out`` to write into."""
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.{os.getpid()}.r", suffix=".tmp", dir=out.parent))


def remove(path: Path) -> None:
    """Delete a directory tree (or a file or link) without following links out of it."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def replace_dir(tmp: Path, out: Path) -> None:
    """Put the finished directory ``tmp`` at ``out`` (module docstring); ``tmp`` is gone afterwards."""
    for _ in range(ATTEMPTS):
        if not os.path.lexists(out):
            try:
                _rename(tmp, out)
                return
            except OSError as exc:   # another run put a directory there meanwhile: replace it instead
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
        if exchange(tmp, out):
            remove(tmp)   # the old directory, now at the temporary name
            return
        old = out.with_name(f".{out.name}.{os.getpid()}.t{threading.get_ident()}.old")
        try:
            _rename(out, old)
        except FileNotFoundError:   # another run moved it aside meanwhile
            continue
        try:
            _rename(tmp, out)
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                _rename(old, out)   # roll back: the old directory is the case again
                raise
            remove(old)   # another run renamed its own in between: that one is complete; replace it too
            continue
        remove(old)
        return
    raise OSError(errno.EBUSY, f"{out} kept changing while it was replaced ({ATTEMPTS} attempts)", str(out))


@dataclass(frozen=True, slots=True)
class Debris:
    """A sibling of ``target`` left by a replacement: ``kind`` is ``tmp`` or ``old``; ``pid`` its writer."""

    path: Path
    target: Path
    kind: str
    pid: int
    running: bool


def debris(out: Path) -> list[Debris]:
    """Every ``.<name>.<pid>...(.tmp|.old)`` sibling of ``out``, newest first."""
    import glob
    parent = out.parent
    found = []
    if not parent.is_dir():
        return found
    for p in parent.glob(f".{glob.escape(out.name)}.*"):
        m = DEBRIS.fullmatch(p.name[len(out.name) + 2:])
        if m:
            pid = int(m.group("pid"))
            found.append(Debris(p, out, m.group("kind"), pid, alive(pid)))
    return sorted(found, key=lambda d: _mtime(d.path), reverse=True)


def debris_under(root: Path) -> list[Debris]:
    """Debris of every directory name under ``root`` (for ``toolkit artifacts check``)."""
    found = []
    for suffix in SUFFIXES:
        for p in root.rglob(f".*{suffix}"):
            m = NAMED.fullmatch(p.name)
            if m:
                pid = int(m.group("pid"))
                found.append(Debris(p, p.with_name(m.group("name")), m.group("kind"), pid, alive(pid)))
    return sorted(found, key=lambda d: d.path.as_posix())


def _mtime(p: Path) -> float:
    try:
        return p.lstat().st_mtime
    except OSError:
        return 0.0


def recover(out: Path, complete: Callable[[Path], bool]) -> list[str]:
    """Finish or roll back a replacement of ``out`` that a killed run left, then remove its debris; returns
    what was done (one sentence each). Debris of a running process is left alone."""
    done = []
    dead = [d for d in debris(out) if not d.running]
    if not os.path.lexists(out):
        for pick in sorted(dead, key=lambda d: d.kind != "tmp"):   # finish (a complete .tmp) before rolling back
            if not pick.path.is_symlink() and pick.path.is_dir() and complete(pick.path):
                try:
                    _rename(pick.path, out)
                except OSError:
                    continue
                what = "finished" if pick.kind == "tmp" else "rolled back"
                done.append(f"{out}: {what} an interrupted replacement (from {pick.path.name})")
                dead.remove(pick)
                break
    for d in dead:
        remove(d.path)
        done.append(f"{out}: removed {d.path.name} left by process {d.pid}")
    return done


__all__ = ["Debris", "debris", "debris_under", "exchange", "make_tmp", "recover", "remove", "replace_dir"]
