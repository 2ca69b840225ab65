"""DSATUR on the conflict graph of multicast groups, with the repairs that bring it down to the lane bound.

Contract: :func:`conflict_csr` builds the conflict graph (groups sharing a
send or a receive lane) as CSR arrays; ``_dsatur_colour(gid, src, dst, bound)``
colours it with heap DSATUR (the same tie-breaking as networkx's
``greedy_color(strategy="DSATUR")`` on nodes in ascending group order), then
empties the top steps (``_squeeze``) and runs iterated greedy passes
(``_improve``) while above ``bound``; every colouring returned is proper.
:mod:`toolkit.exchange.steps` calls it only on small conflict graphs.
"""

from __future__ import annotations

import heapq

import numpy as np

from toolkit.exchange.lanes import IMPROVE_PASSES, MAX_BLOCKERS


def conflict_csr(gid: np.ndarray, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Conflict graph as CSR (indptr, neighbours): groups sharing a send or a receive lane."""
    n = len(src)
    # Lane memberships: send lanes are the source ids, receive lanes are offset past them.
    shift = int(src.max()) + 1
    member = np.concatenate([np.arange(n, dtype=np.int64), gid.astype(np.int64)])
    lane = np.concatenate([src.astype(np.int64), dst.astype(np.int64) + shift])
    order = np.lexsort((member, lane))
    member = member[order]
    lane = lane[order]
    starts = np.flatnonzero(np.r_[True, lane[1:] != lane[:-1]])
    sizes = np.diff(np.r_[starts, len(lane)])
    size_per = np.repeat(sizes, sizes)
    start_per = np.repeat(starts, sizes)
    left = np.repeat(member, size_per)
    offs = np.arange(len(left)) - np.repeat(np.cumsum(size_per) - size_per, size_per)
    right = member[np.repeat(start_per, size_per) + offs]
    keep = left != right
    key = np.sort(left[keep] * n + right[keep])
    key = key[np.r_[True, key[1:] != key[:-1]]] if len(key) else key
    left = key // n
    right = key % n
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(left, minlength=n), out=indptr[1:])
    return indptr, right

def _dsatur_colour(gid: np.ndarray, src: np.ndarray, dst: np.ndarray, bound: int) -> list[int]:
    n = len(src)
    indptr, nbr = conflict_csr(gid, src, dst)
    adj = [nbr[indptr[g]:indptr[g + 1]].tolist() for g in range(n)]
    colour = _dsatur(adj, np.diff(indptr).tolist())
    if max(colour) + 1 > bound:
        colour = _squeeze(adj, colour, bound)
    if max(colour) + 1 > bound:
        colour = _squeeze(adj, _improve(adj, colour, bound), bound)
    return colour


def _dsatur(adj: list[list[int]], degree: list[int]) -> list[int]:
    """DSATUR: colour the most saturated group next (ties: higher degree, lower id); smallest free colour.

    Heap keys are single ints ordering (-saturation, -degree, id), so pops compare
    machine-sized ints; an entry is stale when its saturation is out of date.
    """
    n = len(adj)
    colour = [-1] * n
    seen: list[set[int]] = [set() for _ in range(n)]
    top = max(degree, default=0) + 1
    span = top * n               # one saturation level
    base = (n + 1) * span        # saturation 0
    dkey = [(top - 1 - d) * n + g for g, d in enumerate(degree)]
    heap = [base + k for k in dkey]
    heapq.heapify(heap)
    push = heapq.heappush
    pop = heapq.heappop
    while heap:
        key = pop(heap)
        g = key % n
        if colour[g] >= 0 or base - (key - dkey[g]) // span * span != len(seen[g]) * span:
            continue  # stale entry: a fresher one is in the heap
        used = seen[g]
        c = 0
        while c in used:
            c += 1
        colour[g] = c
        for h in adj[g]:
            if colour[h] < 0:
                s = seen[h]
                if c not in s:
                    s.add(c)
                    push(heap, base - len(s) * span + dkey[h])
    return colour


def _greedy(adj: list[list[int]], order: list[int], n: int) -> list[int]:
    colour = [-1] * n
    for g in order:
        used = {colour[h] for h in adj[g]}
        c = 0
        while c in used:
            c += 1
        colour[g] = c
    return colour


def _improve(adj: list[list[int]], colour: list[int], bound: int) -> list[int]:
    """Iterated greedy: recolour class by class; a class stays independent, so steps never grow."""
    n = len(adj)
    rng = np.random.default_rng(0)
    best = colour
    best_k = max(colour) + 1
    cur = colour
    for it in range(IMPROVE_PASSES):
        arr = np.asarray(cur)
        k = int(arr.max()) + 1
        sizes = np.bincount(arr, minlength=k)
        if it % 3 == 0:
            class_rank = np.arange(k)[::-1]                      # reverse colour order
        elif it % 3 == 1:
            class_rank = np.argsort(np.argsort(-sizes, kind="stable"))  # largest class first
        else:
            class_rank = rng.permutation(k)
        order = np.lexsort((np.arange(n), class_rank[arr])).tolist()
        cur = _greedy(adj, order, n)
        k_new = max(cur) + 1
        if k_new < best_k:
            best, best_k = cur, k_new
        if best_k <= bound:
            break
    return best


def _squeeze(adj: list[list[int]], colour: list[int], bound: int) -> list[int]:
    """Empty the top step while possible: move each of its groups down, first moving aside its few blockers.

    Every move keeps the colouring proper, so stopping half way is safe.
    """
    colour = list(colour)
    top = max(colour)
    while top + 1 > bound:
        for g in [g for g in range(len(adj)) if colour[g] == top]:
            if not _move_down(adj, colour, g, top):
                return colour
        top -= 1
    return colour


def _move_down(adj: list[list[int]], colour: list[int], g: int, top: int) -> bool:
    by_colour: dict[int, list[int]] = {}
    for h in adj[g]:
        by_colour.setdefault(colour[h], []).append(h)
    for c in range(top):
        if c not in by_colour:
            colour[g] = c
            return True
    for c in range(top):
        blockers = by_colour[c]
        if len(blockers) > MAX_BLOCKERS:
            continue
        # blockers share colour c, so they are pairwise independent: each moves on its own
        moves = []
        for h in blockers:
            used = {colour[x] for x in adj[h]}
            d = next((d for d in range(top) if d != c and d not in used), -1)
            if d < 0:
                break
            moves.append((h, d))
        else:
            for h, d in moves:
                colour[h] = d
            colour[g] = c
            return True
    return False
