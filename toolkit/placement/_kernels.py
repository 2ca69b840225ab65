"""Compiled exact search of the arena solver (numba, ``cache=True``); the greedy passes are in ``_greedy``.

Every kernel works on plain int64 arrays prepared by :mod:`toolkit.placement.arena`:
lifetimes compressed to *sections* (the elementary intervals between distinct
endpoints), buffer ``i`` covering sections ``sl[i] <= s < su[i]``.

:func:`search` is a resumable depth-first branch and bound over canonical
solutions (buffers placed in non-decreasing ``(offset, rank)`` order, each at
the top of the highest placed buffer it overlaps). Prunes when some remaining
buffer, or the stack of remaining buffers live in some section, cannot fit
below the capacity; a frame-wide bound on the next offset (the largest
remaining stack) cuts every later candidate at once. Identical buffers are
placed in index order only. "Hatless" pruning: when the buffer just tried had
no unplaced buffer overlapping it, none of its siblings is tried after it
fails. Parts that no unplaced buffer crosses are solved one after the other,
each re-sorted on the bytes that remain (dynamic totals). Called repeatedly
with a node budget so Python can enforce the time limit.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# search status codes
RUNNING = 0
FOUND = 1
EXHAUSTED = 2

# frame table columns: a frame is an independent part of the problem (a range of sections)
F_LO, F_HI, F_D0, F_SPLIT, F_NEXT, F_END = 0, 1, 2, 3, 4, 5


@njit(cache=True)
def _undo(d, seq, sl, su, size, m, placed, h, rem, cross, undo_j, undo_v, undo_ptr, hundo, hundo_ptr,
          uptr, hptr):  # pragma: no cover - compiled
    """Undo the placement made at depth ``d`` (the last one still applied); returns (uptr, hptr)."""
    cur = seq[d]
    p = undo_ptr[d]
    while uptr > p:
        uptr -= 1
        m[undo_j[uptr]] = undo_v[uptr]
    p = hundo_ptr[d]
    k = sl[cur]
    while hptr > p:
        hptr -= 1
        h[k + (hptr - p)] = hundo[hptr]
    for s in range(sl[cur], su[cur]):
        rem[s] += size[cur]
    for b in range(sl[cur] + 1, su[cur]):
        cross[b] += 1
    placed[cur] = False
    return uptr, hptr


@njit(cache=True)
def _bounds(lo, hi, sl, su, size, cap, capacity, m, placed, rem):  # pragma: no cover - compiled
    """Frame-wide limits on the next offset x: (unplaced count, min height, room, second room, its buffer, limit).

    Placing any buffer at x raises every section's floor to x (canonical order), so
    x + the largest remaining stack must fit (``limit``), and x + size must fit
    under its cap for every other remaining buffer (``room``, the smallest
    cap - size, and ``room2`` for the buffer ``arg`` that has it); with caps <=
    capacity a candidate beyond either bound fails the section inference.
    Dominance: nothing goes at or above ``min height`` (the lowest top of a remaining buffer).
    """
    n = size.shape[0]
    min_height = np.int64(1) << 62
    inside = 0
    room = np.int64(1) << 62
    room2 = room
    arg = -1
    for j in range(n):
        if not placed[j] and sl[j] >= lo and su[j] <= hi:
            inside += 1
            if m[j] + size[j] < min_height:
                min_height = m[j] + size[j]
            r = cap[j] - size[j]
            if r < room:
                room2 = room
                room = r
                arg = j
            elif r < room2:
                room2 = r
    stack = 0
    for s in range(lo, hi):
        if rem[s] > stack:
            stack = rem[s]
    return inside, min_height, room, room2, arg, capacity - stack


@njit(cache=True)
def _pick(lo, hi, o, orank, ck, cr, sl, su, size, cap, capacity, rank, prev_same, m, placed, rem):  # pragma: no cover
    """Next candidate of the frame [lo, hi) after key (ck, cr); returns (buffer or -1, unplaced in frame)."""
    n = size.shape[0]
    inside, min_height, head, head2, arg, limit = _bounds(lo, hi, sl, su, size, cap, capacity, m, placed, rem)
    best = -1
    bk = 0
    br = 0
    for j in range(n):
        if placed[j] or sl[j] < lo or su[j] > hi:
            continue
        pj = prev_same[j]
        if pj >= 0 and not placed[pj]:
            continue
        mj = m[j]
        rj = rank[j]
        # canonical order within the frame, dominance (no needless gap), capacity
        if mj < o or (mj == o and rj <= orank):
            continue
        if mj + size[j] > cap[j] or mj >= min_height or mj > limit:
            continue
        if mj > (head2 if j == arg else head):
            continue
        if mj < ck or (mj == ck and rj <= cr):
            continue
        if best < 0 or mj < bk or (mj == bk and rj < br):
            best = j
            bk = mj
            br = rj
    return best, inside


@njit(cache=True)
def _stacks_fit(lo, hi, oi, h, rem, capacity):  # pragma: no cover - compiled
    """Every section's remaining bytes fit above its placed top and the canonical floor ``oi``."""
    for s in range(lo, hi):
        r = rem[s]
        if r > 0:
            f = h[s]
            if f < oi:
                f = oi
            if f + r > capacity:
                return False
    return True


