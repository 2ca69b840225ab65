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
import polars as pl

from toolkit.costs import copies_cycles
from toolkit.errors import InvalidIRError
from toolkit.layout.cost import DTYPE_BYTES, PARTIAL_BYTES, phase_exchange_cycles, reduce_cycles
from toolkit.layout.layout import Layout, chunk_overlaps
from toolkit.layout.plans import LayoutParams, OpPlan, plan_graph
from toolkit.layout.reduction import staged_moves
from toolkit.layout.screen import op_estimate
from toolkit.layout.streaming import need_tensor
from toolkit.target import Target


def refine(ops: list[dict], tensors: dict, reps: dict, params: dict, p: LayoutParams, target: Target,
           tiles: int, carried: dict[int, tuple[int, int]] | None = None) -> tuple[int, int]:
    """(estimated cycles of the whole program, exchange plan-row bytes on the fullest tile) under ``p``.

    ``carried``: per repeated region, its last op id -> (carried input, carried output) tensors (as the schedule
    takes them); a region's ops are counted once per instance, the ops outside it once.

    Plan rows: one send row per piece a tile sends (a multicast once) and one
    receive row per piece it receives, ``plan_row_words`` words each, per op
    counted as the package stores them after deduplicating identical rows on a
    tile (the waves of an op repeat one pattern; see ``_distinct_rows``).
    """
    plans = plan_graph(ops, tensors, params, p, tiles)
    layout_of: dict[int, Layout] = {}
    inputs: set[int] = set()
    total = 0
    rows = np.zeros(tiles, dtype=np.int64)
    for op, plan in zip(ops, plans, strict=True):
        before = total
        e = op_estimate(op, plan, tensors, reps, p, target, tiles)
        n = len(plan.cell_tiles)
        waves = plan.cell_wave if plan.cell_wave is not None else np.zeros(n, dtype=np.int64)
        n_w = int(waves.max()) + 1
        send = np.zeros((n_w, tiles), dtype=np.int64)
        recv = np.zeros((n_w, tiles), dtype=np.int64)
        frags = np.zeros((n_w, tiles), dtype=np.int64)
        sends = np.zeros((n_w, tiles), dtype=np.int64)
        copies = np.zeros((n_w, tiles), dtype=np.int64)
        copy_bytes = np.zeros((n_w, tiles), dtype=np.int64)
        for t in plan.weights.keys() & plan.needs.keys():   # gathered weights: routed from where they are stored
            layout_of[t] = plan.weights[t]
        for t, lay in plan.inputs.items():   # graph inputs: where they start (the stream, or the host's layout)
            layout_of.setdefault(t, lay)
            inputs.add(t)
        for t, need in plan.needs.items():
            tensor = need_tensor(t)
            src = layout_of.setdefault(tensor, need)
            if need.same_as(src) and (need.replicas == 1 or tensor in inputs):   # inputs: one object per slot
                continue
            _count(src, need, waves, DTYPE_BYTES[tensors[tensor]["dtype"]], tiles, send, recv, frags, sends, copies,
                   copy_bytes)
        rows += _distinct_rows(frags + sends)
        total += _exchange_phases(send, recv, frags, target)
        total += e["compute"][p.weight_class] + int(copies_cycles(copies, copy_bytes, target).max(axis=1).sum())
        if plan.partials is not None:
            cycles, red_rows = _reduce(plan, waves, tiles, target, p.partials)
            total += cycles
            rows += red_rows
        layout_of[op["output"]] = plan.output
        if carried and op["op_id"] in carried:
            total += _carry(tensors, *carried[op["op_id"]], layout_of, tiles, target)
        total += (total - before) * (reps.get(op["block"], 1) - 1)   # a repeated region's op runs once per instance
    row_bytes = int(rows.max(initial=0)) * target.plan_row_words * target.word_bytes
    return total, row_bytes


def _carry(tensors: dict, t_in: int, t_out: int, layout_of: dict[int, Layout], tiles: int, target: Target) -> int:
    """Cycles of a repeated block's carry: its output moved into its input's layout when they differ (the schedule
    ends such a block with that move; a residual add writes in place)."""
    src, dst = layout_of.get(t_out), layout_of.get(t_in)
    if src is None or dst is None or src.same_as(dst):
        return 0
    counters = [np.zeros((1, tiles), dtype=np.int64) for _ in range(6)]
    need = dst.with_cells(np.zeros(dst.tiles.shape, dtype=np.int64))   # one wave
    _count(src, need, np.zeros(1, dtype=np.int64), DTYPE_BYTES[tensors[t_out]["dtype"]], tiles, *counters)
    send, recv, frags, _sends, copies, copy_bytes = counters
    return _exchange_phases(send, recv, frags, target) + int(copies_cycles(copies, copy_bytes, target).max())


