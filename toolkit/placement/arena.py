"""Single-arena placement: offsets for buffers with fixed lifetimes under one capacity.

The generic core of placement (and of ``toolkit placement solve``): buffer ``i``
is live over the half-open interval ``[lower[i], upper[i])`` and needs
``size[i]`` bytes; buffers live at the same time must not overlap in address.

:func:`solve_arena` first runs cheap greedy passes (first fit in several orders,
and a "lowest next" skyline pass with several tie-breaks) and keeps the best;
when that does not fit the capacity it runs a bounded exact search in the
spirit of MiniMalloc (canonical offset-ordered branching, section inference
with a frame-wide bound on the next offset, dominance, hatless pruning,
identical-buffer symmetry breaking, static and dynamic temporal decomposition
with split-off parts re-sorted on the bytes that remain, restarts over
tie-break orders) until the time limit. The lower bound is the largest number of bytes live at one time;
infeasibility is proven when that bound exceeds the capacity, when one buffer
alone exceeds it, or when the search space is exhausted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from toolkit.errors import InvalidIRError, OptionError
from toolkit.placement import _greedy as G
from toolkit.placement import _kernels as K

#: exact search only below this many time-overlapping buffer pairs (memory for the adjacency)
SEARCH_MAX_PAIRS = 4_000_000
#: nodes per call into the compiled search between time checks
SEARCH_SLICE = 20_000
#: above this many buffers only two skyline orders run, and first fit (quadratic) is skipped above FIRST_FIT_MAX
GREEDY_LARGE = 20_000
FIRST_FIT_MAX = 20_000
#: how many tie-break orders the search restarts cycle through
SEARCH_HEURISTICS = 8
#: shuffled-tie orders added to every round of restarts
SEARCH_SHUFFLED = 2


class ArenaStatus(StrEnum):
    FIT = "fit"
    INFEASIBLE_PROVEN = "infeasible_proven"
    NOT_PROVEN = "not_proven"


@dataclass(frozen=True, slots=True, kw_only=True)
class ArenaStats:
    """How the answer was found."""

    method: str            # greedy pass or "search" that produced the offsets
    greedy_peak: int       # best peak of the greedy passes
    nodes: int             # search nodes expanded (0 when greedy sufficed)
    restarts: int
    seconds: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ArenaResult:
    """Offsets (bytes; every buffer placed, possibly above the capacity when not fit), peak and bound."""

    offsets: np.ndarray = field(repr=False)
    peak: int
    lower_bound: int
    status: ArenaStatus
    stats: ArenaStats

    @property
    def fits(self) -> bool:
        return self.status is ArenaStatus.FIT


def lower_bound(lower: np.ndarray, upper: np.ndarray, size: np.ndarray) -> int:
    """Largest number of bytes live at one time (half-open lifetimes; ends before starts)."""
    if len(size) == 0:
        return 0
    t = np.concatenate([lower, upper])
    w = np.concatenate([size, -size]).astype(np.int64)
    order = np.lexsort((w, t))
    return int(max(np.cumsum(w[order]).max(), 0))


def peak_of(upper_offsets: np.ndarray, size: np.ndarray) -> int:
    return int((upper_offsets + size).max()) if len(size) else 0


def check_arena_input(lower: np.ndarray, upper: np.ndarray, size: np.ndarray) -> None:
    """Raise OptionError naming the first bad buffer (index) and field."""
    if not (len(lower) == len(upper) == len(size)):
        msg = f"lower, upper and size must have one entry per buffer (got {len(lower)}, {len(upper)}, {len(size)})"
        raise OptionError(msg, field="size", value=(len(lower), len(upper), len(size)))
    bad = np.flatnonzero(size < 0)
    if bad.size:
        i = int(bad[0])
        msg = f"buffer {i}: size={int(size[i])} is negative; sizes are bytes >= 0"
        raise OptionError(msg, field="size", value=int(size[i]))
    bad = np.flatnonzero(upper <= lower)
    if bad.size:
        i = int(bad[0])
        msg = f"buffer {i}: upper={int(upper[i])} <= lower={int(lower[i])}; lifetimes are half-open [lower, upper)"
        raise OptionError(msg, field="upper", value=int(upper[i]))


def solve_arena(
    lower: np.ndarray,
    upper: np.ndarray,
    size: np.ndarray,
    capacity: int | None = None,
    *,
    align: np.ndarray | int | None = None,
    time_limit: float = 10.0,
) -> ArenaResult:
    """Place buffers in one arena; with ``capacity`` None, minimise the peak (greedy passes only).

    ``align`` (bytes, scalar or per buffer) rounds every offset up; it is
    handled by scaling when all alignments divide every size, otherwise sizes
    are padded to their alignment (exact search then works on padded sizes).
    """
    t0 = time.perf_counter()
    lower = np.asarray(lower, np.int64)
    upper = np.asarray(upper, np.int64)
    size = np.asarray(size, np.int64)
    check_arena_input(lower, upper, size)
    if capacity is not None and capacity < 0:
        msg = f"capacity={capacity} is negative; give bytes >= 0"
        raise OptionError(msg, field="capacity", value=capacity)
    unit = _alignment_unit(size, align)
    n = len(size)
    lb = lower_bound(lower, upper, size)
    if n == 0:
        return ArenaResult(offsets=np.zeros(0, np.int64), peak=0, lower_bound=0, status=ArenaStatus.FIT,
                           stats=ArenaStats(method="empty", greedy_peak=0, nodes=0, restarts=0, seconds=0.0))
    # work in units of the alignment (sizes padded up to it)
    usize = -(-size // unit)
    ucap = None if capacity is None else capacity // unit
    sl, su, sections = _sections(lower, upper)
    offsets, method, gpeak = _best_greedy(lower, upper, usize, sl, su, sections, -(-lb // unit))
    peak = peak_of(offsets, usize)
    nodes = restarts = 0
    status = ArenaStatus.FIT
    if ucap is not None and peak > ucap:
        status = ArenaStatus.NOT_PROVEN
        if capacity is not None and (lb > capacity or int(size.max()) > capacity):
            status = ArenaStatus.INFEASIBLE_PROVEN
        else:
            found, exhausted, nodes, restarts = _search(
                lower, upper, sl, su, usize, sections, ucap, deadline=t0 + time_limit
            )
            if found is not None:
                offsets, method, status = found, "search", ArenaStatus.FIT
                peak = peak_of(offsets, usize)
            elif exhausted:
                status = ArenaStatus.INFEASIBLE_PROVEN
    stats = ArenaStats(method=method, greedy_peak=int(gpeak * unit), nodes=nodes, restarts=restarts,
                       seconds=time.perf_counter() - t0)
    return ArenaResult(offsets=offsets * unit, peak=int(peak * unit), lower_bound=lb, status=status, stats=stats)


def greedy_by_size(lower: np.ndarray, upper: np.ndarray, size: np.ndarray, capacity: int | None = None) -> np.ndarray:
    """Baseline: largest first, lowest fitting offset (-1 for buffers that do not fit the capacity)."""
    lower = np.asarray(lower, np.int64)
    upper = np.asarray(upper, np.int64)
    size = np.asarray(size, np.int64)
    order = np.lexsort((lower, -size)).astype(np.int64)
    return G.first_fit(order, lower, upper, size, -1 if capacity is None else int(capacity))


# -- helpers -------------------------------------------------------------------
def _alignment_unit(size: np.ndarray, align: np.ndarray | int | None) -> int:
    if align is None:
        return 1
    a = np.atleast_1d(np.asarray(align, np.int64))
    if (a <= 0).any():
        msg = f"align={int(a[a <= 0][0])} must be a positive number of bytes"
        raise OptionError(msg, field="align", value=int(a[a <= 0][0]))
    return int(np.lcm.reduce(a))


def _sections(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    points = np.unique(np.concatenate([lower, upper]))
    sl = np.searchsorted(points, lower).astype(np.int64)
    su = np.searchsorted(points, upper).astype(np.int64)
    return sl, su, max(len(points) - 1, 1)


def _ranks(sl: np.ndarray, su: np.ndarray, size: np.ndarray, lower: np.ndarray, upper: np.ndarray,
           sections: int) -> list[tuple[str, np.ndarray]]:
    """Tie-break orders (rank 0 tried first) used by the skyline pass and the search restarts.

    W = lifetime length, A = area (size x length), T = the largest total of live
    bytes over the buffer's sections, Z = size, S = start, C = number of
    sections spanned (lifetime in distinct endpoints, not in time), O = number
    of buffers overlapping in time. "LZR" puts buffers
    live over at least half of all sections first (long-lived ones belong at the
    bottom, not on top of the peak), then the largest, latest-starting first.
    The search restarts use the first SEARCH_HEURISTICS only.
    """
    out = []
    for name, (keys, _dyn) in _rank_keys(sl, su, size, lower, upper, sections).items():
        order = np.lexsort((np.arange(len(size)), *keys[::-1]))
        rank = np.empty(len(size), np.int64)
        rank[order] = np.arange(len(size))
        out.append((name, rank))
    return out


def _rank_keys(sl, su, size, lower, upper, sections) -> dict[str, tuple[np.ndarray, int]]:
    """Per order of :func:`_ranks`: its keys (rows, most significant first, ascending) and the row of T (-1: none).

    The search re-sorts the parts it splits off on these keys, T recomputed over
    the buffers still unplaced (as MiniMalloc does when it solves a new partition).
    """
    width = upper - lower
    area = size * width
    total = _max_section_total(sl, su, size, sections)
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


def _best_greedy(lower, upper, size, sl, su, sections, lb: int) -> tuple[np.ndarray, str, int]:
    """Best of the greedy passes; stops early at the lower bound (nothing can beat it)."""
    ranks = _ranks(sl, su, size, lower, upper, sections)
    if len(size) > GREEDY_LARGE:  # the skyline pass re-queues long buffers often on big traces
        ranks = [r for r in ranks if r[0] in ("TWA", "ZW", "LZR")]
    best: tuple[int, np.ndarray, str] | None = None
    for name, rank in ranks:
        off = G.skyline(sl, su, size, rank, sections)
        p = peak_of(off, size)
        if best is None or p < best[0]:
            best = (p, off, "skyline-" + name)
        if p <= lb:
            return best[1], best[2], best[0]
    if len(size) <= FIRST_FIT_MAX:  # first fit is quadratic in the number of buffers
        for name, rank in ranks:
            if name not in ("ZW", "SZ"):
                continue
            order = np.argsort(rank).astype(np.int64)
            off = G.first_fit(order, lower, upper, size, -1)
            p = peak_of(off, size)
            if best is None or p < best[0]:
                best = (p, off, "first-fit-" + name)
    if best is None:  # no orders at all (cannot happen: the list is fixed and non-empty)
        msg = "no greedy order ran"
        raise InvalidIRError(msg)
    return best[1], best[2], best[0]


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


def _search(lower, upper, sl, su, size, sections, capacity, *, deadline, caps=None, floors=None):
    """Restarted depth-first search; returns (offsets or None, exhausted, nodes, restarts).

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
    ranks = _ranks(sl, su, size, lower, upper, sections)[:SEARCH_HEURISTICS]
    rank_keys = _rank_keys(sl, su, size, lower, upper, sections)
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
    total = _max_section_total(sl, su, size, sections)
    while time.perf_counter() < deadline:
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
        while status == K.RUNNING and spent < budget and time.perf_counter() < deadline:
            before = int(st[1])
            status = K.search(
                st, sl, su, size, cap, rank, prev, ptr, nbr, capacity, min(SEARCH_SLICE, budget - spent),
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
