"""Multicast step assignment on per-lane colour bitsets (no conflict graph).

A group occupies its source's send lane and every destination's receive lane.
Receive tiles that carry exactly the same groups in a problem are merged into
one lane first (a K/V slice multicast to 31 row-block tiles puts the same groups
on all 31): tiles are keyed by a 64-bit sum of random per-group values, and a
collision could only merge lanes, which over-constrains but never breaks the
colouring. Each lane keeps the steps taken on it as one Python int bitset, so a
first fit costs one OR per lane a group touches; :func:`lane_squeeze` and
:func:`lane_improve` repair the top steps and run iterated greedy passes on the
same bitsets. :mod:`toolkit.exchange.steps` drives them.
"""

from __future__ import annotations

import numpy as np

IMPROVE_PASSES = 12
MAX_BLOCKERS = 3


def merged_lanes(gid: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Receive lanes with tiles that carry the same groups merged: (group, lane) memberships sorted by
    group then lane, and the number of merged lanes."""
    gid = gid.astype(np.int64)
    dst = dst.astype(np.int64)
    if len(dst) > 1 and not np.all((np.diff(dst) > 0) | ((np.diff(dst) == 0) & (np.diff(gid) > 0))):
        order = np.lexsort((gid, dst))
        gid, dst = gid[order], dst[order]
    cut = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]])
    count = np.diff(np.r_[cut, len(dst)])
    salt = np.random.default_rng(0x5EED).integers(0, 2**63, size=int(gid.max()) + 1, dtype=np.int64)
    with np.errstate(over="ignore"):
        key = (np.add.reduceat(salt.astype(np.uint64)[gid], cut)
               ^ (count.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)))
    _, tile_lane = np.unique(key, return_inverse=True)
    n_recv = int(tile_lane.max()) + 1
    member = np.unique(gid * n_recv + np.repeat(tile_lane, count))
    return member // n_recv, member % n_recv, n_recv


def lane_greedy(order, lanes: list[list[int]], n_lanes: int, n: int) -> list[int]:
    """First fit in ``order``: the lowest step free on every lane of the group (per-lane bitsets)."""
    masks = [0] * n_lanes
    colour = [0] * n
    for g in order:
        ls = lanes[g]
        used = 0
        for lane in ls:
            used |= masks[lane]
        bit = ~used & (used + 1)
        for lane in ls:
            masks[lane] |= bit
        colour[g] = bit.bit_length() - 1
    return colour


def lane_improve(colour: list[int], lanes: list[list[int]], n_lanes: int, bound: int) -> list[int]:
    """Iterated greedy on lane bitsets: recolour class by class; steps never grow."""
    n = len(colour)
    rng = np.random.default_rng(0)
    best, best_k = colour, max(colour) + 1
    cur = colour
    for it in range(IMPROVE_PASSES):
        arr = np.asarray(cur)
        k = int(arr.max()) + 1
        if it % 3 == 0:
            class_rank = np.arange(k)[::-1]
        elif it % 3 == 1:
            class_rank = np.argsort(np.argsort(-np.bincount(arr, minlength=k), kind="stable"))
        else:
            class_rank = rng.permutation(k)
        cur = lane_greedy(np.lexsort((np.arange(n), class_rank[arr])).tolist(), lanes, n_lanes, n)
        if max(cur) + 1 < best_k:
            best, best_k = cur, max(cur) + 1
        if best_k <= bound:
            break
    return best


def lane_squeeze(colour: list[int], lanes: list[list[int]], n_lanes: int, bound: int) -> list[int]:
    """Empty the top step while possible: move each of its groups to a lower step free on all its lanes, or
    to one held by at most ``MAX_BLOCKERS`` groups that can each move elsewhere. Every move keeps the
    colouring proper, so stopping half way is safe."""
    colour = list(colour)
    k = max(colour) + 1
    at = [-1] * (n_lanes * k)      # lane x step -> group
    masks = [0] * n_lanes
    for g, c in enumerate(colour):
        for lane in lanes[g]:
            at[lane * k + c] = g
            masks[lane] |= 1 << c

    def move(g: int, c: int) -> None:
        old = colour[g]
        for lane in lanes[g]:
            at[lane * k + old] = -1
            masks[lane] &= ~(1 << old)
            at[lane * k + c] = g
            masks[lane] |= 1 << c
        colour[g] = c

    def free_below(g: int, top: int) -> int:
        used = 0
        for lane in lanes[g]:
            used |= masks[lane]
        return ~used & ((1 << top) - 1)

    top = k - 1
    while top + 1 > bound:
        for g in [g for g in range(len(colour)) if colour[g] == top]:
            free = free_below(g, top)
            if free:
                move(g, (free & -free).bit_length() - 1)
                continue
            for c in range(top):
                blockers = {at[lane * k + c] for lane in lanes[g]}
                blockers.discard(-1)
                if len(blockers) > MAX_BLOCKERS:
                    continue
                # blockers share step c, so they share no lane: each moves on its own
                moves = []
                for h in blockers:
                    f = free_below(h, top) & ~(1 << c)
                    if not f:
                        break
                    moves.append((h, (f & -f).bit_length() - 1))
                else:
                    for h, d in moves:
                        move(h, d)
                    move(g, c)
                    break
            else:
                return colour
        top -= 1
    return colour
