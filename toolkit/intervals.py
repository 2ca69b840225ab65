"""Interval sweeps shared by the independent verifiers (placement, package images)."""

from __future__ import annotations

import numpy as np


def overlapping_pairs(tile: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All pairs (i, j) on one tile whose ``[start, end)`` ranges intersect (indices into the inputs).

    Sort and sweep, vectorized over all tiles with no loop: ranges sorted by
    (tile, start); range i meets exactly the ranges after it on its tile that
    start before its end, a run found with one ``searchsorted`` of (tile, end)
    among the sorted (tile, start) keys; the pairs are those runs expanded.
    """
    n = len(tile)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.lexsort((start, tile))
    t, s, e = (np.asarray(a, np.int64)[order] for a in (tile, start, end))
    tile_rank = np.cumsum(np.r_[False, t[1:] != t[:-1]])
    lo = int(s.min())
    span = int(s.max()) - lo + 2             # ends are clipped to one past the last start
    if (int(tile_rank[-1]) + 1) * span < 2**62:
        key = tile_rank * span + (s - lo)
        query = tile_rank * span + (np.clip(e, lo, lo + span - 1) - lo)
        after = np.searchsorted(key, query, side="left")      # first range on the tile starting at or past e
    else:   # keys too wide to pack: merge the ends among the starts (an end sorts before an equal start)
        merged = np.lexsort((np.r_[np.ones(n, np.int64), np.zeros(n, np.int64)], np.r_[s, e], np.r_[t, t]))
        is_start = merged < n
        before = np.cumsum(is_start) - is_start
        after = np.empty(n, np.int64)
        after[merged[~is_start] - n] = before[~is_start]
    counts = np.maximum(after - np.arange(n) - 1, 0)
    total = int(counts.sum())
    i = np.repeat(np.arange(n), counts)
    j = i + 1 + np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    return order[i], order[j]
