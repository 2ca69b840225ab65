"""Writers (and a reader) for placed tile images: the placement dump JSON and Parquet.

The placement dump is the exact-placement JSON (schema version 1) that the
hardware tool writes (``shared/formats/profile.md``)::

    {"schema_version": 1, "start": <first loadable address>, "end": <load limit>,
     "labels": [<segment names>],
     "tiles": [{"logical": t, "physical": t,
                "allocations": [{"start", "end", "payload_end", "label", "kind", "first", "last", "shards"}]}]}

Mapping from an images frame (``IMAGES_SCHEMA``): ``start = address``,
``end = address + size_bytes`` (the reserved extent), ``payload_end = address
+ payload_bytes``; ``label`` indexes ``labels`` (the segment names);
``kind``: weight -> parameter, activation -> activation, staging -> scratch,
every package object (code, support, rows, tables, records) -> support; the
unused tail of an instruction element reserved by code is a ``padding``
allocation (label ``padding``). ``first``/``last`` are the lifetime events;
``shards`` is the number of uniformly strided instances (``repeat_count``).
Logical and physical tile numbers are equal (the toolkit does no tile
remapping). Allocations are sorted by start within a tile; tiles by number.

Every writer is atomic: it writes a temporary file beside the target and
renames it, so a failed write leaves nothing half-written.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl

from toolkit.errors import FormatError
from toolkit.files import atomic_write
from toolkit.target import Target

DUMP_VERSION = 1
DUMP_KINDS = ("parameter", "activation", "scratch", "support", "padding")
_KIND = {"weight": "parameter", "activation": "activation", "staging": "scratch"}
ALLOCATIONS_SCHEMA = {
    "tile": pl.Int32, "physical": pl.Int32, "start": pl.Int64, "end": pl.Int64, "payload_end": pl.Int64,
    "label": pl.String, "kind": pl.String, "first": pl.Int32, "last": pl.Int32, "shards": pl.Int32,
}


def dump_allocations(images: pl.DataFrame, target: Target) -> pl.DataFrame:
    """The dump's allocations as one frame (ALLOCATIONS_SCHEMA), padding included, sorted by tile and start."""
    seg = images.select(
        "tile", pl.col("tile").alias("physical"), pl.col("address").alias("start"),
        (pl.col("address") + pl.col("size_bytes")).alias("end"),
        (pl.col("address") + pl.col("payload_bytes")).alias("payload_end"),
        pl.col("name").alias("label"),
        pl.col("kind").replace_strict(_KIND, default="support", return_dtype=pl.String).alias("kind"),
        "first", "last", pl.col("repeat_count").alias("shards"))
    pad = _padding(images, target)
    return (pl.concat([seg.cast(ALLOCATIONS_SCHEMA), pad.cast(ALLOCATIONS_SCHEMA)])
            .sort("tile", "start", "end").select(list(ALLOCATIONS_SCHEMA)))


