"""Single-arena problems in MiniMalloc's CSV format: ``id,lower,upper,size`` (half-open lifetimes)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from toolkit.errors import FormatError
from toolkit.files import atomic_write

COLUMNS = ("id", "lower", "upper", "size")
#: largest size or lifetime bound accepted: far beyond any memory, and small enough that the solver's sums of
#: sizes and offsets (up to 2**14 buffers) stay inside signed 64-bit integers
MAX_BYTES = 1 << 48
CSV_LIMIT = 1 << 30   # bytes of one arena CSV file


def read_arena_csv(path: str | Path) -> pl.DataFrame:
    """The rows of ``path`` with the four columns as Int64 (extra columns kept as text).

    Raises FormatError naming the file, the line (1 = header) and the column.
    """
    from toolkit.files import check_name_lengths
    p = check_name_lengths(path, "CSV file", error=FormatError)
    if p.is_dir():
        raise FormatError("is a directory; give a MiniMalloc CSV file (id,lower,upper,size)", file=str(p))
    from toolkit.files import read_bytes  # a regular file (never a FIFO or device), bounded
    data = read_bytes(p, limit=CSV_LIMIT, what="CSV file")
    try:
        raw = pl.read_csv(data, infer_schema=False)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise FormatError(f"cannot read CSV: {exc}", file=str(p)) from exc
    missing = [c for c in COLUMNS if c not in raw.columns]
    if missing:
        msg = f"line 1: missing column(s) {missing}; expected a header with {','.join(COLUMNS)}"
        raise FormatError(msg, file=str(p), offset=1, field=missing[0])
    parsed = raw.with_columns(pl.col(c).str.strip_chars().cast(pl.Int64, strict=False) for c in COLUMNS)
    for c in COLUMNS:
        bad = parsed[c].is_null().arg_true()
        if len(bad):
            row = int(bad[0])
            value = raw[c][row]
            msg = f"line {row + 2}, column {c!r}: {value!r} is not an integer"
            raise FormatError(msg, file=str(p), offset=row + 2, field=c, value=value)
    checks = [
        (parsed["size"] < 0, "size", "is negative; sizes are bytes >= 0"),
        (parsed["lower"] < 0, "lower", "is negative"),
        (parsed["upper"] <= parsed["lower"], "upper", "is not above lower (lifetimes are half-open [lower, upper))"),
    ]
    checks.append((parsed["size"] > MAX_BYTES, "size", f"exceeds {MAX_BYTES} bytes (2**48: sums of sizes must not "
                   "wrap 64-bit offsets)"))
    checks.append((parsed["upper"] > MAX_BYTES, "upper", f"exceeds {MAX_BYTES}"))
    checks.append((parsed["id"].is_duplicated(), "id", "appears twice; every buffer needs its own id"))
    if parsed.height and int(parsed["size"].clip(0, MAX_BYTES).sum()) > 1 << 62:
        msg = f"the sizes add up to more than 2**62 bytes ({parsed.height} buffers); offsets would overflow"
        raise FormatError(msg, file=str(p), field="size", value=int(parsed["size"].clip(0, MAX_BYTES).sum()))
    for mask, c, why in checks:
        bad = mask.arg_true()
        if len(bad):
            row = int(bad[0])
            msg = f"line {row + 2}, column {c!r}: {c}={parsed[c][row]} {why}"
            raise FormatError(msg, file=str(p), offset=row + 2, field=c, value=parsed[c][row])
    return parsed


def write_arena_csv(df: pl.DataFrame, path: str | Path) -> None:
    """Write atomically: a temporary file beside ``path``, then rename."""
    atomic_write(path, df.write_csv)
