"""Tie-break orders of the arena solver: which buffer the skyline pass and the search restarts take first.

Contract: ``_ranks`` gives, per named order, a rank per buffer (rank 0 first);
``_rank_keys`` the keys behind each order, so the search can re-sort the parts
it splits off; both take section indices (``sl``, ``su``) from
:func:`toolkit.placement.arena._sections`. Pure numpy, no state.
"""

from __future__ import annotations

import numpy as np


def _ranks(sl: np.ndarray, su: np.ndarray, size: np.ndarray, lower: np.ndarray, upper: np.ndarray,
           sections: int, keys: dict[str, tuple[np.ndarray, int]] | None = None) -> list[tuple[str, np.ndarray]]:
    """Tie-break orders (rank 0 tried first) used by the skyline pass and the search restarts.

    W = lifetime length, A = area (size x length), T = the largest total of live
    bytes over the buffer's sections, Z = size, S = start, C = number of
    sections spanned (lifetime in distinct endpoints, not in time), O = number
    of buffers overlapping in time. "LZR" puts buffers
    live over at least half of all sections first (long-lived ones belong at the
    bottom, not on top of the peak), then the largest, latest-starting first.
    The search restarts use the first SEARCH_HEURISTICS only. ``keys``: the
    :func:`_rank_keys` of the same buffers when the caller has them already.
    """
    out = []
    for name, (rows, _dyn) in (keys or _rank_keys(sl, su, size, lower, upper, sections)).items():
        order = np.lexsort((np.arange(len(size)), *rows[::-1]))
        rank = np.empty(len(size), np.int64)
        rank[order] = np.arange(len(size))
        out.append((name, rank))
    return out


def _rank_keys(sl, su, size, lower, upper, sections, total=None) -> dict[str, tuple[np.ndarray, int]]:
    """Per order of :func:`_ranks`: its keys (rows, most significant first, ascending) and the row of T (-1: none).
    ``total``: the :func:`_max_section_total` of the same buffers when the caller has it already.

    The search re-sorts the parts it splits off on these keys, T recomputed over
    the buffers still unplaced (as MiniMalloc does when it solves a new partition).
    """
    width = upper - lower
    area = size * width
    total = _max_section_total(sl, su, size, sections) if total is None else total
    span = su - sl
    specs = {
        "WAT": ((-width, -area, -total), 2),
        "TAW": ((-total, -area, -width), 0),
        "TWA": ((-total, -width, -area), 0),
        "TCZ": ((-total, -span, -size), 0),
        "CA": ((-span, -area), -1),
        "TO": ((-total, -_overlap_counts(sl, su)), 0),
        "ZW": ((-size, -width), -1),
        "SZ": ((lower, -size), -1),
        "LZR": (((2 * span < sections).astype(np.int64), -size, -lower), -1),
    }
    return {name: (np.stack([np.asarray(k, np.int64) for k in keys]), dyn) for name, (keys, dyn) in specs.items()}


def _overlap_counts(sl: np.ndarray, su: np.ndarray) -> np.ndarray:
    """Per buffer, how many other buffers share a section with it."""
    ends = np.sort(su)
    starts = np.sort(sl)
    before = np.searchsorted(ends, sl, side="right")
    after = len(sl) - np.searchsorted(starts, su, side="left")
    return len(sl) - before - after - 1


def _max_section_total(sl, su, size, sections) -> np.ndarray:
    live = np.zeros(sections + 1, np.int64)
    np.add.at(live, sl, size)
    np.add.at(live, su, -size)
    live = np.cumsum(live)[:sections]
    # range maximum of live over [sl, su) via a sparse table
    table = [live]
    k = 1
    while 2 * k <= sections:
        prev = table[-1]
        table.append(np.maximum(prev[:-k], prev[k:]))
        k *= 2
    length = np.maximum(su - sl, 1)
    level = np.floor(np.log2(length)).astype(np.int64)
    out = np.empty(len(size), np.int64)
    for lv in np.unique(level):
        sel = level == lv
        t = table[lv]
        out[sel] = np.maximum(t[sl[sel]], t[su[sel] - (1 << lv)])
    return out
