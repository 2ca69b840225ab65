"""Placement requests of :func:`~toolkit.placement.place.place`: tile signatures, target geometry, requests.

Contract: ``_signatures`` gives every tile a signature id, equal for tiles
whose objects decide placement alike (so one representative is placed);
``_geometry(target)`` the target's region windows and element grid as arrays
(cached per target); ``_requests`` resolves aliases and contiguity groups of
checked objects into one request per placed block plus a ``members`` frame
mapping objects onto requests, narrowing each request's regions to those its
access and class allow (``ModelError`` naming the request when none is left);
``_order`` sorts requests into placement order and numbers them per tile.
"""

from __future__ import annotations

import functools

import numpy as np
import polars as pl

from toolkit.errors import ModelError
from toolkit.placement import _tiles as T
from toolkit.target import Target


def _signatures(obj: pl.DataFrame, local: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """A signature id per tile: equal when the tiles' objects are equal but for ids and names.

    Objects are compared by everything that decides placement, references (alias
    roots, groups) by their position in the tile; rows are mixed into a 128-bit
    per-tile key with numpy.
    """
    flags = obj.select(
        (pl.col("kind") == "support").alias("support"), (pl.col("access") == "executable").alias("exec"),
        (pl.col("class") == "interleaved").alias("inter"), pl.col("auxiliary").fill_null(False),
        (pl.col("separate_from").list.len().fill_null(0) > 0).alias("excl"),
        pl.col("regions").list.len().alias("nreg"),
        pl.col("regions").list.get(0, null_on_oob=True).fill_null(-1).alias("r0"),
        pl.col("regions").list.get(1, null_on_oob=True).fill_null(-1).alias("r1"),
        pl.col("regions").list.get(2, null_on_oob=True).fill_null(-1).alias("r2"),
        pl.col("repeat_count").fill_null(1),
    )
    bits = np.zeros(len(local), np.int64)
    for k, c in enumerate(("support", "exec", "inter", "auxiliary", "excl")):
        bits |= flags[c].to_numpy().astype(np.int64) << k
    fields = [bits, flags["nreg"].to_numpy(), flags["r0"].to_numpy(), flags["r1"].to_numpy(), flags["r2"].to_numpy(),
              flags["repeat_count"].to_numpy(), *(obj[c].to_numpy() for c in ("size_bytes", "align", "first", "last"))]
    if obj["alias_of"].is_not_null().any():
        alias = obj.select(pl.col("alias_of").replace_strict(obj["object_id"], pl.Series(local), default=None))
        fields.append(alias.to_series().fill_null(-1).to_numpy())
    if obj["group"].is_not_null().any():
        grp = obj.select("tile", "group", pl.Series("local", local)).select(
            pl.when(pl.col("group").is_not_null()).then(pl.col("local").min().over("tile", "group")).fill_null(-1))
        fields.append(grp.to_series().to_numpy())
    table = np.empty((len(local), len(fields)), np.int64)  # one contiguous row per object
    for k, f in enumerate(fields):
        table[:, k] = f
    key = T.tile_keys(table, local.astype(np.int64), starts.astype(np.int64), counts.astype(np.int64))
    return np.unique(key, axis=0, return_inverse=True)[1].ravel().astype(np.int64)



@functools.lru_cache(maxsize=8)
def _geometry(target: Target) -> _Geometry:
    return _Geometry(target)


class _Geometry:
    """Region windows and element grids of the target, as arrays."""

    def __init__(self, target: Target) -> None:
        reg = target.regions().sort("region")
        self.target = target
        self.region_ids = reg["region"].to_numpy().astype(np.int64)
        n = int(self.region_ids.max()) + 1
        self.rstart = np.zeros(n, np.int64)
        self.rend = np.zeros(n, np.int64)
        self.relem = np.ones(n, np.int64)
        self.rstart[self.region_ids] = reg["start"].to_numpy()
        self.rend[self.region_ids] = np.minimum(reg["end"].to_numpy(), target.load_limit)
        self.relem[self.region_ids] = reg["element_bytes"].to_numpy()
        self.interleaved = [int(r) for r, i in zip(reg["region"], reg["interleaved"], strict=True) if i]
        self.code = [int(r) for r in target.code_regions]
        el = target.elements()
        self.el_offset = el["offset"].to_numpy()
        self.capacity = target.load_limit - target.memory_start
        self.interleaved_capacity = int(sum(max(0, self.rend[r] - self.rstart[r]) for r in self.interleaved))


def _requests(objects: pl.DataFrame, geo: _Geometry) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Resolve aliases and groups into placement requests; members map objects onto them."""
    obj = objects.with_columns(pl.col("repeat_count").fill_null(1))
    # alias roots (chains resolved by repeated joins; chains are short)
    root = obj.select("object_id", pl.coalesce("alias_of", "object_id").alias("root"))
    for _ in range(8):
        nxt = root.join(root.rename({"object_id": "root", "root": "r2"}), on="root", how="left")
        if nxt.filter(pl.col("r2") != pl.col("root")).height == 0:
            break
        root = nxt.select("object_id", pl.col("r2").alias("root"))
    obj = obj.join(root, on="object_id", how="left")
    span = obj.group_by("root").agg(pl.col("first").min().alias("rf"), pl.col("last").max().alias("rl"),
                                     pl.col("size_bytes").max().alias("rs"))
    roots = obj.filter(pl.col("object_id") == pl.col("root")).join(span, on="root", how="left").with_columns(
        pl.col("rf").alias("first"), pl.col("rl").alias("last"), pl.col("rs").alias("size_bytes"))
    # groups: one request per group, members back to back by object_id at the group's largest alignment
    roots = roots.with_columns(pl.coalesce(pl.col("group").cast(pl.Int64) * -1 - 1, "object_id").alias("req_id"))
    roots = roots.sort("req_id", "object_id").with_columns(
        pl.col("align").max().over("tile", "req_id").alias("galign"))
    roots = roots.with_columns(
        ((pl.col("size_bytes") + pl.col("galign") - 1) // pl.col("galign") * pl.col("galign")).alias("padded"))
    roots = roots.with_columns(
        (pl.col("padded").cum_sum().over("tile", "req_id") - pl.col("padded")).alias("member_offset"))
    interleaved = pl.col("class") == "interleaved"
    req = roots.group_by("tile", "req_id", maintain_order=True).agg(
        pl.when(pl.col("kind").eq("support").any()).then(T.SUPPORT)
        .when(pl.col("auxiliary").fill_null(False).all()).then(T.AUXILIARY)
        .otherwise(T.NORMAL).alias("phase"),
        pl.col("first").min(), pl.col("last").max(),
        pl.when(pl.len() > 1).then(pl.col("padded").sum()).otherwise(pl.col("size_bytes").first()).alias("size"),
        pl.col("galign").first().alias("align"),
        pl.col("repeat_count").max().alias("count"),
        (pl.col("separate_from").list.len().fill_null(0) > 0).any().alias("excl"),
        (pl.col("access") == "executable").any().alias("exec"),
        interleaved.any().alias("interleaved"),
        pl.col("regions").first(),
        pl.col("member_offset").alias("offsets"),
    )
    req = _allowed_regions(req, geo)
    members = obj.join(roots.select("object_id", "req_id", "member_offset"), left_on="root", right_on="object_id",
                       how="left").select("object_id", "tile", "req_id", "member_offset", "size_bytes",
                                          "repeat_count", "alias_of", "first", "last", "class", "access")
    return req, members


def _allowed_regions(req: pl.DataFrame, geo: _Geometry) -> pl.DataFrame:
    inter = pl.lit(geo.interleaved, dtype=pl.List(pl.Int8))
    code = pl.lit(geo.code, dtype=pl.List(pl.Int8))
    regions = (
        pl.when(pl.col("exec")).then(pl.col("regions").list.set_intersection(code))
        .when(pl.col("interleaved")).then(pl.col("regions").list.set_intersection(inter))
        .otherwise(pl.col("regions"))
    )
    req = req.with_columns(regions.alias("regions"))
    bad = req.filter(pl.col("regions").list.len() == 0)
    if bad.height:
        row = bad.row(0, named=True)
        what = "executable" if row["exec"] else "interleaved"
        allowed = geo.code if row["exec"] else geo.interleaved
        msg = (f"request {row['req_id']} on tile {row['tile']} is {what} but its regions allow none of "
               f"regions {allowed}; add one of them to its regions")
        raise ModelError(msg, field="regions", tile=row["tile"])
    return req


def _order(req: pl.DataFrame) -> pl.DataFrame:
    """Placement order: support, first use, interleaved first, larger alignment, larger size; auxiliary last."""
    return req.sort(
        ["tile", "phase", "first", "interleaved", "align", "size", "req_id"],
        descending=[False, False, False, True, True, True, False],
    ).with_columns(pl.int_range(pl.len()).over("tile").alias("pos"))
