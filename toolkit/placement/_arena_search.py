"""The bounded exact search of the arena solver (MiniMalloc-style), driving the compiled kernel.

Contract: ``_search(lower, upper, sl, su, size, sections, capacity, deadline=...)``
returns ``(offsets or None, exhausted, nodes, restarts)``: offsets that fit
``capacity`` (per-buffer ``caps`` and ``floors`` when given), or None with
``exhausted`` True only when the whole search space was refuted. It restarts
over the tie-break orders of :mod:`toolkit.placement._arena_orders`, doubling
the node budget every round, until ``max_nodes`` nodes are spent (a
reproducible bound: the same input always gets the same answer) or
``deadline`` (a ``time.perf_counter()`` value, a wall-clock safety cap) passes.
The branching itself runs in :mod:`toolkit.placement._kernels`.
"""

from __future__ import annotations

import time

import numpy as np

from toolkit.placement import _kernels as K
from toolkit.placement._arena_orders import _max_section_total, _rank_keys, _ranks

#: exact search only below this many time-overlapping buffer pairs (memory for the adjacency)
SEARCH_MAX_PAIRS = 4_000_000
#: nodes per call into the compiled search between time checks
SEARCH_SLICE = 20_000
#: how many tie-break orders the search restarts cycle through
SEARCH_HEURISTICS = 8
#: shuffled-tie orders added to every round of restarts
SEARCH_SHUFFLED = 2


