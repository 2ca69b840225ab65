"""Content digests of package objects: 64-bit FNV-1a over integer columns, combined in order.

Contract: :func:`fnv` hashes integer columns row by row, :func:`combine`
folds a frame sorted by segment into one order-dependent digest per segment
(both stable across runs and versions; :mod:`toolkit.package.images` uses them
after placement too). ``_digests`` gives every package object its content
digest (null where the content holds addresses, known only after placement)
and ``_image_digests`` one digest per tile over its code and plan-row objects.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.package.model import DIGESTS_SCHEMA

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


def fnv(*columns) -> np.ndarray:
    """64-bit FNV-1a over the 64-bit words of integer columns, row by row."""
    n = len(columns[0])
    h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for col in columns:
            h = (h ^ np.asarray(col).astype(np.int64).view(np.uint64)) * _FNV_PRIME
    return h


def _text_code(values: pl.Series) -> np.ndarray:
    """A stable 64-bit code per string (FNV-1a of its UTF-8 bytes), per distinct value."""
    words = values.unique().to_list()
    codes = {}
    for w in words:  # one per distinct string (kernel and kind names: a handful)
        h = int(_FNV_OFFSET)
        for b in str(w).encode():
            h = ((h ^ b) * int(_FNV_PRIME)) & 0xFFFFFFFFFFFFFFFF
        codes[w] = h
    return values.replace_strict(codes, return_dtype=pl.UInt64).to_numpy().view(np.int64)


def combine(segment: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order-dependent digest per segment of a frame sorted by segment: (segments, digests)."""
    if not len(segment):
        return np.zeros(0, np.int64), np.zeros(0, np.uint64)
    starts = np.flatnonzero(np.r_[True, segment[1:] != segment[:-1]])
    pos = (np.arange(len(segment)) - np.repeat(starts, np.diff(np.r_[starts, len(segment)]))).astype(np.uint64)
    with np.errstate(over="ignore"):
        a = (h.astype(np.uint64) ^ (pos * np.uint64(0x9E3779B97F4A7C15))) * np.uint64(0xBF58476D1CE4E5B9)
        b = (h.astype(np.uint64) + pos * np.uint64(0x94D049BB133111EB)) * np.uint64(0xD6E8FEB86659FD93)
        d = fnv(np.add.reduceat(a, starts), np.bitwise_xor.reduceat(b, starts), np.diff(np.r_[starts, len(segment)]))
    return segment[starts], d


def _per_tile_digest(df: pl.DataFrame, cols: list[str], name: str) -> pl.DataFrame:
    """df sorted by tile (then content order) -> one digest per tile."""
    h = fnv(*[df[c].to_numpy() for c in cols])
    tiles, d = combine(df["tile"].to_numpy(), h)
    return pl.DataFrame({"tile": pl.Series(tiles, dtype=pl.Int32), name: pl.Series(d, dtype=pl.UInt64)})


def _digests(objects, per_tile, kernels, ids, steps, kept) -> pl.DataFrame:
    """Content digest of every package object (null where the content needs addresses: after placement)."""
    bodies = steps.unique(["tile", "body"]).sort("tile", "body")
    sup = _per_tile_digest(bodies, ["body", "code_bytes"], "supervisor")
    row_d = _per_tile_digest(kept, ["digest"], "exchange_rows")
    run = _per_tile_digest(steps.sort("tile", "index"), ["phase", "body", "slots"], "run_table")
    kern = kernels.with_columns(pl.Series("d", fnv(_text_code(kernels["kernel"]), kernels["size_bytes"]),
                                          dtype=pl.UInt64))
    key = ids["key"]
    fixed = {"support.code": fnv([1], [per_tile["support_code_bytes"][0] if per_tile.height else 0])[0],
             "host_state": fnv([2], [per_tile["host_state_bytes"][0] if per_tile.height else 0])[0]}
    by_name = objects.select("object_id", "tile", "name").join(key.select("object_id", "key"), on="object_id")
    d = (by_name
         .join(sup, on="tile", how="left").join(row_d, on="tile", how="left").join(run, on="tile", how="left")
         .join(kern.select("tile", pl.lit("kernel:").add(pl.col("kernel")).alias("name"), pl.col("d").alias("kd")),
               on=["tile", "name"], how="left")
         .with_columns(pl.when(pl.col("name") == "supervisor").then(pl.col("supervisor"))
                       .when(pl.col("name") == "exchange_rows").then(pl.col("exchange_rows"))
                       .when(pl.col("name") == "run_table").then(pl.col("run_table"))
                       .when(pl.col("name").str.starts_with("kernel:")).then(pl.col("kd"))
                       .when(pl.col("name") == "support.code").then(pl.lit(fixed["support.code"], pl.UInt64))
                       .when(pl.col("name") == "host_state").then(pl.lit(fixed["host_state"], pl.UInt64))
                       .alias("digest"),
                       (pl.col("name") != "support.stacks").alias("loaded")))
    return d.sort("object_id").cast(DIGESTS_SCHEMA).select(list(DIGESTS_SCHEMA))


def _image_digests(digests: pl.DataFrame, objects: pl.DataFrame) -> pl.DataFrame:
    """Per tile: digest over its code and plan-row objects (what makes two tile images identical)."""
    part = (objects.select("object_id", "tile", "kind", "name")
            .filter(pl.col("kind").is_in(["code", "support", "exchange_rows"]) & (pl.col("name") != "support.stacks"))
            .join(digests, on="object_id").sort("tile", "name"))
    h = fnv(_text_code(part["name"]), part["digest"].to_numpy().view(np.int64))
    tiles, d = combine(part["tile"].to_numpy(), h)
    return pl.DataFrame({"tile": pl.Series(tiles, dtype=pl.Int32), "image_digest": pl.Series(d, dtype=pl.UInt64)})
