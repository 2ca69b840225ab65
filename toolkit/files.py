"""Atomic file writes: nothing half-written is ever left at the final path.

Every writer in the toolkit (profiles, traces, arena CSVs, package dumps) writes
to a temporary sibling and renames it into place; an interrupted write leaves
only the old file (or none).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a temporary sibling of ``path``, then rename it to ``path``."""
    final = Path(path)
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        tmp.replace(final)
    finally:
        tmp.unlink(missing_ok=True)
    return final
