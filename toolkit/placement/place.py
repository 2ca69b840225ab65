"""``place``: one joint SRAM placement pass per tile, every memory object together.

Contract: takes the memory objects (``tables.OBJECTS_SCHEMA``) of every tile and
a :class:`~toolkit.target.Target`; returns a :class:`Placement` whose frames
give every object's address (``PLACEMENT_SCHEMA``), per tile and event the
occupancy (``OCCUPANCY_SCHEMA``) and, for tiles that did not fit, why
(``FAILURES_SCHEMA``, empty when all fit).

Rules (DESIGN section 3): an alias shares its root's address and the root lives
over the union of their lifetimes; a contiguity group is one request whose
members sit back to back by object_id; an iterated parameter (``repeat_count``
n > 1) is n instances at a uniform stride; support objects are reserved first;
auxiliary objects only use addresses no other object ever occupies; requests go
by first use, interleaved first at a shared start, then larger alignment, then
larger size; standard requests prefer their regions in order, low addresses
first; interleaved requests only go in interleaved regions; executable requests
go in the code regions and share no instruction element with live data;
bank-separated requests reserve whole elements (16 KiB below 0x80000, 32 KiB
pairs above). One free pool for both classes.

Tiles whose requests are identical (every column but ids and names, in
placement order) are placed once and the result is joined onto the others.
When the greedy pass fails on a tile, other orders are tried, then the exact
arena search (:mod:`toolkit.placement.exact`; executable requests pinned as a
whole-element block, tiles with bank-separated or auxiliary requests excepted),
bounded in search nodes per tile (``search_nodes``) and over all failing tiles
(``search_budget_nodes``), so the verdict does not depend on the machine's
load (``search_seconds`` and ``search_budget_seconds`` are wall-clock safety
caps that a normal run never reaches), and stopped at the first tile it cannot
fit (the placement fails with that tile; the rest only get the cheap orders);
when that fails too, the failure row names the busiest event and says
whether infeasibility is proven. The other orders run on all failing tiles
at once, one compiled greedy pass per order.

Request building (tile signatures, geometry, requests and their order) lives
in :mod:`toolkit.placement.requests`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import polars as pl

from toolkit import tables
from toolkit.errors import ModelError, OptionError
from toolkit.placement import _tiles as T
from toolkit.placement import results as R
from toolkit.placement.exact import exact_tile
from toolkit.placement.requests import _Geometry, _geometry, _order, _requests, _signatures
from toolkit.tables import FAILURES_SCHEMA, OBJECTS_SCHEMA, OCCUPANCY_SCHEMA, PLACEMENT_SCHEMA, empty
from toolkit.target import Target

ACCESS = ("data", "executable")
CLASSES = ("standard", "interleaved")
#: request columns that decide a tile's placement (the tile signature)
SIGNATURE = ["phase", "first", "last", "size", "align", "count", "excl", "exec", "interleaved", "regions", "offsets"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacementOptions:
    """Knobs of :func:`place`."""

    search_nodes: int = 50_000          # node budget of the exact search per distinct failing tile
    search_budget_nodes: int = 1_000_000  # node budget of the exact searches of all failing tiles together
    search_seconds: float = 2.0         # wall-clock cap of the exact search per distinct failing tile
    search_budget_seconds: float = 30.0  # wall-clock cap of the exact searches of all failing tiles together
    occupancy: bool = True              # compute the occupancy frame

    def __post_init__(self) -> None:
        for name in ("search_seconds", "search_budget_seconds"):
            value = getattr(self, name)
            if not value > 0:
                msg = f"placement option {name}={value!r} must be positive seconds"
                raise OptionError(msg, field=name, value=value)
        for name in ("search_nodes", "search_budget_nodes"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value > 0):
                msg = f"placement option {name}={value!r} must be a positive number of search nodes"
                raise OptionError(msg, field=name, value=value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """Addresses for every memory object on every tile."""

    placement: pl.DataFrame   # PLACEMENT_SCHEMA
    occupancy: pl.DataFrame   # OCCUPANCY_SCHEMA
    failures: pl.DataFrame    # FAILURES_SCHEMA (empty when everything fits)
    distinct_tiles: int       # tiles actually placed (one per request signature)
    seconds: float

    @property
    def fits(self) -> bool:
        return self.failures.height == 0

    def __repr__(self) -> str:
        return tables.short_repr(self, fits=self.fits)


def place(objects: pl.DataFrame, target: Target, options: PlacementOptions | None = None) -> Placement:
    """Place every object of every tile in one joint pass per distinct tile."""
    t0 = time.perf_counter()
    options = options or PlacementOptions()
    objects = _sorted(check_objects(objects, target))
    if objects.height == 0:
        return Placement(placement=empty(PLACEMENT_SCHEMA), occupancy=empty(OCCUPANCY_SCHEMA),
                         failures=empty(FAILURES_SCHEMA), distinct_tiles=0,
                         seconds=time.perf_counter() - t0)
    geo = _geometry(target)
    tile = objects["tile"].to_numpy()
    starts = np.concatenate([[0], np.flatnonzero(np.diff(tile)) + 1])
    counts = np.diff(np.concatenate([starts, [len(tile)]]))
    local = np.arange(len(tile)) - np.repeat(starts, counts)
    sig = _signatures(objects, local, starts, counts)
    reps = np.sort(np.unique(sig, return_index=True)[1])  # first tile of each signature, in tile order
    rep_tiles = tile[starts[reps]]
    rep_obj = objects.filter(pl.col("tile").is_in(rep_tiles.tolist()))
    req, members = _requests(rep_obj, geo)
    req = _order(req)
    res, tile_ok, proven = _place_reps(req, geo, options)
    req = req.with_columns(**{k: pl.Series(v) for k, v in res.items()})
    rep_cols = _expand(req, members, geo)                  # rows of rep_obj, in its order
    # broadcast: object k of a tile takes the result of object k of its signature's representative
    rep_start = np.zeros(int(sig.max()) + 1, np.int64)
    rep_start[sig[reps]] = np.concatenate([[0], np.cumsum(counts[reps])[:-1]])
    gather = rep_start[np.repeat(sig, counts)] + local
    cols = {k: v[gather] for k, v in rep_cols.items()}
    keep = cols["address"] >= 0
    if keep.all():
        placement = R.typed({"object_id": objects["object_id"].to_numpy(), "tile": tile, **cols}, PLACEMENT_SCHEMA)
    else:
        placement = R.typed({"object_id": objects["object_id"].to_numpy()[keep], "tile": tile[keep],
                            **{k: v[keep] for k, v in cols.items()}}, PLACEMENT_SCHEMA)
    tile_ids = tile[starts]
    sig_of_rep = sig[reps]
    rep_index = np.zeros(int(sig.max()) + 1, np.int64)
    rep_index[sig_of_rep] = np.arange(len(reps))
    rep_of_tile = rep_index[sig]                            # per tile (in tile order): its representative
    tiles_of_rep = {int(s): tile_ids[sig == s] for s in sig_of_rep}
    failures = R.failures(req, sig_of_rep, tile_ok, proven, tiles_of_rep, geo)
    occupancy = (R.occupancy(req, res, rep_of_tile, tile_ids, geo) if options.occupancy
                 else empty(OCCUPANCY_SCHEMA))
    return Placement(placement=placement, occupancy=occupancy, failures=failures,
                     distinct_tiles=len(reps), seconds=time.perf_counter() - t0)


def _sorted(objects: pl.DataFrame) -> pl.DataFrame:
    """Objects by (tile, object_id); free when they already are."""
    tile = objects["tile"].to_numpy()
    oid = objects["object_id"].to_numpy()
    dt = np.diff(tile)
    if (dt >= 0).all() and ((dt > 0) | (np.diff(oid) > 0)).all():
        return objects
    return objects.sort("tile", "object_id")


# -- input checks ----------------------------------------------------------------------
def check_objects(objects: pl.DataFrame, target: Target) -> pl.DataFrame:
    """The objects frame in schema order; ModelError naming the field, object and value when bad."""
    missing = [c for c in OBJECTS_SCHEMA if c not in objects.columns]
    if missing:
        msg = f"objects frame lacks column(s) {missing}; see tables.OBJECTS_SCHEMA"
        raise ModelError(msg, field=missing[0])
    if any(objects.schema[c] != t for c, t in OBJECTS_SCHEMA.items()):
        objects = objects.select([pl.col(c).cast(t) for c, t in OBJECTS_SCHEMA.items()])
    else:
        objects = objects.select(list(OBJECTS_SCHEMA))
    regions = sorted(int(r) for r in target.regions()["region"])
    listed = objects["regions"].explode().drop_nulls().to_numpy()
    # (cheap whole-column flag, per-row predicate to find the offending row, field, why)
    rules: list[tuple[pl.Expr | None, pl.Expr, str, str]] = [
        (pl.col(c).is_null().any(), pl.col(c).is_null(), c, "is missing")
        for c in ("object_id", "tile", "size_bytes", "align", "first", "last", "access", "class", "regions")]
    rules += [
        (pl.col("object_id").n_unique() < pl.len(), pl.col("object_id").is_duplicated(), "object_id",
         "is not unique"),
        ((pl.col("size_bytes") < 0).any(), pl.col("size_bytes") < 0, "size_bytes", "is negative"),
        (None, (pl.col("align") <= 0) | ((pl.col("align") & (pl.col("align") - 1)) != 0), "align",
         "must be a positive power of two"),
        ((pl.col("last") < pl.col("first")).any(), pl.col("last") < pl.col("first"), "last",
         "is before first (lifetimes are [first, last] inclusive)"),
        (pl.lit(bool(set(objects["access"].unique().drop_nulls()) - set(ACCESS))), ~pl.col("access").is_in(ACCESS),
         "access", f"must be one of {ACCESS}"),
        (pl.lit(bool(set(objects["class"].unique().drop_nulls()) - set(CLASSES))), ~pl.col("class").is_in(CLASSES),
         "class", f"must be one of {CLASSES}"),
        ((pl.col("repeat_count") < 1).any(), pl.col("repeat_count") < 1, "repeat_count", "must be >= 1"),
        ((pl.col("regions").list.len() == 0).any(), pl.col("regions").list.len() == 0, "regions",
         "is empty; list the allowed regions in preference order"),
        (pl.lit(bool(len(listed) and (listed.min() < min(regions) or listed.max() > max(regions)))),
         (pl.col("regions").list.min() < min(regions)) | (pl.col("regions").list.max() > max(regions)), "regions",
         f"names a region the target does not have (regions {regions})"),
        ((pl.col("alias_of").is_not_null() & pl.col("group").is_not_null()).any(),
         pl.col("alias_of").is_not_null() & pl.col("group").is_not_null(), "group",
         "is set on an alias; group the alias root instead"),
    ]
    align = objects["align"].to_numpy()
    align_bad = bool(((align <= 0) | ((align & (align - 1)) != 0)).any())
    flags = objects.select([(f if f is not None else pl.lit(align_bad)).fill_null(False).alias(str(k))
                            for k, (f, _, _, _) in enumerate(rules)]).row(0)
    for hit, (_, expr, field, why) in zip(flags, rules, strict=True):
        if hit:
            row = objects.filter(expr.fill_null(False)).row(0, named=True)
            msg = f"object {row['object_id']} ({row['name']!r}, tile {row['tile']}): {field}={row[field]!r} {why}"
            raise ModelError(msg, field=field, value=row[field], tile=row["tile"])
    alias = objects.filter(pl.col("alias_of").is_not_null())
    if alias.height:
        roots = alias.select("object_id", "tile", "name", "alias_of").join(
            objects.select(pl.col("object_id").alias("alias_of"), pl.col("tile").alias("root_tile")),
            on="alias_of", how="left")
        bad = roots.filter(pl.col("root_tile").is_null() | (pl.col("root_tile") != pl.col("tile")))
        if bad.height:
            row = bad.row(0, named=True)
            where = "is not an object id" if row["root_tile"] is None else f"is on tile {row['root_tile']}"
            msg = (f"object {row['object_id']} ({row['name']!r}, tile {row['tile']}): alias_of={row['alias_of']} "
                   f"{where}; an alias root must be an object of the same tile")
            raise ModelError(msg, field="alias_of", value=row["alias_of"], tile=row["tile"])
    return objects


# -- the greedy pass and its fallbacks ------------------------------------------------------
def _greedy(a: dict[str, np.ndarray], geo: _Geometry, *, drop: bool = True):
    return T.place_greedy(a["ptr"], a["phase"], a["first"], a["last"], a["size"], a["align"], a["count"], a["excl"],
                          a["exec"], a["pref"], geo.rstart, geo.rend, geo.relem,
                          geo.target.instruction_element_bytes, drop)


#: the other orders tried on tiles the greedy pass does not fit, in turn: (request columns, descending) after phase
RETRY_ORDERS: tuple[tuple[tuple[str, bool], ...], ...] = (
    (("size", True), ("align", True)),
    (("interleaved", True), ("size", True)),
    (("last", True), ("size", True)),
)


def _place_reps(rep: pl.DataFrame, geo: _Geometry, options: PlacementOptions):
    """Greedy on every representative tile; the other orders on all failing tiles at once (one compiled pass per
    order); then the exact search per tile still failing, in tile order, within the node and time budgets."""
    a = R.arrays(rep)
    address, region, stride, extent, ok = _greedy(a, geo)
    res = {"address": address, "region": region, "stride": stride, "extent": extent}
    proven = np.zeros(len(ok), bool)
    cols = {"interleaved": rep["interleaved"].to_numpy().astype(np.int64)}
    for order in RETRY_ORDERS:
        failing = np.flatnonzero(~ok)
        if not len(failing):
            break
        rows, ptr = _reordered(a, cols, failing, order)
        sub = {k: v[rows] for k, v in a.items() if k != "ptr"} | {"ptr": ptr}
        got_address, got_region, got_stride, got_extent, got_ok = _greedy(sub, geo, drop=False)
        keep = np.repeat(got_ok, np.diff(ptr))
        dest = rows[keep]
        for k, v in (("address", got_address), ("region", got_region), ("stride", got_stride),
                     ("extent", got_extent)):
            res[k][dest] = v[keep]
        ok[failing[got_ok]] = True
    nodes_left = options.search_budget_nodes
    budget_end = time.perf_counter() + options.search_budget_seconds
    for t in np.flatnonzero(~ok):
        lo, hi = int(a["ptr"][t]), int(a["ptr"][t + 1])
        seconds = min(options.search_seconds, budget_end - time.perf_counter())
        nodes = min(options.search_nodes, nodes_left)
        got = None
        if seconds > 0 and nodes > 0:
            one = {k: v[lo:hi] for k, v in a.items() if k != "ptr"}
            got, proven[t], spent = exact_tile(one, geo, seconds, nodes)
            nodes_left -= spent
        if got is not None:
            for k in res:
                res[k][lo:hi] = got[k]
            ok[t] = True
        else:   # the placement fails with this tile anyway: no more exact searches
            nodes_left = 0
    return res, ok, proven


def _reordered(a: dict[str, np.ndarray], cols: dict[str, np.ndarray], tiles: np.ndarray,
               order: tuple[tuple[str, bool], ...]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``tiles`` (indices into ``a["ptr"]``), each tile's rows re-sorted by phase then ``order`` (stable:
    ties keep placement order); and the tiles' row pointers into those rows."""
    ptr = a["ptr"]
    counts = ptr[tiles + 1] - ptr[tiles]
    rows = np.repeat(ptr[tiles] - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts) + np.arange(counts.sum())
    which = np.repeat(np.arange(len(tiles)), counts)
    both = a | cols
    keys = [-both[c][rows] if desc else both[c][rows] for c, desc in reversed(order)]
    perm = np.lexsort((*keys, a["phase"][rows], which))
    return rows[perm], np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


