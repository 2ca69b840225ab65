"""Output paths checked before any work, and atomic file writes: nothing half-written is ever left.

Every writer in the toolkit (profiles, traces, arena CSVs, package dumps) writes
to a temporary sibling and renames it into place; an interrupted write leaves
only the old file (or none). Operating-system failures (a full disk, a missing
folder, a name too long) surface as an :class:`OptionError` naming the path.
Commands call :func:`check_output` on their output paths before the work
starts, so a bad path never costs a compile.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from toolkit.errors import OptionError

NAME_MAX = 255   # bytes in one path component (Linux)


def check_output(path: str | os.PathLike[str], field: str = "output") -> Path:
    """Refuse an output file path that cannot be written: a directory, a missing or unwritable folder, a name
    too long."""
    p = Path(path)
    if p.is_dir():
        raise OptionError(f"{field} {p} is a directory; give a file path", field=field, value=str(p))
    return check_parent(p, field)


def check_parent(p: Path, field: str, *, create: bool = False, reserve: int = 16) -> Path:
    """The folder of output ``p`` exists (or is created, ``create``) and is writable, and ``p``'s name leaves
    ``reserve`` bytes for the temporary sibling it is written through."""
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
    if len(p.name.encode()) > NAME_MAX - reserve:
        raise OptionError(f"{field} {p}: the name is {len(p.name.encode())} bytes; use at most "
                          f"{NAME_MAX - reserve}", field=field, value=str(p))
    return p


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a temporary sibling of ``path``, then rename it to ``path``."""
    import polars as pl
    final = Path(path)
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


def read_table(path: str | os.PathLike[str]):
    """A Parquet file as a polars DataFrame; any failure to read it, including a panic inside the Parquet
    decoder on a corrupt footer (a BaseException), is a FormatError naming the file."""
    import polars as pl

    from toolkit.errors import FormatError
    try:
        return pl.read_parquet(path)
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except BaseException as exc:   # pyo3 panics (a corrupt footer) derive from BaseException
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise FormatError(f"cannot read the Parquet file ({first[:200]})", file=str(path)) from None


__all__ = ["atomic_write", "check_output", "check_parent", "read_table"]
