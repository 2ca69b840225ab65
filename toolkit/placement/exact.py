"""The exact fallback of the per-tile placement: MiniMalloc-style arena search around pinned buffers.

When the greedy pass and its other orders do not fit a tile, its requests are
handed to the arena search (:mod:`toolkit.placement.arena`) in addresses
counted down from the load limit, region windows as per-request floors and
caps. Executable requests are packed into whole instruction elements at the
start of the first code region and pinned there; requests that straddle a
region boundary are retried with one-unit barriers pinned at the boundaries.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING

import numpy as np

from toolkit.placement import _tiles as T
from toolkit.placement.arena import _search, _sections

if TYPE_CHECKING:
    from toolkit.placement.place import _Geometry


def exact_tile(tile: dict[str, np.ndarray], geo: _Geometry, seconds: float, max_nodes: int | None = None):
    """Exact arena search in addresses counted down from the load limit; (result or None, proven infeasible,
    search nodes spent). At most ``max_nodes`` nodes (None: unbounded) and ``seconds`` seconds are spent.

    ``tile`` holds one tile's request columns in placement order (``results.arrays`` without ``ptr``:
    phase, first, last, size, align, count, excl, exec, and ``pref``, the allowed regions padded with -1).

    Executable requests are packed back to back into whole instruction elements at the start of the first
    code region, and that block is one buffer pinned there over all time: data then never shares an
    instruction element with code. Infeasibility is only claimed when the search is exhausted with no such
    pinning (a tile without code) and no region barriers.
    """
    if tile["excl"].any() or (tile["phase"] == T.AUXILIARY).any():
        return None, False, 0
    _compiled()
    data = ~tile["exec"]
    unit = int(np.lcm.reduce(tile["align"]))
    top = geo.target.load_limit
    if unit > 64 or top % unit or geo.target.memory_start % unit:
        return None, False, 0
    count = tile["count"]
    size = tile["size"]
    align = tile["align"]
    total = np.where(count > 1, -(-size // align) * align * count, size)
    stride = np.where(count > 1, -(-size // align) * align, size)
    address = np.zeros(len(size), np.int64)
    pinned: list[tuple[int, int]] = []   # (offset, units) of buffers fixed over all time
    if not data.all():
        code = _code_block(total[~data], align[~data], geo)
        if code is None:
            return None, False, 0
        address[~data], block_lo, block_bytes = code
        if (top - block_lo) % unit or block_bytes % unit:
            return None, False, 0
        pinned.append(((top - block_lo - block_bytes) // unit, block_bytes // unit))
    d = {k: tile[k][data] for k in ("first", "last", "pref")}
    found, nodes = _search_data(d, total[data], unit, pinned, geo, seconds, max_nodes)
    if isinstance(found, bool):
        return None, found and not pinned, nodes
    address[data] = found
    region = np.searchsorted(geo.rstart, address, side="right") - 1
    return {"address": address, "region": region, "stride": stride, "extent": total}, False, nodes


@functools.cache
def _compiled() -> None:
    """Compile (or load from numba's cache) the search kernels once, on a two-buffer instance, so the first
    tile's wall-clock cap is not spent compiling."""
    lo, up, size = np.array([0, 1], np.int64), np.array([2, 2], np.int64), np.array([1, 1], np.int64)
    sl, su, sections = _sections(lo, up)
    _search(lo, up, sl, su, size, sections, 2, deadline=float("inf"), max_nodes=100,
            caps=np.array([2, 2], np.int64), floors=np.zeros(2, np.int64))


def _code_block(total: np.ndarray, align: np.ndarray, geo: _Geometry) -> tuple[np.ndarray, int, int] | None:
    """Addresses of executable requests packed from the first code region's start, the block start and bytes."""
    g = geo.target.instruction_element_bytes
    lo = int(min(geo.rstart[r] for r in geo.code))
    region = next(r for r in geo.code if geo.rstart[r] == lo)
    offsets = np.zeros(len(total), np.int64)
    at = 0
    for i in range(len(total)):   # a handful of code objects per tile
        at = -(-at // int(align[i])) * int(align[i])
        offsets[i] = at
        at += int(total[i])
    block = -(-at // g) * g
    if lo % g or lo + block > geo.rend[region]:
        return None
    return lo + offsets, lo, block


def _search_data(d: dict[str, np.ndarray], total: np.ndarray, unit: int, pinned: list[tuple[int, int]], geo: _Geometry,
                 seconds: float, max_nodes: int | None) -> tuple[np.ndarray | bool, int]:
    """Addresses of the data requests ``d`` around the ``pinned`` buffers, or whether infeasibility is proven;
    and the search nodes spent (both passes share ``max_nodes``).

    First without, then (if a request straddles a region boundary) with one-unit barriers at the region
    boundaries pinned over all time; only the search without barriers can prove infeasibility.
    """
    top = geo.target.load_limit
    usize = -(-total // unit)
    pref = d["pref"]
    listed = pref >= 0
    r = np.maximum(pref, 0)
    lo_addr = np.where(listed, geo.rstart[r], np.iinfo(np.int64).max).min(axis=1)
    hi_addr = np.where(listed, geo.rend[r], np.iinfo(np.int64).min).max(axis=1)
    caps = (top - lo_addr) // unit
    floors = -(-(top - hi_addr) // unit)
    first = d["first"].astype(np.int64)
    last = d["last"].astype(np.int64) + 1
    deadline = time.perf_counter() + seconds
    bounds = sorted({int(x) for x in geo.rstart[geo.region_ids]} - {int(geo.target.memory_start)})
    spent = 0
    for barriers in ([], [b for b in bounds if (top - b) % unit == 0 and b < top]):
        left = None if max_nodes is None else max_nodes - spent
        if left is not None and left <= 0:
            return False, spent
        fixed = [((top - b) // unit, 1) for b in barriers] + pinned
        k = len(fixed)
        off = np.array([f[0] for f in fixed], np.int64)
        units = np.array([f[1] for f in fixed], np.int64)
        f = np.concatenate([first, np.full(k, first.min(initial=0), np.int64)])
        la = np.concatenate([last, np.full(k, last.max(initial=1), np.int64)])
        sl, su, sections = _sections(f, la)
        found, exhausted, nodes, _restarts = _search(
            f, la, sl, su, np.concatenate([usize, units]), sections, geo.capacity // unit, deadline=deadline,
            caps=np.concatenate([caps, off + units]), floors=np.concatenate([floors, off]), max_nodes=left)
        spent += nodes
        if found is None:
            return bool(exhausted and not barriers), spent
        address = top - (found[: len(usize)] + usize) * unit
        region = np.searchsorted(geo.rstart, address, side="right") - 1
        inside = (address + total <= geo.rend[region]) & (pref == region[:, None]).any(axis=1)
        if inside.all():
            return address, spent
    return False, spent
