"""The sweep dataset on disk: one small Parquet file per point, ``point-<id>.parquet``, in one directory.

A point's file is written the moment the point finishes, through a temporary
sibling renamed into place (:func:`toolkit.files.atomic_write`): a killed sweep
leaves every finished point and nothing half-written (a hidden ``.*.tmp``
left by a kill mid-write is ignored). Writing the same point again replaces
its file, so a retried point is never in the dataset twice. Nothing here
deletes a point: a second grid into the same directory adds its points.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from toolkit.errors import FormatError, OptionError
from toolkit.files import atomic_write, read_table, write_table
from toolkit.sweep.rows import FINAL, SWEEP_SCHEMA, to_frame

PATTERN = "point-*.parquet"


def check_out(out: str | Path) -> Path:
    """The dataset directory exists (or is created) and is writable; fails before any work, naming ``out``."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise OptionError(f"sweep --out {p} is a file; give a directory for the dataset", field="out", value=str(p))
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OptionError(f"sweep --out {p}: cannot create the directory: {exc.strerror}", field="out",
                          value=str(p)) from exc
    if not os.access(p, os.W_OK | os.X_OK):
        raise OptionError(f"sweep --out {p}: cannot write into it (permission denied)", field="out", value=str(p))
    return p


def point_path(out: Path, point_id: str) -> Path:
    return out / f"point-{point_id}.parquet"


def write_row(out: Path, row: dict) -> Path:
    """Write one point's row as its own file (atomically)."""
    df = to_frame([row])
    return atomic_write(point_path(out, row["point_id"]), lambda tmp: write_table(df, tmp, compression="zstd"))


def finished_ids(out: Path) -> set[str]:
    """Ids of the points in ``out`` that a rerun skips (``ok`` and ``error``; ``crashed`` ones run again)."""
    done = load_sweep(out, missing_ok=True)
    return set(done.filter(pl.col("status").is_in(FINAL))["point_id"])


def load_sweep(out: str | Path, *, missing_ok: bool = False) -> pl.DataFrame:
    """Every point of the sweep dataset in ``out`` as one SWEEP_SCHEMA frame, sorted by workload and id.

    Files written by an older toolkit (a column fewer or more) are read with the missing columns null.
    """
    p = Path(out)
    if not p.is_dir():
        if missing_ok and not p.exists():
            return to_frame([])
        raise FormatError("not a sweep dataset directory", file=str(p))
    parts = []
    for f in sorted(p.glob(PATTERN)):
        df = read_table(f)
        if "point_id" not in df.columns or df.height != 1:
            raise FormatError(f"not a sweep point file (expected one row with point_id, got {df.height} rows, "
                              f"columns {df.columns[:5]}...)", file=str(f))
        parts.append(df)
    if not parts:
        return to_frame([])
    df = pl.concat(parts, how="diagonal_relaxed")
    df = df.select(pl.col(c).cast(t) if c in df.columns else pl.lit(None, t).alias(c) for c, t in SWEEP_SCHEMA.items())
    return df.sort("workload", "point_id")
