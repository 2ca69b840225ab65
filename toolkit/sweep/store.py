"""The sweep dataset on disk: one small Parquet file per point, ``point-<id>.parquet``, in one directory.

A point's file is written the moment the point finishes, through a temporary
sibling renamed into place (:func:`toolkit.files.atomic_write`): a killed sweep
leaves every finished point and nothing half-written (a hidden ``.*.tmp``
left by a kill mid-write is ignored, and removed by the next sweep into the
directory). A point file that cannot be read (damaged, wrong-typed, a FIFO) is
named by :func:`load_sweep` and run again by a rerun. Writing the same point again replaces
its file, so a retried point is never in the dataset twice. Nothing here
deletes a point: a second grid into the same directory adds its points.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from toolkit.errors import FormatError, OptionError
from toolkit.files import atomic_write, check_name_lengths, read_table, write_table
from toolkit.files.write import alive
from toolkit.sweep.rows import FINAL, STATUSES, SWEEP_SCHEMA, to_frame
from toolkit.tables import upgrade_summary

PATTERN = "point-*.parquet"


def check_out(out: str | Path) -> Path:
    """The dataset directory exists (or is created) and is writable; fails before any work, naming ``out``."""
    p = check_name_lengths(out, "sweep --out")
    if p.exists() and not p.is_dir():
        raise OptionError(f"sweep --out {p} is a file; give a directory for the dataset", field="out", value=str(p))
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OptionError(f"sweep --out {p}: cannot create the directory: {exc.strerror}", field="out",
                          value=str(p)) from exc
    if not os.access(p, os.W_OK | os.X_OK):
        raise OptionError(f"sweep --out {p}: cannot write into it (permission denied)", field="out", value=str(p))
    for tmp in p.glob(".point-*.parquet.*.tmp"):   # a point file half-written by a killed sweep
        pid = tmp.name.rsplit(".", 2)[-2]
        if pid.isdigit() and not alive(int(pid)) and not tmp.is_dir():
            tmp.unlink(missing_ok=True)
    return p


def point_path(out: Path, point_id: str) -> Path:
    return out / f"point-{point_id}.parquet"


def write_row(out: Path, row: dict) -> Path:
    """Write one point's row as its own file (atomically)."""
    df = to_frame([row])
    return atomic_write(point_path(out, row["point_id"]), lambda tmp: write_table(df, tmp, compression="zstd"))


def finished_ids(out: Path, wanted: set[str] | None = None) -> set[str]:
    """Ids of the points in ``out`` that a rerun skips (``ok`` and ``error``; ``crashed`` ones run again). A
    point file that cannot be read (damaged, wrong-typed, a FIFO) is not finished: its point runs again and
    its file is replaced, so a bad file never stops every later rerun. ``wanted``: only these ids."""
    done = set()
    for f in _files(out, wanted):
        try:
            row = read_point(f)
        except FormatError:
            continue
        if row["status"][0] in FINAL:
            done.add(row["point_id"][0])
    return done


def refuse_damaged(out: Path, ours: set[str]) -> None:
    """Refuse, before any work, a dataset holding point files that cannot be read and that this sweep does not
    recompute (another grid's, or a stray ``point-*.parquet``): :func:`load_sweep` of the folder would raise on
    them after the sweep said it reads every point. This sweep's own damaged points are recomputed and replaced
    (:func:`finished_ids`). Names up to five of them, with the reason, and what to do."""
    bad, mine = [], {point_path(out, i).name for i in ours}
    for f in _files(out, None):
        if f.name in mine:
            continue
        try:
            read_point(f)
        except FormatError as exc:
            bad.append(f"{f.name} ({str(exc).removeprefix(str(f) + ': ')})")
    if bad:
        shown = "; ".join(bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
        msg = (f"sweep --out {out} holds {len(bad)} damaged point file{'s' * (len(bad) > 1)} that this sweep does "
               f"not recompute, so load_sweep could not read the dataset: {shown}; remove them (or rerun the sweep "
               f"that wrote them), or give another --out")
        raise OptionError(msg, field="out", value=str(out))


def _files(out: Path, wanted: set[str] | None) -> list[Path]:
    if not out.is_dir():
        return []
    if wanted is not None:
        return [point_path(out, i) for i in sorted(wanted) if os.path.lexists(point_path(out, i))]
    return sorted(out.glob(PATTERN))


def read_point(f: Path) -> pl.DataFrame:
    """One point file, strictly typed: one row, a point id matching its name, every column of SWEEP_SCHEMA
    it has of that column's type (an older file's missing columns are null, the summary's old names read as
    today's: :func:`toolkit.tables.upgrade_summary`); FormatError naming the file and column otherwise."""
    df = read_table(f)
    if "point_id" not in df.columns or df.height != 1:
        raise FormatError(f"not a sweep point file (expected one row with point_id, got {df.height} rows, "
                          f"columns {df.columns[:5]}...)", file=str(f))
    df = upgrade_summary(df, file=str(f))   # a point written under the summary's old names
    cols = {}
    for c, t in SWEEP_SCHEMA.items():
        if c not in df.columns:
            cols[c] = pl.Series(c, [None], dtype=t)
            continue
        try:
            cols[c] = df[c].cast(t, strict=True)
        except pl.exceptions.PolarsError:
            raise FormatError(f"column {c!r} holds {df.schema[c]}, not {t} (a damaged or foreign point file; a "
                              f"rerun of its sweep recomputes it)", file=str(f), field=c) from None
    out = pl.DataFrame(cols)
    if f.name != point_path(f.parent, str(out["point_id"][0])).name:
        raise FormatError(f"holds point {out['point_id'][0]!r}, not the one its name says", file=str(f),
                          field="point_id", value=out["point_id"][0])
    if out["status"][0] not in STATUSES:
        raise FormatError(f"status={out['status'][0]!r} is not one of {STATUSES}", file=str(f), field="status",
                          value=out["status"][0])
    return out


def load_sweep(out: str | Path, *, missing_ok: bool = False, ids: set[str] | None = None) -> pl.DataFrame:
    """Every point of the sweep dataset in ``out`` as one SWEEP_SCHEMA frame, sorted by workload and id
    (``ids``: only these points). Files written by an older toolkit (a column fewer) are read with the missing
    columns null; a file that cannot be read is a FormatError naming it and the column."""
    if not isinstance(out, str | os.PathLike):
        raise FormatError(f"out={out!r} must be a path to a sweep directory, not {type(out).__name__}",
                          field="out", value=out)
    p = Path(out)
    if not p.is_dir():
        if missing_ok and not p.exists():
            return to_frame([])
        raise FormatError("not a sweep dataset directory", file=str(p))
    parts = [read_point(f) for f in _files(p, ids)]
    if not parts:
        return to_frame([])
    return pl.concat(parts).sort("workload", "point_id")
