"""Interval sweeps shared by the independent verifiers (placement, package images)."""

from __future__ import annotations

import numpy as np


def overlapping_pairs(tile: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All pairs (i, j) on one tile whose ``[start, end)`` ranges intersect (indices into the inputs).

    Vectorized over all tiles: ranges sorted by (tile, start) are compared k
    apart for k = 1, 2, ...; when no pair k apart intersects, none k + 1 apart
    can (a later start only moves further right), so the sweep stops.
    """
    order = np.lexsort((start, tile))
    t, s, e = tile[order], start[order], end[order]
    pi, pj = [], []
    n = len(order)
    for k in range(1, n):
        i = np.arange(n - k)
        hit = (t[i] == t[i + k]) & (s[i + k] < e[i])
        if not hit.any():
            break
        pi.append(order[i[hit]])
        pj.append(order[i[hit] + k])
    if not pi:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(pi), np.concatenate(pj)