def _adjacency(sl: np.ndarray, su: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    n = len(sl)
    order = np.argsort(sl, kind="stable")
    # pairs (i, j) with sl[j] in [sl[i], su[i]) and j after i in start order, per row via searchsorted
    ssl = sl[order]
    hi = np.searchsorted(ssl, su[order], side="left")
    counts = hi - np.arange(n) - 1
    total = int(counts.sum())
    if total > SEARCH_MAX_PAIRS:
        return None
    a = np.repeat(np.arange(n), counts)
    starts = np.repeat(np.arange(n) + 1 - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    b = np.arange(total) + starts
    a, b = order[a], order[b]
    src = np.concatenate([a, b])
    dst = np.concatenate([b, a])
    o = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    return ptr, dst[o].astype(np.int64)


def _previous_identical(sl, su, size) -> np.ndarray:
    """Index of the previous buffer with the same sections and size (-1: none)."""
    n = len(size)
    order = np.lexsort((np.arange(n), size, su, sl))
    key_same = np.zeros(n, bool)
    key_same[1:] = (sl[order][1:] == sl[order][:-1]) & (su[order][1:] == su[order][:-1]) & (
        size[order][1:] == size[order][:-1]
    )
    prev = np.full(n, -1, np.int64)
    prev[order[key_same]] = order[np.flatnonzero(key_same) - 1]
    return prev


def _static_parts(sl: np.ndarray, su: np.ndarray, crossing: np.ndarray, sections: int) -> np.ndarray:
    """Flat [lo0, hi0, lo1, hi1, ...] of the time ranges no buffer crosses between (each holds a buffer)."""
    cuts = np.flatnonzero(crossing[1:sections] == 0) + 1
    bounds = np.concatenate([[0], cuts, [sections]]).astype(np.int64)
    starts = np.zeros(sections + 1, np.int64)
    np.add.at(starts, sl, 1)
    held = np.add.reduceat(starts[:sections], bounds[:-1]) > 0 if sections else np.zeros(0, bool)
    keep = np.flatnonzero(held)
    if keep.size == 0:
        return np.array([0, sections], np.int64)
    return np.stack([bounds[:-1][keep], bounds[1:][keep]], axis=1).ravel()


def _search(lower, upper, sl, su, size, sections, capacity, *, deadline, caps=None, floors=None, max_nodes=None):
    """Restarted depth-first search; returns (offsets or None, exhausted, nodes, restarts).

    Stops after ``max_nodes`` nodes (None: no node bound) or at ``deadline``, whichever comes first.

    ``caps`` (per buffer, default ``capacity``) bound each buffer's top and
    ``floors`` (default 0) its offset; the search stays exact with both.
    """
    adj = _adjacency(sl, su)
    if adj is None:
        return None, False, 0, 0
    ptr, nbr = adj
    prev = _previous_identical(sl, su, size)
    n = len(size)
    cap = np.full(n, capacity, np.int64) if caps is None else np.minimum(np.asarray(caps, np.int64), capacity)
    floor = np.zeros(n, np.int64) if floors is None else np.asarray(floors, np.int64)
    if floors is not None:  # identical buffers must also share their bounds to be interchangeable
        prev = np.where((prev >= 0) & (cap[np.maximum(prev, 0)] == cap) & (floor[np.maximum(prev, 0)] == floor),
                        prev, -1)
    total = _max_section_total(sl, su, size, sections)
    rank_keys = _rank_keys(sl, su, size, lower, upper, sections, total=total)
    ranks = _ranks(sl, su, size, lower, upper, sections, keys=rank_keys)[:SEARCH_HEURISTICS]
    no_keys = (np.zeros((0, n), np.int64), -1)
    # every order re-sorts its split-off parts on the remaining totals (running the T orders static as well,
    # in the same round, was slower on 7 of the 11 MiniMalloc instances)
    plans = [(rank, rank_keys[name]) for name, rank in ranks]
    rlog = np.zeros(min(n * (n + 1) // 2, 64 * n + (1 << 16)) + 1, np.int64)
    live = np.zeros(sections + 1, np.int64)
    np.add.at(live, sl, size)
    np.add.at(live, su, -size)
    live = np.cumsum(live)[:sections]
    crossing = np.zeros(sections + 2, np.int64)
    np.add.at(crossing, sl + 1, 1)
    np.add.at(crossing, su, -1)
    crossing = np.cumsum(crossing)[: sections + 1]
    parts = _static_parts(sl, su, crossing, sections)
    nodes = 0
    budget = 2 * n
    restarts = 0
    rng = np.random.default_rng(0)
    per_round = len(plans) + SEARCH_SHUFFLED
    area = size * (upper - lower)
    limit = max_nodes if max_nodes is not None else np.iinfo(np.int64).max
    while nodes < limit and time.perf_counter() < deadline:
        slot = restarts % per_round
        rkeys, dyn = no_keys
        if slot < len(plans):
            rank = plans[slot][0].copy()  # the search re-sorts split-off parts in place
            rkeys, dyn = plans[slot][1]
        else:  # diversify: a coarse area or total order with ties shuffled
            noise = rng.random(n)
            keys = [(-area, -total), (-total, -area)][slot % 2]
            rank = np.empty(n, np.int64)
            rank[np.lexsort((noise, *(k // max(int(np.abs(k).max()) // 64, 1) for k in keys)))] = np.arange(n)
        st = np.zeros(8, np.int64)
        frames = np.zeros((n + 2, 6), np.int64)
        # the root frame is the first independent part; the others wait in the cut buffer
        frames[0] = (parts[0], parts[1], 0, -1, 0, len(parts) - 2)
        st[6] = len(parts) - 2
        state = dict(
            m=floor.copy(), placed=np.zeros(n, np.bool_), offsets=np.zeros(n, np.int64),
            seq=np.full(n + 1, -1, np.int64), h=np.zeros(sections, np.int64), rem=live.copy(),
            cross=crossing.copy(), undo_j=np.zeros(len(nbr) + 1, np.int64), undo_v=np.zeros(len(nbr) + 1, np.int64),
            undo_ptr=np.zeros(n + 1, np.int64), hundo=np.zeros(int((su - sl).sum()) + 1, np.int64),
            hundo_ptr=np.zeros(n + 1, np.int64), cutbuf=np.zeros(4 * (sections + n) + 8, np.int64),
            cut_ptr=np.zeros(n + 1, np.int64), hatless=np.zeros(n + 1, np.bool_),
            rlog_j=rlog, rlog_v=np.zeros_like(rlog), rlog_at=np.zeros(n + 1, np.int64),
        )
        state["cutbuf"][: len(parts) - 2] = parts[2:]
        spent = 0
        status = K.RUNNING
        while (status == K.RUNNING and spent < budget and nodes + spent < limit
               and time.perf_counter() < deadline):
            before = int(st[1])
            status = K.search(
                st, sl, su, size, cap, rank, prev, ptr, nbr, capacity,
                min(SEARCH_SLICE, budget - spent, limit - nodes - spent),
                state["m"], state["placed"], state["offsets"], state["seq"], state["h"], state["rem"],
                state["cross"], state["undo_j"], state["undo_v"], state["undo_ptr"], state["hundo"],
                state["hundo_ptr"], frames, state["cutbuf"], state["cut_ptr"], state["hatless"],
                rkeys, dyn, state["rlog_j"], state["rlog_v"], state["rlog_at"],
            )
            spent += int(st[1]) - before
        nodes += int(st[1])
        if status == K.FOUND:
            return state["offsets"], False, nodes, restarts
        if status == K.EXHAUSTED:
            return None, True, nodes, restarts
        restarts += 1
        if restarts % per_round == 0:
            budget *= 2
    return None, False, nodes, restarts