def refine_beam(distinct: pl.DataFrame, graphs: dict, prepared: dict, target: Target, tiles: int, width: int,
                params: dict[int, LayoutParams], room: int) -> dict[int, tuple[int, int]]:
    """Refine candidates until ``width`` are likely to fit with their exchange plan rows.

    Returns ``{candidate_id: (refined cycles, plan-row bytes on the fullest tile)}`` for
    every refined candidate. Candidates whose screened peak leaves the packing
    margin free are refined in screen order (fastest first); then, while fewer
    than ``width`` fit with their plan rows, the rest in order of smallest
    screened peak (memory-bound workloads); at most ``2 * width`` per pass.
    "Fits" means within ``room`` bytes (the search keeps a packing margin
    free); a candidate over it is kept, ranked after those that fit, and exact
    placement decides. ``prepared``: per QKV form, the graph's (ops, tensors,
    repeats) as the search prepared them.
    """
    refined: dict[int, tuple[int, int]] = {}
    fitting = 0
    likely = distinct.filter(pl.col("peak_live_bytes") <= room)
    first = likely.head(2 * width)
    rest = distinct.join(first.select("candidate_id"), on="candidate_id", how="anti")

    def run(r: dict) -> bool:
        p = params[r["candidate_id"]]
        ops, tensors, reps = prepared[p.fused_qkv]
        g = graphs[p.fused_qkv]
        carried = {int(x["last_op"]): (int(x["carried_in"]), int(x["carried_out"]))
                   for x in g.repeats.iter_rows(named=True)}
        refined[r["candidate_id"]] = refine(ops, tensors, reps, g.params, p, target, tiles, carried)
        return r["peak_live_bytes"] + refined[r["candidate_id"]][1] <= room

    for r in first.iter_rows(named=True):
        if fitting == width:
            return refined
        fitting += run(r)
    if fitting:
        return refined
    # none fits with its plan rows yet: the fastest of those leaving room for the fewest rows seen, then by peak
    rows = min((v[1] for v in refined.values()), default=0)
    second = rest.sort((pl.col("peak_live_bytes") + rows) > room, "est_cycles", "peak_live_bytes").head(2 * width)
    for r in second.iter_rows(named=True):
        if fitting == width:
            break
        fitting += run(r)
    return refined


def _distinct_rows(per_wave: np.ndarray) -> np.ndarray:
    """Plan rows a tile stores for one op from its rows per wave ``[waves, tiles]``, after deduplication.

    The waves of an op repeat one pattern (same partners, sizes and offsets
    within the operand objects), so the package stores the busiest wave's rows
    once, plus the last wave's, whose row block may be shorter.
    """
    rows = per_wave.max(axis=0)
    return rows + per_wave[-1] if len(per_wave) > 1 else rows


def _exchange_phases(send: np.ndarray, recv: np.ndarray, frags: np.ndarray, target: Target) -> int:
    """Cycles of the sync and exchange phases of the waves that move anything (the busiest tile of each)."""
    moved = np.maximum(send, recv)
    has_exchange = moved.max(axis=1) > 0
    x = phase_exchange_cycles(moved.max(axis=1), frags.max(axis=1), target)
    return int((x + target.costs.sync_cycles)[has_exchange].sum())


