"""Inner-split reductions: the column slices a reduce-scatter cuts each panel into, and the epochs of a staged one.

A plan with ``k`` inner partitions writes ``k`` FP16 partials of every output
piece; the reducing tile of a piece receives them and sums them (the FP16
reduction). Unstaged, every partial arrives in one exchange; a staged plan
(``staging`` N) receives N remote partials per epoch, in partial order (fixed
groups: the sender of a partial sends all its pieces in the same epoch, as the
hardware's ``ReductionStaging::Batched`` does), and adds them to the running sum
the earlier epochs left in the output.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from toolkit.layout.plans import OpPlan

REDUCE_SLICE_MIN_COLS = 8   # narrowest column slice one tile reduces in an inner-split reduce-scatter


def reduce_slices(col_b: np.ndarray, n_s: int) -> tuple[np.ndarray, ...]:
    """Column slices of every panel for a reduce-scatter over ``n_s`` tiles.

    Returns the slice bounds, each slice's panel and index in its panel, and the slices per panel.

    Each panel is cut into ``min(n_s, width / REDUCE_SLICE_MIN_COLS)`` near-equal slices.
    """
    widths = np.diff(col_b)
    per = np.clip(widths // REDUCE_SLICE_MIN_COLS, 1, n_s)
    panel = np.repeat(np.arange(len(widths)), per)
    j = np.arange(len(panel)) - np.repeat(np.cumsum(per) - per, per)
    starts = col_b[panel] + (j * widths[panel]) // per[panel]
    return np.append(starts, col_b[-1]), panel, j, per


def staged_moves(plan: OpPlan) -> list[dict[str, np.ndarray]]:
    """The epochs of a staged reduction (``plan.staging`` N), one dict of arrays per epoch.

    Every reducing slot (one result piece on one of its cell's inner tiles)
    takes its own partial first, then the cell's other partials in partial
    order (its remote list ``0 .. k-1`` without its own): fixed partial groups,
    so an epoch's senders each send all (or, at a group edge, part) of their
    pieces in it while the other inner tiles of the cell send nothing. This is
    how the hardware's bounded reduction groups run (ipu-stack
    MLP_LAYOUT_ALTERNATIVES.md "Bounded reduction groups": batched7 turns the
    down reduction's 7,991-cycle exchange into two of 5,132 and 4,979, each
    about one sender's whole partial of ~4,700 words plus latency; the
    increments of batched4/2 and streamed fit the same groups). Epoch 0 holds
    the own partial and the first N remote ones, every later epoch the next N.
    Per epoch and (slot, position): ``slot`` (reduce
    need slot), ``pos`` (place in the epoch's buffer), ``count`` (the epoch's
    partials for that slot), ``g`` (the partial), ``src_chunk`` and
    ``src_tile`` (where that partial of the cell lies), ``dst_tile`` and the
    piece ``r0 r1 c0 c1`` with its cell's ``cr0 cc0 cell_cols``.
    """
    red, part, n = plan.reduce_need, plan.partials, plan.staging
    s = red.shape[0]
    rc = red.chunks()
    slot = np.nonzero(rc["tile"] >= 0)[0]
    r0, r1, c0, c1, dst = rc["r0"][slot], rc["r1"][slot], rc["c0"][slot], rc["c1"][slot], rc["tile"][slot]
    _, pr, pc = part.bounds
    cr = np.searchsorted(pr, r0, side="right") - 1          # the cell holding each piece
    cc = np.searchsorted(pc, c0, side="right") - 1
    _, nr, nc = part.counts
    cell_tiles = part.tiles[:, cr, cc, 0].T                  # [slots, S]: the tile of each partial of the cell
    own = np.argmax(cell_tiles == dst[:, None], axis=1)      # the reducer is one of its cell's inner tiles
    bounds = [0, *range(n + 1, s, n), s]                     # positions q of each epoch
    out = []
    for lo, hi in itertools.pairwise(bounds):
        q = np.arange(lo, hi)
        sl, qq = np.repeat(np.arange(len(slot)), len(q)), np.tile(q, len(slot))
        j = qq - 1                                          # place in the slot's remote list
        g = np.where(qq == 0, own[sl], j + (j >= own[sl]))
        out.append({
            "slot": slot[sl], "pos": qq - lo, "count": np.full(len(sl), hi - lo), "g": g,
            "src_chunk": (g * nr + cr[sl]) * nc + cc[sl], "src_tile": cell_tiles[sl, g], "dst_tile": dst[sl],
            "r0": r0[sl], "r1": r1[sl], "c0": c0[sl], "c1": c1[sl], "cr0": pr[cr[sl]], "cc0": pc[cc[sl]],
            "cell_cols": pc[cc[sl] + 1] - pc[cc[sl]],
        })
    return out


def staged_sender_pieces(k, staging) -> np.ndarray:
    """The pieces the busiest sender of a cell sends per epoch of a staged reduction (:func:`staged_moves`), on
    average over the epochs: with ``k`` partials and N >= 2 per epoch every epoch has a partial whose ``k - 1``
    pieces all go in it; streamed (N = 1), epoch ``e``'s senders are the partials ``e`` (to the reducers after it)
    and ``e + 1`` (to those before it), so the busiest sends ``max(k - 1 - e, e + 1)``. Vectorized over plans."""
    k, n = np.asarray(k, dtype=np.int64), np.asarray(staging, dtype=np.int64)
    rem = np.maximum(k - 1, 1)
    h = rem // 2
    streamed = np.where(rem % 2 == 0, h * (3 * h + 1), (3 * h + 1) * (h + 1)) / rem   # sum over e of the max
    return np.where(n == 1, streamed, rem.astype(float))


__all__ = ["REDUCE_SLICE_MIN_COLS", "reduce_slices", "staged_moves", "staged_sender_pieces"]
