"""``package_images`` and ``verify_package``: the placed tile images as segments, and their checker.

``package_images(package, schedule_objects, placement, target)`` runs after
placement: one segment per placed object (schedule objects and package
objects) with its address, extent (``repeat_count x stride`` for iterated
parameters), flags (``RX`` code, ``R`` loaded read-only data: weights, plan
rows, run tables, argument and relocation records; ``RW`` host state, stacks,
activations, staging), lifetime, whether the loader writes it (``loaded``)
and a content digest (null for segments with no initial content).
Argument and relocation records get their digest here, from the addresses
their slots hold.

``verify_package(images, target)`` checks, independently of the placer:
segments inside the load range ``memory_start .. load_limit``; executable
segments only in code regions and in instruction elements that hold no data
segment live at the same time; no two segments live at the same time share a
byte (aliases of one root excepted); code shares bytes with nothing, ever.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.errors import InvalidIRError
from toolkit.intervals import overlapping_pairs
from toolkit.package.digests import combine, fnv
from toolkit.package.model import Package
from toolkit.target import Target

IMAGES_SCHEMA = {
    "tile": pl.Int32, "object_id": pl.Int64, "kind": pl.String, "name": pl.String, "address": pl.Int64,
    "size_bytes": pl.Int64,      # extent reserved: repeat_count x stride for iterated parameters
    "payload_bytes": pl.Int64,   # bytes of content (one instance)
    "repeat_count": pl.Int32, "stride_bytes": pl.Int64, "region": pl.Int32,
    "flags": pl.String,          # R | RW | RX
    "loaded": pl.Boolean,        # written by the loader before the program runs
    "digest": pl.UInt64,         # content digest (null: no initial content)
    "first": pl.Int32, "last": pl.Int32, "alias_of": pl.Int64, "tensor_id": pl.Int32,
}
_READ_ONLY = ("weight", "exchange_rows", "run_table", "argument_record", "relocations")


def package_images(package: Package, schedule_objects: pl.DataFrame, placement: pl.DataFrame,
                   target: Target) -> pl.DataFrame:
    """One segment per placed object of every tile (IMAGES_SCHEMA), sorted by tile and address."""
    objs = pl.concat([schedule_objects.select(package.objects.columns), package.objects])
    got = objs.join(placement.select("object_id", "address", "stride_bytes", "region"), on="object_id", how="inner")
    count = pl.col("repeat_count").fill_null(1)
    kind = pl.col("kind")
    flags = (pl.when(pl.col("access") == "executable").then(pl.lit("RX"))
             .when(kind.is_in(_READ_ONLY)).then(pl.lit("R")).otherwise(pl.lit("RW")))
    weights = got.filter(kind == "weight")
    wdig = pl.DataFrame({"object_id": weights["object_id"],
                         "wd": pl.Series(fnv(weights["tensor_id"].fill_null(-1).to_numpy(),
                                             weights["object_id"].to_numpy(), weights["size_bytes"].to_numpy()),
                                         dtype=pl.UInt64)})
    late = _placed_digests(package, placement)
    img = (got.join(package.digests, on="object_id", how="left").join(wdig, on="object_id", how="left")
           .join(late, on="object_id", how="left")
           .with_columns(
               pl.when(count > 1).then(count * pl.col("stride_bytes")).otherwise(pl.col("size_bytes"))
               .alias("extent"),
               pl.coalesce("late", "digest", "wd").alias("digest"),
               (pl.col("loaded").fill_null(False) | (kind == "weight")).alias("loaded"),
               flags.alias("flags"))
           .select(pl.col("tile"), "object_id", "kind", "name", "address", pl.col("extent").alias("size_bytes"),
                   pl.col("size_bytes").alias("payload_bytes"), count.alias("repeat_count"), "stride_bytes",
                   "region", "flags", "loaded", "digest", "first", "last", "alias_of", "tensor_id"))
    return img.cast(IMAGES_SCHEMA).select(list(IMAGES_SCHEMA)).sort("tile", "address", "object_id")


def _placed_digests(package: Package, placement: pl.DataFrame) -> pl.DataFrame:
    """Digests of records whose content is addresses: argument records and relocation tables."""
    addr = placement.select("object_id", "address", "stride_bytes")
    a = (package.arguments.join(addr, on="object_id", how="left").sort("record_object", "slot")
         .with_columns((pl.col("address").fill_null(-1) + pl.col("offset")).alias("value")))
    r = (package.relocations.join(addr, on="object_id", how="left").sort("record_object", "instance", "object_id")
         .with_columns((pl.col("address").fill_null(-1) + pl.col("repeat_index") * pl.col("stride_bytes").fill_null(0))
                       .alias("value")))
    out = []
    for df in (a, r):
        if df.height:
            ids, d = combine(df["record_object"].to_numpy(), fnv(df["value"].to_numpy()))
            out.append(pl.DataFrame({"object_id": pl.Series(ids, dtype=pl.Int64),
                                     "late": pl.Series(d, dtype=pl.UInt64)}))
    return pl.concat(out) if out else pl.DataFrame(schema={"object_id": pl.Int64, "late": pl.UInt64})


# -- verification ----------------------------------------------------------------------------
def verify_package(images: pl.DataFrame, target: Target) -> None:
    """Raise InvalidIRError when a segment breaks a load-range, code-placement or overlap rule."""
    img = images.sort("tile", "address", "object_id")
    addr = img["address"].to_numpy()
    size = img["size_bytes"].to_numpy()
    end = addr + size
    _fail_if(img, (addr < target.memory_start) | (end > target.load_limit),
             f"segment outside the load range {target.memory_start:#x}..{target.load_limit:#x}")
    el = target.elements()
    off = el["offset"].to_numpy()
    el_region = el["region"].to_numpy()
    execu = img["flags"].str.contains("X").to_numpy()
    e0 = el_region[np.clip(np.searchsorted(off, addr, side="right") - 1, 0, len(off) - 1)]
    e1 = el_region[np.clip(np.searchsorted(off, np.maximum(end - 1, addr), side="right") - 1, 0, len(off) - 1)]
    code_ok = np.isin(e0, list(target.code_regions)) & np.isin(e1, list(target.code_regions))
    _fail_if(img, execu & ~code_ok, f"code outside the code regions {list(target.code_regions)}")
    tile = img["tile"].to_numpy()
    first = img["first"].to_numpy()
    last = img["last"].to_numpy()
    oid = img["object_id"].to_numpy()
    root = np.where(img["alias_of"].is_null().to_numpy(), oid, img["alias_of"].fill_null(0).to_numpy())
    live = size > 0
    i, j = overlapping_pairs(tile, np.where(live, addr, 0), np.where(live, end, 0))
    together = (first[i] <= last[j]) & (first[j] <= last[i])
    bad = (together | execu[i] | execu[j]) & (root[i] != root[j])
    _pairs_fail(img, i[bad], j[bad], "two segments share bytes while both live (code shares bytes with nothing)")
    if execu.any():
        g = target.instruction_element_bytes
        lo = np.where(execu, addr // g * g, addr)
        hi = np.where(execu, -(-end // g) * g, end)
        i, j = overlapping_pairs(tile, np.where(live, lo, 0), np.where(live, hi, 0))
        bad = (execu[i] != execu[j]) & (first[i] <= last[j]) & (first[j] <= last[i])
        _pairs_fail(img, i[bad], j[bad], "a data segment shares an instruction element with live code")


def _fail_if(img: pl.DataFrame, mask: np.ndarray, what: str) -> None:
    if mask.any():
        rows = img.filter(pl.Series(mask)).select("tile", "object_id", "kind", "name", "address", "size_bytes",
                                                  "flags", "first", "last")
        raise InvalidIRError(f"package: {what}", rows)


def _pairs_fail(img: pl.DataFrame, i: np.ndarray, j: np.ndarray, what: str) -> None:
    if len(i):
        a = img[i].select("tile", "object_id", "name", "address", "size_bytes", "first", "last")
        b = img[j].select(pl.col("object_id").alias("other"), pl.col("name").alias("other_name"),
                          pl.col("address").alias("other_address"), pl.col("size_bytes").alias("other_size"),
                          pl.col("first").alias("other_first"), pl.col("last").alias("other_last"))
        raise InvalidIRError(f"package: {what}", pl.concat([a, b], how="horizontal"))