def _reduce(plan: OpPlan, waves: np.ndarray, tiles: int, target: Target,
            partials: str) -> tuple[int, np.ndarray]:
    """Cycles of an inner-split reduce-scatter (the partials exchange, then the sums; per epoch when staged) and
    its plan rows per tile."""
    if plan.staging:
        return _staged(plan, tiles, target, partials)
    n_w = int(waves.max()) + 1
    send, recv, frags, sends, copies, copy_bytes = (np.zeros((n_w, tiles), dtype=np.int64) for _ in range(6))
    _count(plan.partials, plan.reduce_need, waves, PARTIAL_BYTES[partials], tiles, send, recv, frags, sends, copies,
           copy_bytes)
    red = plan.reduce_need
    cells = red.cells.ravel()
    ok = cells >= 0
    # each reducing slot sums its S partial slices; the local slice arrives as a copy in the same compute phase
    s = plan.partials.counts[0]
    sums = reduce_cycles(red.slot_elements()[ok] // s, s, target, partials)
    per = np.bincount(waves[cells[ok]] * tiles + red.tiles.ravel()[ok], weights=sums,
                      minlength=n_w * tiles).reshape(n_w, tiles).astype(np.int64) + copies_cycles(
        copies, copy_bytes, target)
    cycles = _exchange_phases(send, recv, frags, target) + int(per.max(axis=1).sum())
    return cycles, _distinct_rows(frags + sends)


def _staged(plan: OpPlan, tiles: int, target: Target, partials: str) -> tuple[int, np.ndarray]:
    """A staged reduction (one wave), epoch by epoch from the moves the schedule makes (``staged_moves``)."""
    cycles, rows = 0, np.zeros(tiles, dtype=np.int64)
    for e, mv in enumerate(staged_moves(plan)):
        piece = (mv["r1"] - mv["r0"]) * (mv["c1"] - mv["c0"])
        nbytes = piece * PARTIAL_BYTES[partials]
        far = mv["src_tile"] != mv["dst_tile"]
        count = np.bincount   # per tile: bytes and pieces sent and received, local copies
        send = count(mv["src_tile"][far], weights=nbytes[far], minlength=tiles)[None].astype(np.int64)
        recv = count(mv["dst_tile"][far], weights=nbytes[far], minlength=tiles)[None].astype(np.int64)
        frags = count(mv["dst_tile"][far], minlength=tiles)[None]
        sends = count(mv["src_tile"][far], minlength=tiles)[None]
        copies = count(mv["dst_tile"][~far], minlength=tiles)
        copy_bytes = count(mv["dst_tile"][~far], weights=nbytes[~far], minlength=tiles).astype(np.int64)
        _, first = np.unique(mv["slot"], return_index=True)
        sums = reduce_cycles(piece[first], mv["count"][first] + (e > 0), target, partials)
        per = count(mv["dst_tile"][first], weights=sums, minlength=tiles).astype(np.int64) + copies_cycles(
            copies, copy_bytes, target)
        cycles += _exchange_phases(send, recv, frags, target) + int(per.max())
        rows += _distinct_rows(frags + sends)
    return cycles, rows


def _count(src: Layout, need: Layout, waves: np.ndarray, nbytes: int, tiles: int, send: np.ndarray,
           recv: np.ndarray, frags: np.ndarray, sends: np.ndarray, copies: np.ndarray, copy_bytes: np.ndarray) -> None:
    """Add the pieces ``route(src, need)`` would give to the per (wave, tile) counters, without building its table.

    A piece is a product of the per-dimension chunk overlaps, received by every destination replica (a slot
    with no tile or no cell takes none). A piece on its own tile is a local copy (counted in ``copies`` and
    ``copy_bytes``, priced by ``toolkit.costs.copies_cycles``); a remote piece is received once per destination
    replica and sent once, in the wave of its first remote replica (a multicast leaves its source once).
    """
    if src.shape != need.shape:
        msg = f"cannot route between layouts of shapes {src.shape} and {need.shape}"
        raise InvalidIRError(msg)
    (gs, gd, g0, g1), (rs, rd, r0, r1), (cs, cd, c0, c1) = (
        chunk_overlaps(a, b) for a, b in zip(src.bounds, need.bounds, strict=True))
    (_, snr, snc), (_, dnr, dnc) = src.counts, need.counts

    def pieces(g: np.ndarray, r: np.ndarray, c: np.ndarray, nr: int, nc: int) -> np.ndarray:
        return ((g[:, None] * nr + r[None, :]).reshape(-1, 1) * nc + c[None, :]).ravel()

    src_tile = src.tiles.reshape(-1, src.replicas)[:, 0].astype(np.int64)[pieces(gs, rs, cs, snr, snc)]
    dst = pieces(gd, rd, cd, dnr, dnc)
    tile = need.tiles.reshape(-1, need.replicas).astype(np.int64)[dst]          # (piece, replica)
    cell = need.cells.reshape(-1, need.replicas).astype(np.int64)[dst]
    g, r, c = ((hi - lo).astype(np.int64) for lo, hi in ((g0, g1), (r0, r1), (c0, c1)))
    size = np.broadcast_to(((g[:, None] * r[None, :]).reshape(-1, 1) * c[None, :]).reshape(-1, 1) * nbytes,
                           tile.shape)
    ok = (tile >= 0) & (cell >= 0)
    wave = np.zeros(tile.shape, dtype=np.int64)
    wave[ok] = waves[cell[ok]]
    local = ok & (tile == src_tile[:, None])
    remote = ok & ~local
    first = remote & (np.cumsum(remote, axis=1) == 1)
    sender = np.broadcast_to(src_tile[:, None], tile.shape)

    def add(out: np.ndarray, where: np.ndarray, at: np.ndarray, weights: np.ndarray | None = None) -> None:
        slot = (wave * tiles + at)[where]
        out += np.bincount(slot, weights=None if weights is None else weights[where],
                           minlength=out.size).astype(np.int64).reshape(out.shape)

    add(copies, local, tile)
    add(copy_bytes, local, tile, size)
    add(recv, remote, tile, size)
    add(frags, remote, tile)
    add(send, first, sender, size)
    add(sends, first, sender)


__all__ = ["OpPlan", "refine", "refine_beam"]