@njit(cache=True)
def _feasible(lo, hi, oi, sl, su, size, cap, capacity, m, placed, h, rem, fmin):  # pragma: no cover
    """Section inference over the frame: every remaining buffer and every section's stack must fit."""
    n = size.shape[0]
    # cheap pass first (placed tops and the canonical floor only): most rejected placements fail here
    if not _stacks_fit(lo, hi, oi, h, rem, capacity):
        return False
    for s in range(lo, hi):
        fmin[s] = capacity
    for j in range(n):
        if placed[j] or sl[j] < lo or su[j] > hi:
            continue
        mj = m[j]
        f = mj if mj > oi else oi
        if f + size[j] > cap[j]:
            return False
        for s in range(sl[j], su[j]):
            if mj < fmin[s]:
                fmin[s] = mj
    for s in range(lo, hi):
        r = rem[s]
        if r > 0:
            f = h[s]
            if f < oi:
                f = oi
            if f < fmin[s]:
                f = fmin[s]
            if f + r > capacity:
                return False
    return True


@njit(cache=True)
def _split(i, lo, hi, sl, su, placed, cross, cutbuf, cbp):  # pragma: no cover - compiled
    """After placing ``i``: push the non-empty independent parts of [lo, hi) onto ``cutbuf``.

    Returns the new ``cbp``; fewer than two parts push nothing.
    """
    n = sl.shape[0]
    start = cbp
    b0 = max(sl[i] + 1, lo + 1)
    b1 = min(su[i], hi)
    cuts = 0
    for b in range(b0, b1):
        if cross[b] == 0:
            cuts += 1
    if cuts == 0:
        return start
    a = lo
    parts = 0
    for b in range(b0, b1 + 1):
        if b < b1 and cross[b] != 0:
            continue
        c = b if b < b1 else hi
        # range [a, c) is independent of the rest; keep it if some unplaced buffer lies in it
        nonempty = False
        for j in range(n):
            if not placed[j] and sl[j] >= a and su[j] <= c:
                nonempty = True
                break
        if nonempty:
            cutbuf[cbp] = a
            cutbuf[cbp + 1] = c
            cbp += 2
            parts += 1
        a = c
    if parts < 2:
        return start
    return cbp


@njit(cache=True)
def _rerank(lo, hi, sl, su, placed, rem, keys, dyn, rank, rlog_j, rlog_v, rptr):  # pragma: no cover - compiled
    """Re-sort the unplaced buffers of [lo, hi) by ``keys`` (row ``dyn`` recomputed from the remaining
    stacks); old ranks go on the log so a jump back can restore them. Returns the new log pointer."""
    n = sl.shape[0]
    nk = keys.shape[0]
    if nk == 0:
        return rptr
    cnt = 0
    for j in range(n):
        if not placed[j] and sl[j] >= lo and su[j] <= hi:
            cnt += 1
    if cnt < 2 or rptr + cnt > rlog_j.shape[0]:
        return rptr
    idx = np.empty(cnt, np.int64)
    t = 0
    for j in range(n):
        if not placed[j] and sl[j] >= lo and su[j] <= hi:
            idx[t] = j
            t += 1
    order = np.arange(cnt)
    col = np.empty(cnt, np.int64)
    for r in range(nk - 1, -1, -1):  # least significant key first, each sort stable (ties: index order)
        for t in range(cnt):
            j = idx[order[t]]
            if r == dyn:
                big = 0
                for s in range(sl[j], su[j]):
                    if rem[s] > big:
                        big = rem[s]
                col[t] = -big
            else:
                col[t] = keys[r, j]
        order = order[np.argsort(col, kind="mergesort")]
    for t in range(cnt):
        j = idx[order[t]]
        rlog_j[rptr] = j
        rlog_v[rptr] = rank[j]
        rptr += 1
        rank[j] = t
    return rptr


