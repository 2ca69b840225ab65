"""The exact fallback of the per-tile placement: MiniMalloc-style arena search around pinned buffers.

When the greedy pass and its other orders do not fit a tile, its requests are
handed to the arena search (:mod:`toolkit.placement.arena`) in addresses
counted down from the load limit, region windows as per-request floors and
caps. Executable requests are packed into whole instruction elements at the
start of the first code region and pinned there; requests that straddle a
region boundary are retried with one-unit barriers pinned at the boundaries.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from toolkit.placement import _tiles as T
from toolkit.placement.arena import _search, _sections

if TYPE_CHECKING:
    from toolkit.placement.place import _Geometry


def exact_tile(tile: pl.DataFrame, geo: _Geometry, seconds: float):
    """Exact arena search in addresses counted down from the load limit; (result or None, proven infeasible).

    Executable requests are packed back to back into whole instruction elements at the start of the first
    code region, and that block is one buffer pinned there over all time: data then never shares an
    instruction element with code. Infeasibility is only claimed when the search is exhausted with no such
    pinning (a tile without code) and no region barriers.
    """
    if tile["excl"].any() or (tile["phase"] == T.AUXILIARY).any():
        return None, False
    data = ~tile["exec"].to_numpy()
    unit = int(np.lcm.reduce(tile["align"].to_numpy()))
    top = geo.target.load_limit
    if unit > 64 or top % unit or geo.target.memory_start % unit:
        return None, False
    count = tile["count"].to_numpy()
    size = tile["size"].to_numpy()
    align = tile["align"].to_numpy()
    total = np.where(count > 1, -(-size // align) * align * count, size)
    stride = np.where(count > 1, -(-size // align) * align, size)
    address = np.zeros(tile.height, np.int64)
    pinned: list[tuple[int, int]] = []   # (offset, units) of buffers fixed over all time
    if not data.all():
        code = _code_block(total[~data], align[~data], geo)
        if code is None:
            return None, False
        address[~data], block_lo, block_bytes = code
        if (top - block_lo) % unit or block_bytes % unit:
            return None, False
        pinned.append(((top - block_lo - block_bytes) // unit, block_bytes // unit))
    d = tile.filter(pl.Series(data))
    found = _search_data(d, total[data], unit, pinned, geo, seconds)
    if isinstance(found, bool):
        return None, found and not pinned
    address[data] = found
    region = np.searchsorted(geo.rstart, address, side="right") - 1
    return {"address": address, "region": region, "stride": stride, "extent": total}, False


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


def _search_data(d: pl.DataFrame, total: np.ndarray, unit: int, pinned: list[tuple[int, int]], geo: _Geometry,
                 seconds: float) -> np.ndarray | bool:
    """Addresses of the data requests ``d`` around the ``pinned`` buffers, or whether infeasibility is proven.

    First without, then (if a request straddles a region boundary) with one-unit barriers at the region
    boundaries pinned over all time; only the search without barriers can prove infeasibility.
    """
    top = geo.target.load_limit
    usize = -(-total // unit)
    lo_addr = np.array([min(geo.rstart[r] for r in rs) for rs in d["regions"].to_list()], np.int64)
    hi_addr = np.array([max(geo.rend[r] for r in rs) for rs in d["regions"].to_list()], np.int64)
    caps = (top - lo_addr) // unit
    floors = -(-(top - hi_addr) // unit)
    first = d["first"].to_numpy().astype(np.int64)
    last = d["last"].to_numpy().astype(np.int64) + 1
    deadline = time.perf_counter() + seconds
    regions = d["regions"].to_list()
    bounds = sorted({int(x) for x in geo.rstart[geo.region_ids]} - {int(geo.target.memory_start)})
    for barriers in ([], [b for b in bounds if (top - b) % unit == 0 and b < top]):
        fixed = [((top - b) // unit, 1) for b in barriers] + pinned
        k = len(fixed)
        off = np.array([f[0] for f in fixed], np.int64)
        units = np.array([f[1] for f in fixed], np.int64)
        f = np.concatenate([first, np.full(k, first.min(initial=0), np.int64)])
        la = np.concatenate([last, np.full(k, last.max(initial=1), np.int64)])
        sl, su, sections = _sections(f, la)
        found, exhausted, _nodes, _restarts = _search(
            f, la, sl, su, np.concatenate([usize, units]), sections, geo.capacity // unit, deadline=deadline,
            caps=np.concatenate([caps, off + units]), floors=np.concatenate([floors, off]))
        if found is None:
            return bool(exhausted and not barriers)
        address = top - (found[: len(usize)] + usize) * unit
        region = np.searchsorted(geo.rstart, address, side="right") - 1
        inside = (address + total <= geo.rend[region]) & np.array(
            [int(r) in rs for r, rs in zip(region, regions, strict=True)], dtype=bool)
        if inside.all():
            return address
    return False