# -- results ------------------------------------------------------------------------------
def _expand(req: pl.DataFrame, members: pl.DataFrame, geo: _Geometry) -> dict[str, np.ndarray]:
    """Per object of the representative tiles (tile, object_id order): address, stride, region, elements."""
    got = members.join(req.select("tile", "req_id", "address", "region", "stride", "extent", "count"),
                       on=["tile", "req_id"], how="left").sort("tile", "object_id")
    placed = got["address"].to_numpy() >= 0
    address = np.where(placed, got["address"].to_numpy() + got["member_offset"].to_numpy(), -1)
    count = got["count"].to_numpy()
    size = got["size_bytes"].to_numpy()
    whole = (count <= 1) & (got["member_offset"].to_numpy() == 0) & (got["alias_of"].is_null().to_numpy())
    ext = np.where(whole, got["extent"].to_numpy(), size)
    ext = np.where(count > 1, got["extent"].to_numpy(), ext)
    first_el = np.searchsorted(geo.el_offset, address, side="right") - 1
    last_el = np.searchsorted(geo.el_offset, address + np.maximum(ext, 1) - 1, side="right") - 1
    stride = np.where(count > 1, got["stride"].to_numpy(), ext)
    return {"address": address, "stride_bytes": stride, "region": got["region"].to_numpy(),
            "first_element": first_el, "last_element": last_el}
