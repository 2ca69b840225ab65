"""Output paths checked before any work, and atomic file writes: nothing half-written is ever left.

Every writer in the toolkit (profiles, traces, arena CSVs, package dumps) writes
to a temporary sibling ``.<name>.<pid>.tmp`` and renames it into place; an
interrupted write leaves only the old file (or none), and the next write of the
same file removes temporaries whose process is gone. Operating-system failures
(a full disk, a missing folder, a name too long) surface as an
:class:`OptionError` naming the path. Commands call :func:`check_output` on
their output paths, and :func:`check_not_input` on outputs against inputs,
before the work starts, so a bad path never costs a compile and an output
never overwrites an input. An output that is a symbolic link is refused (the
message names where it points): replacing it would replace the link, not the
file it names.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from toolkit.errors import OptionError
from toolkit.files.names import check_name_lengths

NAME_MAX = 255   # bytes in one path component (Linux)


def check_output(path: str | os.PathLike[str], field: str = "output") -> Path:
    """Refuse an output file path that cannot be written: a directory, a missing or unwritable folder, a name
    too long."""
    p = Path(path)
    refuse_link(p, field)
    if p.is_dir():
        raise OptionError(f"{field} {p} is a directory; give a file path", field=field, value=str(p))
    return check_parent(p, field)


def refuse_link(p: Path, field: str) -> None:
    """An output path that is a symbolic link is refused, naming where it points (and one whose names are too
    long for the file system, :func:`check_name_lengths`)."""
    check_name_lengths(p, field)
    if p.is_symlink():
        msg = (f"{field} {p} is a symbolic link to {os.path.realpath(p)}; refusing to write through it (the "
               f"link would be replaced, not what it names): give the real path")
        raise OptionError(msg, field=field, value=str(p))


def check_not_input(outputs: dict[str, str | os.PathLike[str]], inputs: dict[str, str | os.PathLike[str]]) -> None:
    """Refuse an output that is one of the inputs, lies inside an input directory, or holds an input (a
    directory output replaced whole): writing it would destroy the input. Keys are the flags, for the message."""
    for ofield, out in outputs.items():
        o = os.path.realpath(out)
        for ifield, src in inputs.items():
            i = os.path.realpath(src)
            same = o == i or (os.path.exists(o) and os.path.exists(i) and os.path.samefile(o, i))
            if same or o.startswith(i.rstrip(os.sep) + os.sep) or i.startswith(o.rstrip(os.sep) + os.sep):
                how = "is" if same else "lies inside" if o.startswith(i.rstrip(os.sep) + os.sep) else "holds"
                msg = (f"{ofield} {out} {how} the input {ifield} {src}; writing it would destroy the input: "
                       f"choose another path")
                raise OptionError(msg, field=ofield.lstrip("-"), value=str(out))


def check_parent(p: Path, field: str, *, create: bool = False, reserve: int = 16) -> Path:
    """The folder of output ``p`` exists (or is created, ``create``) and is writable, and ``p``'s name leaves
    ``reserve`` bytes for the temporary sibling it is written through."""
    check_name_lengths(p, field)
    parent = p.parent
    if create:
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OptionError(f"{field} {p}: cannot create the folder {parent}: {exc.strerror}", field=field,
                              value=str(p)) from exc
    if not parent.is_dir():
        what = "is a file" if parent.exists() else "does not exist"
        raise OptionError(f"{field} {p}: the folder {parent} {what}", field=field, value=str(p))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OptionError(f"{field} {p}: cannot write into {parent} (permission denied)", field=field, value=str(p))
    if len(os.fsencode(p.name)) > NAME_MAX - reserve:
        raise OptionError(f"{field} {p}: the name is {len(os.fsencode(p.name))} bytes; use at most "
                          f"{NAME_MAX - reserve}", field=field, value=str(p))
    return p


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a temporary sibling of ``path``, then rename it to ``path``."""
    import polars as pl
    final = Path(path)
    refuse_link(final, "output")
    clean_stale(final)
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        tmp.replace(final)
    except (OSError, pl.exceptions.ComputeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        raise OptionError(f"cannot write {final}: {reason}", field="output", value=str(final)) from exc
    finally:
        tmp.unlink(missing_ok=True)
    return final


def write_table(df, path: str | os.PathLike[str], **options) -> None:
    """``df.write_parquet`` through a Python file object, so any path the OS accepts works (polars refuses a
    path that is not valid UTF-8, such as one with a Latin-1 byte)."""
    with open(path, "wb") as f:
        df.write_parquet(f, **options)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (a temporary named for a dead process is debris)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale(parent: Path, name: str, suffix: str) -> list[Path]:
    """Siblings ``.<name>.<pid>[.<anything>]<suffix>`` in ``parent`` whose process is gone."""
    import glob
    found = []
    if not parent.is_dir():
        return found
    for p in parent.glob(f".{glob.escape(name)}.*{suffix}"):
        pid = p.name[len(name) + 2:-len(suffix)]   # exactly ".<name>.<pid><suffix>"
        if pid.isdigit() and not alive(int(pid)):
            found.append(p)
    return found


def clean_stale(final: Path) -> None:
    """Remove temporaries of ``final`` left by killed writers (their process is gone)."""
    for p in stale(final.parent, final.name, ".tmp"):
        try:
            if p.is_dir() and not p.is_symlink():
                import shutil
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
        except OSError:
            pass


__all__ = ["alive", "atomic_write", "check_not_input", "check_output", "check_parent", "clean_stale",
           "refuse_link", "stale", "write_table"]