@njit(cache=True)
def search(st, sl, su, size, cap, rank, prev_same, adj_ptr, adj, capacity, budget,  # noqa: C901
           m, placed, offset, seq, h, rem, cross, undo_j, undo_v, undo_ptr, hundo, hundo_ptr,
           frames, cutbuf, cut_ptr, hatless, keys, dyn, rlog_j, rlog_v, rlog_at):  # pragma: no cover - compiled
    """Run at most ``budget`` nodes of the depth-first search; returns the status.

    ``st`` holds [depth, nodes, status, uptr, hptr, top frame, cutbuf pointer];
    every other array is search state owned by the caller so the search
    resumes where it stopped. At depth d, ``seq[d]`` is the buffer being tried
    (-1 = pick the first). Frames are independent parts found by dynamic
    temporal decomposition: a part is solved on its own, and when one fails
    the search jumps back to the placement that split them.
    """
    nsec = h.shape[0]
    fmin = np.empty(nsec, np.int64)
    d, nodes, uptr, hptr, top, cbp, rptr = st[0], st[1], st[3], st[4], st[5], st[6], st[7]
    spent = 0
    status = RUNNING
    while spent < budget:
        lo = frames[top, F_LO]
        hi = frames[top, F_HI]
        d0 = frames[top, F_D0]
        if d > d0:
            o = offset[seq[d - 1]]
            orank = rank[seq[d - 1]]
        else:
            o = -1
            orank = -1
        cur = seq[d]
        ck = -1
        cr = -1
        if cur >= 0:
            uptr, hptr = _undo(d, seq, sl, su, size, m, placed, h, rem, cross, undo_j, undo_v, undo_ptr,
                               hundo, hundo_ptr, uptr, hptr)
            cbp = cut_ptr[d]
            ck = m[cur]
            cr = rank[cur]
        if cur >= 0 and hatless[d]:
            # nothing unplaced overlapped cur, so it stays at its offset in every completion; every later
            # sibling comes after it in (offset, rank) and would leave it unplaceable: no sibling can succeed
            best = -1
            inside = 1
        else:
            best, inside = _pick(lo, hi, o, orank, ck, cr, sl, su, size, cap, capacity, rank, prev_same, m, placed,
                                 rem)
        if inside == 0:
            # frame complete: continue with the next independent part, or complete the parent
            seq[d] = -1
            while True:
                if frames[top, F_NEXT] < frames[top, F_END]:
                    q = frames[top, F_NEXT]
                    frames[top, F_LO] = cutbuf[q]
                    frames[top, F_HI] = cutbuf[q + 1]
                    frames[top, F_D0] = d
                    frames[top, F_NEXT] = q + 2
                    break
                if top == 0:
                    status = FOUND
                    break
                top -= 1
            if status == FOUND:
                break
            continue
        if best < 0:
            seq[d] = -1
            if d > d0:
                d -= 1
                continue
            sd = frames[top, F_SPLIT]
            if sd < 0:
                status = EXHAUSTED
                break
            # this part cannot be solved: jump back to the placement that split it off
            for dd in range(d - 1, sd, -1):
                uptr, hptr = _undo(dd, seq, sl, su, size, m, placed, h, rem, cross, undo_j, undo_v, undo_ptr,
                                   hundo, hundo_ptr, uptr, hptr)
                seq[dd] = -1
            while rptr > rlog_at[sd]:  # the parent frame's order again
                rptr -= 1
                rank[rlog_j[rptr]] = rlog_v[rptr]
            top -= 1
            d = sd
            continue
        i = best
        seq[d] = i
        nodes += 1
        spent += 1
        oi = m[i]
        offset[i] = oi
        placed[i] = True
        top_i = oi + size[i]
        undo_ptr[d] = uptr
        hundo_ptr[d] = hptr
        cut_ptr[d] = cbp
        for s in range(sl[i], su[i]):
            hundo[hptr] = h[s]
            hptr += 1
            h[s] = top_i
            rem[s] -= size[i]
        for b in range(sl[i] + 1, su[i]):
            cross[b] -= 1
        hat = True
        for q in range(adj_ptr[i], adj_ptr[i + 1]):
            j = adj[q]
            if placed[j]:
                continue
            hat = False
            if m[j] < top_i:
                undo_j[uptr] = j
                undo_v[uptr] = m[j]
                uptr += 1
                m[j] = top_i
        hatless[d] = hat
        if _feasible(lo, hi, oi, sl, su, size, cap, capacity, m, placed, h, rem, fmin):
            nb = _split(i, lo, hi, sl, su, placed, cross, cutbuf, cbp)
            if nb > cbp:
                # the parts are new problems: order their buffers afresh on what remains (dynamic totals)
                rlog_at[d] = rptr
                rptr = _rerank(lo, hi, sl, su, placed, rem, keys, dyn, rank, rlog_j, rlog_v, rptr)
                top += 1
                frames[top, F_LO] = cutbuf[cbp]
                frames[top, F_HI] = cutbuf[cbp + 1]
                frames[top, F_D0] = d + 1
                frames[top, F_SPLIT] = d
                frames[top, F_NEXT] = cbp + 2
                frames[top, F_END] = nb
                cbp = nb
            d += 1
            seq[d] = -1
        # else: stay at depth d; the next loop undoes i and tries the next candidate
    st[0], st[1], st[2], st[3], st[4], st[5], st[6], st[7] = d, nodes, status, uptr, hptr, top, cbp, rptr
    return status
