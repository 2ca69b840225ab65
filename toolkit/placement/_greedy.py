"""Compiled greedy passes of the arena solver (numba, ``cache=True``).

Both work on plain int64 arrays prepared by :mod:`toolkit.placement.arena`
(lifetimes compressed to *sections*, buffer ``i`` covering ``sl[i] <= s < su[i]``):

* :func:`first_fit` -- place buffers in a given order at the lowest offset that
  does not collide with any already placed, time-overlapping buffer (holes are
  reused). The greedy-by-size baseline is this with a largest-first order.
* :func:`skyline` -- "lowest next": repeatedly place the unplaced buffer whose
  lowest possible offset (the highest top below it, a range maximum over its
  sections) is smallest, ties broken by a rank. A lazy heap plus a segment tree,
  O(n log n) apart from re-pushes. This is the first descent of the search.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def first_fit(order, lower, upper, size, capacity):  # pragma: no cover - compiled
    """Lowest fitting offset for each buffer in ``order``; -1 where nothing fits below ``capacity``."""
    n = order.shape[0]
    offset = np.full(size.shape[0], -1, np.int64)
    placed = np.empty(n, np.int64)
    count = 0
    buf_off = np.empty(n, np.int64)
    buf_top = np.empty(n, np.int64)
    for k in range(n):
        i = order[k]
        lo = lower[i]
        up = upper[i]
        m = 0
        for q in range(count):
            j = placed[q]
            if lower[j] < up and upper[j] > lo:
                buf_off[m] = offset[j]
                buf_top[m] = offset[j] + size[j]
                m += 1
        idx = np.argsort(buf_off[:m])
        cur = 0
        sz = size[i]
        for t in range(m):
            p = idx[t]
            if buf_off[p] - cur >= sz:
                break
            if buf_top[p] > cur:
                cur = buf_top[p]
        if capacity > 0 and cur + sz > capacity:
            continue
        offset[i] = cur
        placed[count] = i
        count += 1
    return offset


@njit(cache=True)
def _seg_query(mx, tag, width, ql, qh):  # pragma: no cover - compiled
    """Range maximum over [ql, qh) of a bottom-up tree with never-pushed "raise to" tags."""
    best = 0
    p = (ql + width) >> 1
    while p > 0:
        if tag[p] > best:
            best = tag[p]
        p >>= 1
    p = (qh - 1 + width) >> 1
    while p > 0:
        if tag[p] > best:
            best = tag[p]
        p >>= 1
    lo = ql + width
    hi = qh + width
    while lo < hi:
        if lo & 1:
            if mx[lo] > best:
                best = mx[lo]
            lo += 1
        if hi & 1:
            hi -= 1
            if mx[hi] > best:
                best = mx[hi]
        lo >>= 1
        hi >>= 1
    return best


@njit(cache=True)
def _seg_raise(mx, tag, width, ql, qh, value):  # pragma: no cover - compiled
    """Raise every value in [ql, qh) to at least ``value``."""
    lo = ql + width
    hi = qh + width
    while lo < hi:
        if lo & 1:
            if value > tag[lo]:
                tag[lo] = value
            if value > mx[lo]:
                mx[lo] = value
            lo += 1
        if hi & 1:
            hi -= 1
            if value > tag[hi]:
                tag[hi] = value
            if value > mx[hi]:
                mx[hi] = value
        lo >>= 1
        hi >>= 1
    for leaf in (ql + width, qh - 1 + width):
        p = leaf >> 1
        while p > 0:
            v = max(mx[2 * p], mx[2 * p + 1], tag[p])
            mx[p] = v
            p >>= 1


@njit(cache=True)
def _heap_push(hk, hr, hi, count, key, rank, item):  # pragma: no cover - compiled
    c = count
    hk[c] = key
    hr[c] = rank
    hi[c] = item
    while c > 0:
        p = (c - 1) // 2
        if hk[p] < hk[c] or (hk[p] == hk[c] and hr[p] <= hr[c]):
            break
        hk[p], hk[c] = hk[c], hk[p]
        hr[p], hr[c] = hr[c], hr[p]
        hi[p], hi[c] = hi[c], hi[p]
        c = p
    return count + 1


@njit(cache=True)
def _heap_pop(hk, hr, hi, count):  # pragma: no cover - compiled
    count -= 1
    hk[0] = hk[count]
    hr[0] = hr[count]
    hi[0] = hi[count]
    c = 0
    while True:
        a = 2 * c + 1
        if a >= count:
            break
        b = a + 1
        m = a
        if b < count and (hk[b] < hk[a] or (hk[b] == hk[a] and hr[b] < hr[a])):
            m = b
        if hk[c] < hk[m] or (hk[c] == hk[m] and hr[c] <= hr[m]):
            break
        hk[c], hk[m] = hk[m], hk[c]
        hr[c], hr[m] = hr[m], hr[c]
        hi[c], hi[m] = hi[m], hi[c]
        c = m
    return count


@njit(cache=True)
def skyline(sl, su, size, rank, sections):  # pragma: no cover - compiled
    """Lowest-next placement without capacity; returns offsets (peak = max offset + size)."""
    n = size.shape[0]
    width = 1
    while width < max(sections, 1):
        width *= 2
    tree = np.zeros(2 * width, np.int64)
    tags = np.zeros(2 * width, np.int64)
    cap = 4 * n + 4
    hk = np.empty(cap, np.int64)
    hr = np.empty(cap, np.int64)
    hi = np.empty(cap, np.int64)
    count = 0
    for i in range(n):
        count = _heap_push(hk, hr, hi, count, 0, rank[i], i)
    offset = np.full(n, -1, np.int64)
    done = 0
    while done < n:
        key = hk[0]
        i = hi[0]
        count = _heap_pop(hk, hr, hi, count)
        m = _seg_query(tree, tags, width, sl[i], su[i])
        if m > key:
            if count >= cap:  # grow the heap
                cap *= 2
                hk2 = np.empty(cap, np.int64)
                hr2 = np.empty(cap, np.int64)
                hi2 = np.empty(cap, np.int64)
                hk2[:count] = hk[:count]
                hr2[:count] = hr[:count]
                hi2[:count] = hi[:count]
                hk, hr, hi = hk2, hr2, hi2
            count = _heap_push(hk, hr, hi, count, m, rank[i], i)
            continue
        offset[i] = m
        _seg_raise(tree, tags, width, sl[i], su[i], m + size[i])
        done += 1
    return offset
