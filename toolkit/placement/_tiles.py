"""Compiled per-tile kernels of :func:`toolkit.placement.place` (numba, ``cache=True``).

Inputs are flat arrays over the requests of several tiles, each tile a slice
``ptr[t]:ptr[t + 1]`` already sorted in placement order (support first, then
first use, interleaved first at a shared start, larger alignment, larger size;
auxiliary requests last).

:func:`place_greedy` is the joint lifetime-ordered allocator. Its free-space
index is the list of *live* placements of the tile, kept incrementally: a
request starting at event ``f`` drops every placement whose last event is below
``f`` (requests arrive in first-use order, so those are dead for good), then
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
def place_greedy(ptr, phase, first, last, size, align, count, excl, execu, pref,  # noqa: C901
                 rstart, rend, relem, code_elem, drop):  # pragma: no cover - compiled
    """Returns (address, region, stride, extent, tile_ok); address -1 where nothing fitted."""
    n = first.shape[0]
    tiles = ptr.shape[0] - 1
    address = np.full(n, -1, np.int64)
    region = np.full(n, -1, np.int64)
    stride = np.zeros(n, np.int64)
    extent = np.zeros(n, np.int64)
    tile_ok = np.ones(tiles, np.bool_)
    npref = pref.shape[1]
    live = np.empty(n, np.int64)
    ever = np.empty(n, np.int64)
    bs = np.empty(n, np.int64)
    be = np.empty(n, np.int64)
    for t in range(tiles):
        a0 = ptr[t]
        a1 = ptr[t + 1]
        nlive = 0
        never = 0
        for i in range(a0, a1):
            fi = first[i]
            li = last[i]
            if drop and phase[i] == NORMAL:
                # drop dead placements: later normal requests start at or after fi
                k = 0
                for q in range(nlive):
                    j = live[q]
                    if last[j] >= fi or phase[j] == SUPPORT:
                        live[k] = j
                        k += 1
                nlive = k
            # blocked address intervals (code/data conflicts widened to the instruction element grid)
            aux_i = phase[i] == AUXILIARY
            src = ever if aux_i else live
            cnt = never if aux_i else nlive
            nb = 0
            for q in range(cnt):
                j = src[q]
                overlap = first[j] <= li and last[j] >= fi
                if aux_i and phase[j] != AUXILIARY:
                    overlap = True
                if not overlap:
                    continue
                s0 = address[j]
                s1 = address[j] + extent[j]
                if execu[i] != execu[j]:
                    s0 = (s0 // code_elem) * code_elem
                    s1 = _round_up(s1, code_elem)
                bs[nb] = s0
                be[nb] = s1
                nb += 1
            order = np.argsort(bs[:nb])
            placed = False
            for p in range(npref):
                r = pref[i, p]
                if r < 0:
                    break
                if excl[i]:
                    e = relem[r]
                    st = _round_up(size[i], e)
                    al = max(align[i], e)
                else:
                    al = align[i]
                    st = _round_up(size[i], al) if count[i] > 1 else size[i]
                tot = st * count[i] if count[i] > 1 else st
                cur = _round_up(rstart[r], al)
                for q in range(nb):
                    b = order[q]
                    if be[b] <= cur:
                        continue
                    if bs[b] >= cur + tot:
                        break
                    cur = _round_up(be[b], al)
                if cur + tot <= rend[r]:
                    address[i] = cur
                    region[i] = r
                    stride[i] = st
                    extent[i] = tot
                    placed = True
                    break
            if not placed:
                tile_ok[t] = False
                continue
            live[nlive] = i
            nlive += 1
            ever[never] = i
            never += 1
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
