"""Beam refinement: exact per-phase cycle estimates from the real op plans and routes.

The screen counts every operand panel as received over the link. For the few
beam candidates we build the op plans, route every operand need from its
producer's layout (``route``), and count per (op, wave) the bytes and
fragments each tile really sends and receives (multicast counted once at the
sender, local pieces as copies), and the compute of the slowest tile. The
result matches what the schedule stage will estimate for the same plan,
without building its tables.
"""

from __future__ import annotations

import numpy as np

from toolkit.layout.cost import copy_cycles, exchange_cycles
from toolkit.layout.layout import Layout, route
from toolkit.layout.plans import LayoutParams, OpPlan, plan_graph
from toolkit.layout.screen import DTYPE_BYTES, op_estimate
from toolkit.target import Target


def refine(ops: list[dict], tensors: dict, reps: dict, params: dict, p: LayoutParams, target: Target,
           tiles: int) -> tuple[int, int]:
    """(estimated cycles of the whole program, exchange plan-row bytes on the fullest tile) under ``p``.

    Plan rows: one send row per piece a tile sends (a multicast once) and one
    receive row per piece it receives, ``plan_row_words`` words each, summed
    over every exchange of the program: an upper bound on what the package
    stores (it deduplicates identical rows per tile).
    """
    plans = plan_graph(ops, tensors, params, p, tiles)
    layout_of: dict[int, Layout] = {}
    total = 0
    rows = np.zeros(tiles, dtype=np.int64)
    for op, plan in zip(ops, plans, strict=True):
        e = op_estimate(op, plan, tensors, reps, p, target, tiles)
        n = len(plan.cell_tiles)
        waves = plan.cell_wave if plan.cell_wave is not None else np.zeros(n, dtype=np.int64)
        n_w = int(waves.max()) + 1
        send = np.zeros((n_w, tiles), dtype=np.int64)
        recv = np.zeros((n_w, tiles), dtype=np.int64)
        frags = np.zeros((n_w, tiles), dtype=np.int64)
        sends = np.zeros((n_w, tiles), dtype=np.int64)
        copies = np.zeros((n_w, tiles), dtype=np.int64)
        for t, need in plan.needs.items():
            tensor = t if t >= 0 else -t - 1
            src = layout_of.setdefault(tensor, need)
            if need.same_as(src) and need.replicas == 1:
                continue
            _count(src, need, waves, DTYPE_BYTES[tensors[tensor]["dtype"]], tiles, send, recv, frags, sends, copies,
                   target)
        rows += frags.sum(axis=0) + sends.sum(axis=0)
        moved = np.maximum(send, recv)
        has_exchange = moved.max(axis=1) > 0
        x = exchange_cycles(moved.max(axis=1), frags.max(axis=1), target)
        total += int((x + target.costs.sync_cycles)[has_exchange].sum())
        total += e["compute"][p.weight_class] + int(copies.max(axis=1).sum())
        if plan.partials is not None:
            total += e["exchange"] // 2 + target.costs.sync_cycles * n_w  # partials: screened estimate
        layout_of[op["output"]] = plan.output
    row_bytes = int(rows.max(initial=0)) * target.plan_row_words * target.word_bytes
    return total * max([1, *reps.values()]), row_bytes


def _count(src: Layout, need: Layout, waves: np.ndarray, nbytes: int, tiles: int, send: np.ndarray,
           recv: np.ndarray, frags: np.ndarray, sends: np.ndarray, copies: np.ndarray, target: Target) -> None:
    pieces = route(src, need)
    cells = need.cells.ravel()[pieces["dst_chunk"] * need.replicas + pieces["replica"]]
    k = np.flatnonzero((pieces["dst_tile"] >= 0) & (cells >= 0))
    w = waves[cells[k]]
    s_tile, d_tile = pieces["src_tile"][k], pieces["dst_tile"][k]
    size = ((pieces["g1"][k] - pieces["g0"][k]) * (pieces["r1"][k] - pieces["r0"][k])
            * (pieces["c1"][k] - pieces["c0"][k]) * nbytes)
    local = s_tile == d_tile
    n_w = send.shape[0]
    cells_n = n_w * tiles
    li = np.flatnonzero(local)
    if len(li):
        copies += np.bincount(w[li] * tiles + d_tile[li], weights=copy_cycles(size[li], target),
                              minlength=cells_n).reshape(n_w, tiles).astype(np.int64)
    ri = np.flatnonzero(~local)
    if not len(ri):
        return
    w_r, size_r = w[ri], size[ri]
    idx = w_r * tiles + d_tile[ri]
    recv += np.bincount(idx, weights=size_r, minlength=cells_n).reshape(n_w, tiles).astype(np.int64)
    frags += np.bincount(idx, minlength=cells_n).reshape(n_w, tiles)
    # a multicast piece leaves its source once; route() emits the replicas of one piece on consecutive
    # rows, so a piece's first remote row starts a run of equal keys
    kr = k[ri]
    key = pieces["src_chunk"][kr] * (need.tiles.size + 1) + pieces["dst_chunk"][kr]
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    sidx = w_r[first] * tiles + s_tile[ri][first]
    send += np.bincount(sidx, weights=size_r[first], minlength=cells_n).reshape(n_w, tiles).astype(np.int64)
    sends += np.bincount(sidx, minlength=cells_n).reshape(n_w, tiles)


__all__ = ["OpPlan", "refine"]
