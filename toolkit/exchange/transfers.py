"""Validation of user transfers (TRANSFERS_SCHEMA) for the exchange stage.

``check_transfers`` returns every schema column, sorted by (phase, transfer_id,
destination) (input already in that order, as the schedule emits it, is not
re-sorted), after checking types, nulls, tile ranges, loopback, sizes and
offsets row-wise with numpy, and that the rows of one transfer agree on its
per-transfer columns and name each destination once (adjacent-row comparisons
on the sorted frame, no group-by).
"""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.errors import ModelError
from toolkit.tables import TRANSFERS_SCHEMA
from toolkit.target import Target

_REQUIRED = ("transfer_id", "phase", "source", "destination", "size_bytes")
_PER_TRANSFER = ("phase", "source", "size_bytes", "src_offset", "src_object", "tensor_id")


def check_transfers(transfers: pl.DataFrame, target: Target) -> pl.DataFrame:
    """Validate user transfers; return them with every TRANSFERS_SCHEMA column, sorted by (phase, transfer_id,
    destination) (input already in that order is not re-sorted)."""
    if not isinstance(transfers, pl.DataFrame):
        msg = f"transfers must be a polars DataFrame (TRANSFERS_SCHEMA), got {type(transfers).__name__}"
        raise ModelError(msg, field="transfers", value=type(transfers).__name__)
    missing = [c for c in _REQUIRED if c not in transfers.columns]
    if missing:
        msg = f"transfers frame is missing column(s) {missing}; required: {list(_REQUIRED)}"
        raise ModelError(msg, field=missing[0], value=None)
    df = transfers
    if isinstance(df.schema["destination"], pl.List):
        empty = df.filter(pl.col("destination").list.len() == 0)
        if empty.height:
            _empty(empty["transfer_id"][0])
        df = df.explode("destination")
    for c in _REQUIRED:
        if not df.schema[c].is_integer():
            msg = f"transfers column {c!r} must hold integers, got {df.schema[c]}"
            raise ModelError(msg, field=c, value=str(df.schema[c]))
    for c in ("transfer_id", "phase", "source", "size_bytes"):
        if df[c].null_count():
            tid = df.filter(pl.col(c).is_null())["transfer_id"][0]
            msg = f"transfers column {c!r} is null (transfer_id={tid}); it is required"
            raise ModelError(msg, field=c, value=None)
    if df["destination"].null_count():
        _empty(df.filter(pl.col("destination").is_null())["transfer_id"][0])
    fill = {c: pl.lit(0 if c in ("src_offset", "dst_offset") else None, dtype=TRANSFERS_SCHEMA[c])
            for c in TRANSFERS_SCHEMA if c not in df.columns}
    df = df.with_columns(**fill).with_columns(pl.col("src_offset", "dst_offset").fill_null(0))
    df = df.select([pl.col(c).cast(TRANSFERS_SCHEMA[c], strict=False) for c in TRANSFERS_SCHEMA])
    _check_values(df, target)
    df = _sorted(df)
    _check_transfers_agree(df)
    return df


def _sorted(df: pl.DataFrame) -> pl.DataFrame:
    if df.height < 2:
        return df
    ph, tid, dst = (df[c].to_numpy() for c in ("phase", "transfer_id", "destination"))
    dp, dt, dd = np.diff(ph), np.diff(tid), np.diff(dst)
    if np.all((dp > 0) | ((dp == 0) & ((dt > 0) | ((dt == 0) & (dd >= 0))))):
        return df
    return df.sort("phase", "transfer_id", "destination")


def _check_values(df: pl.DataFrame, target: Target) -> None:
    def first(cond: pl.Expr, bad: np.ndarray) -> dict | None:
        return df.filter(cond).row(0, named=True) if bad.any() else None

    col = {c: df[c].to_numpy() for c in ("source", "destination", "size_bytes", "src_offset", "dst_offset")}
    for c in ("source", "destination"):
        row = first(pl.col(c) < 0, col[c] < 0)
        if row:
            _fail(f"{c}={row[c]} on transfer_id={row['transfer_id']} is negative; tile ids start at 0", c, row[c])
        row = first(pl.col(c) >= target.tiles, col[c] >= target.tiles)
        if row:
            _fail(f"{c}={row[c]} on transfer_id={row['transfer_id']} is outside target {target.name!r} "
                  f"(tiles 0..{target.tiles - 1})", c, row[c])
    if not target.exchange_loopback:
        row = first(pl.col("source") == pl.col("destination"), col["source"] == col["destination"])
        if row:
            _fail(f"transfer_id={row['transfer_id']} sends from tile {row['source']} to itself "
                  f"(destination == source) but target {target.name!r} has exchange_loopback=False; "
                  "use a local copy", "destination", row["destination"])
    row = first(pl.col("size_bytes") <= 0, col["size_bytes"] <= 0)
    if row:
        _fail(f"size_bytes={row['size_bytes']} on transfer_id={row['transfer_id']}; a transfer carries "
              "at least one byte", "size_bytes", row["size_bytes"])
    for c in ("src_offset", "dst_offset"):
        row = first(pl.col(c) < 0, col[c] < 0)
        if row:
            _fail(f"{c}={row[c]} on transfer_id={row['transfer_id']} is negative", c, row[c])


def _check_transfers_agree(df: pl.DataFrame) -> None:
    """The rows of one transfer agree on its per-transfer columns and name each destination once.

    ``df`` is sorted by (phase, transfer_id, destination): a transfer whose rows disagree
    on the phase shows up as a transfer id starting twice; the other columns are compared
    row to row within each transfer.
    """
    if df.height < 2:
        return
    tid = df["transfer_id"].to_numpy()
    starts = tid[np.r_[True, tid[1:] != tid[:-1]]]
    if len(np.unique(starts)) < len(starts):
        vals, counts = np.unique(starts, return_counts=True)
        _disagree(df, int(vals[counts > 1][0]), "phase")
    same = pl.col("transfer_id") == pl.col("transfer_id").shift(1)
    flags = df.select(*[(same & pl.col(c).ne_missing(pl.col(c).shift(1))).alias(c) for c in _PER_TRANSFER[1:]],
                      (same & (pl.col("destination") == pl.col("destination").shift(1))).alias("_dup"))
    for c in _PER_TRANSFER[1:]:
        if flags[c].any():
            _disagree(df, int(df["transfer_id"].filter(flags[c])[0]), c)
    if flags["_dup"].any():
        bad = df.filter(flags["_dup"]).row(0, named=True)
        _fail(f"transfer_id={bad['transfer_id']} lists destination {bad['destination']} twice; each destination "
              "receives a transfer once", "destination", bad["destination"])


def _disagree(df: pl.DataFrame, tid: int, c: str) -> None:
    vals = df.filter(pl.col("transfer_id") == tid)[c].unique().sort().to_list()
    _fail(f"transfer_id={tid} has several {c} values {vals}; the rows of one transfer "
          "(one per destination) must agree on it", c, vals)


def _fail(msg: str, field: str, value: object) -> None:
    raise ModelError(msg, field=field, value=value)


def _empty(tid: object) -> None:
    _fail(f"transfer_id={tid} has no destination (empty group); every transfer needs at least one "
          "destination row", "destination", None)
