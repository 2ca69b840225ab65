"""Compiled per-tile kernels of :func:`toolkit.placement.place` (numba, ``cache=True``).

Inputs are flat arrays over the requests of several tiles, each tile a slice
``ptr[t]:ptr[t + 1]`` already sorted in placement order (support first, then
first use, interleaved first at a shared start, larger alignment, larger size;
auxiliary requests last).

:func:`place_greedy` is the joint lifetime-ordered allocator. Its free-space
index is the list of *live* placements of the tile, kept sorted by address
(binary-search insertion, never re-sorted): a request starting at event ``f``
drops every placement whose last event is below ``f`` (requests arrive in
first-use order, so those are dead for good), then one address-ordered sweep
finds the lowest aligned address in each allowed region, in preference order,
that avoids the live placements overlapping it in time. Auxiliary requests
instead avoid every address a non-auxiliary request ever occupied.
Element-exclusive requests (bank-separated) reserve whole elements of the
region they land in; executable requests and data never share a code element
while both are live (the blocked interval is widened to the element grid).
"""

from __future__ import annotations

import numpy as np
from numba import njit

SUPPORT, NORMAL, AUXILIARY = 0, 1, 2


@njit(cache=True)
def _round_up(x, a):  # pragma: no cover - compiled
    return ((x + a - 1) // a) * a


@njit(cache=True)
def _insert(index, count, i, address):  # pragma: no cover - compiled
    """Insert request ``i`` into ``index[:count]`` kept sorted by address; returns the new count."""
    lo = 0
    hi = count
    a = address[i]
    while lo < hi:
        mid = (lo + hi) // 2
        if address[index[mid]] <= a:
            lo = mid + 1
        else:
            hi = mid
    for q in range(count, lo, -1):
        index[q] = index[q - 1]
    index[lo] = i
    return count + 1


@njit(cache=True)
def _lowest_fit(index, count, i, aux_i, phase, first, last, address, extent, execu, code_elem, start, end, al,
                tot):  # pragma: no cover - compiled
    """Lowest address >= start, multiple of al, where ``tot`` bytes avoid every conflicting entry; -1 if none."""
    fi = first[i]
    li = last[i]
    cur = _round_up(start, al)
    for q in range(count):
        j = index[q]
        if not (first[j] <= li and last[j] >= fi) and not (aux_i and phase[j] != AUXILIARY):
            continue
        s0 = address[j]
        s1 = s0 + extent[j]
        if execu[i] != execu[j]:  # code and data never share an instruction element
            s0 = (s0 // code_elem) * code_elem
            s1 = _round_up(s1, code_elem)
        if s1 <= cur:
            continue
        if s0 >= cur + tot or s0 >= end:
            break
        cur = _round_up(s1, al)
    if cur + tot <= end:
        return cur
    return -1


@njit(cache=True)
def place_greedy(ptr, phase, first, last, size, align, count, excl, execu, pref,
                 rstart, rend, relem, code_elem, drop):  # pragma: no cover - compiled
    """Returns (address, region, stride, extent, tile_ok); address -1 where nothing fitted."""
    n = first.shape[0]
    tiles = ptr.shape[0] - 1
    address = np.full(n, -1, np.int64)
    region = np.full(n, -1, np.int64)
    stride = np.zeros(n, np.int64)
    extent = np.zeros(n, np.int64)
    tile_ok = np.ones(tiles, np.bool_)
    live = np.empty(n, np.int64)   # placements that may still be live, sorted by address
    ever = np.empty(n, np.int64)   # every placement of the tile, sorted by address
    for t in range(tiles):
        nlive = 0
        never = 0
        for i in range(ptr[t], ptr[t + 1]):
            if drop and phase[i] == NORMAL:
                # requests arrive in first-use order: a placement that ended before this one starts is dead
                k = 0
                for q in range(nlive):
                    j = live[q]
                    if last[j] >= first[i] or phase[j] == SUPPORT:
                        live[k] = j
                        k += 1
                nlive = k
            aux_i = phase[i] == AUXILIARY
            for p in range(pref.shape[1]):
                r = pref[i, p]
                if r < 0:
                    break
                if excl[i]:  # bank-separated: whole elements of the region
                    st = _round_up(size[i], relem[r])
                    al = max(align[i], relem[r])
                else:
                    al = align[i]
                    st = _round_up(size[i], al) if count[i] > 1 else size[i]
                tot = st * count[i] if count[i] > 1 else st
                if aux_i:
                    a = _lowest_fit(ever, never, i, True, phase, first, last, address, extent, execu, code_elem,
                                    rstart[r], rend[r], al, tot)
                else:
                    a = _lowest_fit(live, nlive, i, False, phase, first, last, address, extent, execu, code_elem,
                                    rstart[r], rend[r], al, tot)
                if a >= 0:
                    address[i] = a
                    region[i] = r
                    stride[i] = st
                    extent[i] = tot
                    break
            if address[i] < 0:
                tile_ok[t] = False
                continue
            nlive = _insert(live, nlive, i, address)
            never = _insert(ever, never, i, address)
    return address, region, stride, extent, tile_ok


@njit(cache=True)
def occupancy(ptr, first, last, address, extent, interleaved, region, lo, hi):  # pragma: no cover - compiled
    """Per tile and event (every first and last event): live, class and region bytes, free and largest free."""
    tiles = ptr.shape[0] - 1
    total = 0
    for t in range(tiles):
        total += 2 * (ptr[t + 1] - ptr[t])
    out_tile = np.empty(total, np.int64)
    out = np.zeros((total, 8), np.int64)
    rows = 0
    for t in range(tiles):
        a0 = ptr[t]
        a1 = ptr[t + 1]
        ev = np.unique(np.concatenate((first[a0:a1], last[a0:a1])))
        for e in ev:
            live_b = 0
            std = 0
            itl = 0
            r0 = 0
            r1 = 0
            nl = 0
            starts = np.empty(a1 - a0, np.int64)
            ends = np.empty(a1 - a0, np.int64)
            for i in range(a0, a1):
                if first[i] <= e and last[i] >= e and address[i] >= 0:
                    x = extent[i]
                    live_b += x
                    if interleaved[i]:
                        itl += x
                    else:
                        std += x
                    if region[i] == 0:
                        r0 += x
                    else:
                        r1 += x
                    starts[nl] = address[i]
                    ends[nl] = address[i] + x
                    nl += 1
            o = np.argsort(starts[:nl])
            cur = lo
            best = 0
            for q in range(nl):
                b = o[q]
                if starts[b] - cur > best:
                    best = starts[b] - cur
                if ends[b] > cur:
                    cur = ends[b]
            if hi - cur > best:
                best = hi - cur
            out_tile[rows] = t
            out[rows, 0] = e
            out[rows, 1] = live_b
            out[rows, 2] = std
            out[rows, 3] = itl
            out[rows, 4] = r0
            out[rows, 5] = r1
            out[rows, 6] = (hi - lo) - live_b
            out[rows, 7] = best
            rows += 1
    return out_tile[:rows], out[:rows]


@njit(cache=True)
def tile_keys(fields, local, starts, counts):  # pragma: no cover - compiled
    """Two 64-bit keys per tile mixing every field of every object with its position in the tile."""
    tiles = starts.shape[0]
    out = np.zeros((tiles, 3), np.uint64)
    m1 = np.uint64(0x100000001B3)
    for t in range(tiles):
        a = np.uint64(0)
        b = np.uint64(0)
        for i in range(starts[t], starts[t] + counts[t]):
            h = np.uint64(0x243F6A8885A308D3)
            for f in range(fields.shape[1]):
                h = (h ^ np.uint64(fields[i, f])) * m1
                h ^= h >> np.uint64(29)
            k = np.uint64(local[i])
            x = (h ^ (k * np.uint64(0x9E3779B97F4A7C15))) * np.uint64(0xBF58476D1CE4E5B9)
            y = (h + k * np.uint64(0x94D049BB133111EB)) * np.uint64(0xD6E8FEB86659FD93)
            a += x ^ (x >> np.uint64(31))
            b ^= y ^ (y >> np.uint64(27))
        out[t, 0] = a
        out[t, 1] = b
        out[t, 2] = np.uint64(counts[t])
    return out