def _padding(images: pl.DataFrame, target: Target) -> pl.DataFrame:
    """Unused bytes of the instruction elements that code reserves (before and after each code run)."""
    g = target.instruction_element_bytes
    code = images.filter(pl.col("flags").str.contains("X")).sort("tile", "address")
    same_next = pl.col("tile").shift(-1) == pl.col("tile")
    same_prev = pl.col("tile").shift(1) == pl.col("tile")
    end = pl.col("address") + pl.col("size_bytes")
    c = code.with_columns(end.alias("e")).with_columns(
        pl.when(same_next).then(pl.min_horizontal((pl.col("e") + g - 1) // g * g, pl.col("address").shift(-1)))
        .otherwise((pl.col("e") + g - 1) // g * g).alias("after_end"))
    c = c.with_columns(
        pl.when(same_prev).then(pl.max_horizontal(pl.col("address") // g * g, pl.col("after_end").shift(1)))
        .otherwise(pl.col("address") // g * g).alias("before_start"))
    before = c.select("tile", pl.col("before_start").alias("start"), pl.col("address").alias("end"), "first", "last")
    after = c.select("tile", pl.col("e").alias("start"), pl.col("after_end").alias("end"), "first", "last")
    pad = pl.concat([before, after]).filter(pl.col("end") > pl.col("start"))
    return pad.select("tile", pl.col("tile").alias("physical"), "start", "end", pl.col("end").alias("payload_end"),
                      pl.lit("padding").alias("label"), pl.lit("padding").alias("kind"), "first", "last",
                      pl.lit(1).alias("shards"))


def write_placement_dump(images: pl.DataFrame, path: str | Path, target: Target) -> Path:
    """Write the placement dump JSON (schema version 1) of an images frame; returns the path."""
    alloc = dump_allocations(images, target)
    labels = alloc["label"].unique(maintain_order=True)
    idx = alloc["label"].replace_strict(labels, pl.Series(np.arange(len(labels))), return_dtype=pl.Int64)
    alloc = alloc.with_columns(idx.alias("label"))
    tiles = (alloc.group_by("tile", maintain_order=True)
             .agg(pl.col("physical").first(),
                  pl.struct("start", "end", "payload_end", "label", "kind", "first", "last", "shards")
                  .alias("allocations"))
             .select(pl.col("tile").alias("logical"), "physical", "allocations"))
    head = json.dumps({"schema_version": DUMP_VERSION, "start": target.memory_start, "end": target.load_limit,
                       "labels": labels.to_list()})
    body = tiles.write_json() if tiles.height else "[]"
    return atomic_write(Path(path), lambda tmp: tmp.write_text(head[:-1] + ', "tiles": ' + body + "}"))


def read_placement_dump(path: str | Path) -> pl.DataFrame:
    """Read a placement dump JSON into ALLOCATIONS_SCHEMA rows (labels resolved); FormatError when malformed."""
    p = Path(path)
    try:
        from toolkit.files import load_json, read_text  # a regular file, bounded, nesting checked
        data = load_json(read_text(p, what="placement dump"), str(p), "placement dump")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise FormatError(f"cannot read a placement dump: {exc}", file=str(p)) from exc
    if not isinstance(data, dict):
        raise FormatError(f"expected a JSON object at the top level, got {type(data).__name__}", file=str(p))
    for key in ("schema_version", "start", "end", "labels", "tiles"):
        if key not in data:
            raise FormatError(f"missing field {key!r} (a placement dump has schema_version, start, end, labels, "
                              f"tiles)", file=str(p), field=key)
    if data["schema_version"] != DUMP_VERSION:
        raise FormatError(f"schema_version={data['schema_version']!r} is not supported; expected {DUMP_VERSION}",
                          file=str(p), field="schema_version", value=data["schema_version"])
    if not data["tiles"]:
        return pl.DataFrame(schema=ALLOCATIONS_SCHEMA)
    try:
        tiles = pl.DataFrame(data["tiles"])
        alloc = (tiles.explode("allocations").drop_nulls("allocations").unnest("allocations")
                 .rename({"logical": "tile"}))
        labels = pl.Series(data["labels"], dtype=pl.String)
        alloc = alloc.with_columns(labels.gather(alloc["label"].cast(pl.UInt32)).alias("label"))
        alloc = alloc.cast(ALLOCATIONS_SCHEMA).select(list(ALLOCATIONS_SCHEMA))
    except (pl.exceptions.PolarsError, KeyError, TypeError, ValueError, IndexError) as exc:
        raise FormatError(f"field 'tiles': allocations do not match {{start, end, payload_end, label, kind, first, "
                          f"last, shards}}: {exc}", file=str(p), field="tiles") from exc
    bad = alloc.filter(~pl.col("kind").is_in(DUMP_KINDS))
    if bad.height:
        raise FormatError(f"field 'kind': {bad['kind'][0]!r} is not one of {DUMP_KINDS}", file=str(p), field="kind",
                          value=bad["kind"][0])
    return alloc


def write_images_parquet(images: pl.DataFrame, path: str | Path) -> Path:
    """Write an images frame as Parquet (atomically); returns the path."""
    return atomic_write(Path(path), lambda tmp: images.write_parquet(tmp))



