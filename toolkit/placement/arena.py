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

The tie-break orders live in :mod:`toolkit.placement._arena_orders`, the exact
search in :mod:`toolkit.placement._arena_search`; ``_search`` and the
``SEARCH_*`` constants stay importable from here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from toolkit.errors import InvalidIRError, OptionError
from toolkit.placement import _greedy as G
from toolkit.placement._arena_orders import _ranks
from toolkit.placement._arena_search import (
    SEARCH_HEURISTICS,
    SEARCH_MAX_PAIRS,
    SEARCH_SHUFFLED,
    SEARCH_SLICE,
    _search,
)

__all__ = [
    "FIRST_FIT_MAX", "GREEDY_LARGE", "SEARCH_HEURISTICS", "SEARCH_MAX_PAIRS", "SEARCH_SHUFFLED", "SEARCH_SLICE",
    "ArenaResult", "ArenaStats", "ArenaStatus", "check_arena_input", "greedy_by_size", "lower_bound", "peak_of",
    "solve_arena",
]

#: above this many buffers only two skyline orders run, and first fit (quadratic) is skipped above FIRST_FIT_MAX
GREEDY_LARGE = 20_000
FIRST_FIT_MAX = 20_000


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
