"""``verify_placement``: check a placement against the objects and the target, independently of the placer.

Rules checked (each violation raises :class:`~toolkit.errors.InvalidIRError`
with the offending rows): every object placed; address inside the loadable
range and inside one allowed region; interleaved objects in interleaved
regions; alignment; no two objects live at the same time share a byte (aliases
of one root excepted); auxiliary objects share no byte with any non-auxiliary
object at any time; executable objects in code regions, sharing no instruction
element with data live at the same time; ``separate_from`` pairs live at the
same time share no element; iterated parameters at a uniform stride of at
least their aligned size (whole elements when bank-separated); aliases at their
root's address; group members back to back.

Overlaps are found with a vectorized sweep: per tile, objects sorted by address
are compared with their k-th successor for k = 1, 2, ... until no object's
range reaches its k-th successor.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.errors import InvalidIRError
from toolkit.intervals import overlapping_pairs
from toolkit.tables import OBJECTS_SCHEMA
from toolkit.target import Target


def verify_placement(objects: pl.DataFrame, placement: pl.DataFrame, target: Target, *,
                     allow_missing: bool = False) -> None:
    """Raise InvalidIRError if ``placement`` breaks any placement rule for ``objects`` on ``target``."""
    obj = objects.select(list(OBJECTS_SCHEMA)).with_columns(pl.col("repeat_count").fill_null(1))
    got = obj.join(placement.select("object_id", "address", "stride_bytes", "region"), on="object_id", how="left")
    missing = got.filter(pl.col("address").is_null())
    if missing.height and not allow_missing:
        raise InvalidIRError("placement: objects without an address", missing.select("object_id", "tile", "name"))
    got = got.filter(pl.col("address").is_not_null()).sort("tile", "object_id")
    el = target.elements()
    off = el["offset"].to_numpy()
    ends = el["end"].to_numpy()
    el_region = el["region"].to_numpy()
    el_inter = el["interleaved"].to_numpy()
    addr = got["address"].to_numpy()
    count = got["repeat_count"].to_numpy()
    size = got["size_bytes"].to_numpy()
    stride = got["stride_bytes"].to_numpy()
    extent = np.where(count > 1, count * stride, size)
    got = got.with_columns(pl.Series("extent", extent))
    _fail_if(got, (addr < target.memory_start) | (addr + extent > target.load_limit),
             f"address range outside the loadable memory {target.memory_start:#x}..{target.load_limit:#x}")
    _fail_if(got, addr % got["align"].to_numpy() != 0, "address not a multiple of align")
    inside = np.clip(addr, off[0], ends[-1] - 1)
    e0 = np.searchsorted(off, inside, side="right") - 1
    e1 = np.searchsorted(off, np.clip(addr + np.maximum(extent, 1) - 1, off[0], ends[-1] - 1), side="right") - 1
    region = el_region[e0]
    _fail_if(got, region != el_region[e1], "object straddles two regions")
    _fail_if(got, region != got["region"].to_numpy(), "region column disagrees with the address")
    allowed = got.select(pl.col("regions").list.contains(pl.Series(region).cast(pl.Int8))).to_series().to_numpy()
    _fail_if(got, ~allowed, "region not among the object's allowed regions")
    inter = (got["class"] == "interleaved").to_numpy()
    _fail_if(got, inter & ~el_inter[e0], "interleaved object outside interleaved elements")
    execu = (got["access"] == "executable").to_numpy()
    _fail_if(got, execu & ~np.isin(region, list(target.code_regions)), "executable object outside the code regions")
    _check_strides(got, target, region, el)
    _check_overlaps(got, addr, extent, execu, target)
    _check_separation(got, e0, e1)
    _check_aliases_groups(got)


def _fail_if(df: pl.DataFrame, mask: np.ndarray, what: str) -> None:
    if mask.any():
        rows = df.filter(pl.Series(mask)).select("object_id", "tile", "size_bytes", "align", "address", "class",
                                                  "regions", "first", "last")
        raise InvalidIRError(f"placement: {what}", rows)


def _check_strides(got: pl.DataFrame, target: Target, region: np.ndarray, el: pl.DataFrame) -> None:
    count = got["repeat_count"].to_numpy()
    rep = count > 1
    if not rep.any():
        return
    size = got["size_bytes"].to_numpy()
    align = got["align"].to_numpy()
    stride = got["stride_bytes"].to_numpy()
    need = -(-size // align) * align
    elem = el.group_by("region").agg(pl.col("size_bytes").first())
    elem_of = dict(zip(elem["region"].to_list(), elem["size_bytes"].to_list(), strict=True))
    sep = (got["separate_from"].list.len().fill_null(0) > 0).to_numpy()
    grid = np.array([elem_of[int(r)] for r in region]) if sep.any() else np.ones(len(region), np.int64)
    bad = rep & ((stride < need) | (stride % align != 0) | (sep & (stride % grid != 0)))
    _fail_if(got, bad, "repeat stride below the aligned size, misaligned, or not whole elements when separated")


def _check_overlaps(got: pl.DataFrame, addr, extent, execu, target: Target) -> None:
    tile = got["tile"].to_numpy()
    first = got["first"].to_numpy()
    last = got["last"].to_numpy()
    aux = got["auxiliary"].fill_null(False).to_numpy()
    oid = got["object_id"].to_numpy()
    alias = got["alias_of"].to_numpy()
    root = np.where(got["alias_of"].is_null().to_numpy(), oid, np.nan_to_num(alias.astype(float)).astype(np.int64))
    live = (extent > 0)
    i, j = overlapping_pairs(tile, np.where(live, addr, 0), np.where(live, addr + extent, 0))
    together = (first[i] <= last[j]) & (first[j] <= last[i])
    never = aux[i] != aux[j]
    bad = (together | never) & (root[i] != root[j])
    _pairs_fail(got, i[bad], j[bad], "two objects share bytes while both live (or an auxiliary object uses "
                                     "bytes a planned object occupies)")
    if execu.any():
        g = target.instruction_element_bytes
        lo = np.where(execu, addr // g * g, addr)
        hi = np.where(execu, -(-(addr + extent) // g) * g, addr + extent)
        i, j = overlapping_pairs(tile, lo, hi)
        bad = (execu[i] != execu[j]) & (first[i] <= last[j]) & (first[j] <= last[i])
        _pairs_fail(got, i[bad], j[bad], "data shares an instruction element with a live executable object")


def _pairs_fail(got: pl.DataFrame, i: np.ndarray, j: np.ndarray, what: str) -> None:
    if len(i):
        a = got[i].select("tile", "object_id", "address", "extent", "first", "last")
        b = got[j].select(pl.col("object_id").alias("other"), pl.col("address").alias("other_address"),
                          pl.col("extent").alias("other_extent"), pl.col("first").alias("other_first"),
                          pl.col("last").alias("other_last"))
        raise InvalidIRError(f"placement: {what}", pl.concat([a, b], how="horizontal"))


def _check_separation(got: pl.DataFrame, e0: np.ndarray, e1: np.ndarray) -> None:
    pairs = got.select("object_id", "tile", "first", "last", "separate_from",
                       pl.Series("e0", e0), pl.Series("e1", e1)).explode("separate_from").drop_nulls("separate_from")
    if pairs.height == 0:
        return
    other = got.select(pl.col("object_id").alias("separate_from"), pl.col("first").alias("of"),
                       pl.col("last").alias("ol"), pl.Series("o0", e0), pl.Series("o1", e1))
    j = pairs.join(other, on="separate_from", how="inner")
    bad = j.filter((pl.col("first") <= pl.col("ol")) & (pl.col("of") <= pl.col("last"))
                   & (pl.col("e0") <= pl.col("o1")) & (pl.col("o0") <= pl.col("e1")))
    if bad.height:
        raise InvalidIRError("placement: bank-separated objects share a memory element while both live", bad)


def _check_aliases_groups(got: pl.DataFrame) -> None:
    alias = got.filter(pl.col("alias_of").is_not_null()).join(
        got.select(pl.col("object_id").alias("alias_of"), pl.col("address").alias("root_address")),
        on="alias_of", how="left")
    bad = alias.filter(pl.col("root_address").is_null() | (pl.col("address") != pl.col("root_address")))
    if bad.height:
        raise InvalidIRError("placement: alias not at its root's address",
                             bad.select("object_id", "tile", "alias_of", "address", "root_address"))
    grp = got.filter(pl.col("group").is_not_null()).sort("tile", "group", "object_id").with_columns(
        (pl.col("address").shift(1) + pl.col("size_bytes").shift(1)).over("tile", "group").alias("prev_end"),
        pl.col("align").max().over("tile", "group").alias("galign"))
    bad = grp.filter(pl.col("prev_end").is_not_null() & ((pl.col("address") < pl.col("prev_end"))
                                                        | (pl.col("address") - pl.col("prev_end")
                                                           >= pl.col("galign"))))
    if bad.height:
        raise InvalidIRError("placement: contiguity group members are not back to back by object_id",
                             bad.select("object_id", "tile", "group", "address", "prev_end"))
