"""Path names the file system cannot hold, refused by name before any work.

Every output path (:func:`toolkit.files.check_output`, :func:`~toolkit.files.check_parent`) and every input path
(:func:`toolkit.files.open_regular` and the readers of profiles and cases) goes through
:func:`check_name_lengths`: each component of the path must fit the file system's ``PC_NAME_MAX`` (asked of the
nearest existing folder; 255 bytes where it cannot say) and the whole path ``PC_PATH_MAX``; otherwise the
operating system would fail mid-command with a raw ``OSError: File name too long`` (``ENAMETOOLONG``).
"""

from __future__ import annotations

import os
from pathlib import Path

from toolkit.errors import OptionError, ToolkitError

NAME_MAX = 255    # bytes in one path component where pathconf cannot say (Linux, macOS)
PATH_MAX = 4096   # bytes in a whole path (Linux)


def _limit(folder: Path, name: str, default: int) -> int:
    try:
        return int(os.pathconf(folder, name))
    except (OSError, ValueError):
        return default


def _existing(p: Path) -> Path:
    """The nearest folder of ``p`` that exists (for pathconf), or the current directory."""
    for parent in p.parents:
        try:
            if parent.is_dir():
                return parent
        except OSError:
            continue
    return Path(".")


def check_name_lengths(path: str | os.PathLike[str], field: str, *,
                       error: type[ToolkitError] = OptionError) -> Path:
    """Refuse ``path`` when one of its components is longer than its file system's ``PC_NAME_MAX`` bytes or the
    whole path longer than ``PC_PATH_MAX``; ``error`` (OptionError for outputs and arguments) names the field, the
    component and the numbers."""
    p = Path(path)
    folder = _existing(p.absolute())
    name_max = _limit(folder, "PC_NAME_MAX", NAME_MAX)
    for part in p.parts:
        size = len(os.fsencode(part))
        if size > name_max and part != p.anchor:
            shown = part if len(part) <= 40 else f"{part[:16]}...{part[-8:]}"
            whole = os.fspath(p)
            whole = whole if len(whole) <= 60 else f"{whole[:24]}...{whole[-24:]}"
            msg = (f"{field} {whole}: the path component '{shown}' is {size} bytes; the file system allows at "
                   f"most {name_max} bytes per name: use a shorter name")
            raise error(msg, field=field, value=str(p))
    path_max = _limit(folder, "PC_PATH_MAX", PATH_MAX)
    size = len(os.fsencode(os.fspath(p.absolute())))
    if size >= path_max:
        msg = (f"{field}: the path is {size} bytes; the file system allows at most {path_max - 1} bytes per path: "
               f"use a shorter path")
        raise error(msg, field=field, value=str(p))
    return p


__all__ = ["NAME_MAX", "PATH_MAX", "check_name_lengths"]
