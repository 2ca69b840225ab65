"""The layout's global linear grid screened: a linear op (and the elementwise op running in place on its result)
on the ``row_shard x panel x inner`` grid every layout without a plan of its own gives it, priced in O(1) per
layout from the grid arithmetic shared with ``linear_plan`` (every wave of a linear op runs one cell per tile, or
``ceil(cells / tiles)`` when the grid folds, so the slowest tile is the tile with the largest cell), the kernel and
exchange rules vectorized over every wave of every layout at once. :mod:`toolkit.layout.screen` caches them.
"""

from __future__ import annotations

import math

import numpy as np

from toolkit.costs import PRECISION, amp_kernel
from toolkit.layout.cost import (
    DTYPE_BYTES,
    PARTIAL_BYTES,
    amp_cycles,
    compute_class,
    phase_exchange_cycles,
    reduce_cycles,
    vector_cycles,
)
from toolkit.layout.gemm_screen import casts_input, casts_output
from toolkit.layout.layout import segmented_bounds
from toolkit.layout.plans import LayoutParams, linear_grid
from toolkit.options import WEIGHT_CLASSES
from toolkit.target import Target


def _tokens(op: dict, params: dict) -> int:
    """Rows per image of a linear op (its own: a pooling head's are one per image)."""
    return int(op["rows"]) // int(params["batch"])


def _waves(params: dict, p: LayoutParams, shard: int, tokens: int) -> tuple[np.ndarray, int]:
    """Largest row chunk of every wave of row blocks, and the wave count."""
    sizes = np.diff(segmented_bounds(int(params["batch"]), tokens, p.row_block))
    n_w = math.ceil(len(sizes) / shard)
    starts = np.arange(n_w) * shard
    return np.maximum.reduceat(sizes, starts), n_w


def grid_linear(op: dict, tensors: dict, reps: dict, params: dict, ps: list[LayoutParams], target: Target,
            tiles: int) -> list[dict]:
    """The estimate of linear ``op`` on the global grid of each layout in ``ps``: the grid arithmetic per layout,
    the kernel and exchange rules at once over every wave of every layout."""
    groups: dict[tuple, list[int]] = {}   # the AMP call depth and the partials' dtype are scalars of the rules
    for i, p in enumerate(ps):
        groups.setdefault((p.inner_block, p.partials), []).append(i)
    out: list[dict] = [{}] * len(ps)
    for (inner_block, partials), idx in groups.items():
        for i, e in zip(idx, _linear_grids(op, tensors, reps, params, [ps[i] for i in idx], target, tiles,
                                           inner_block, partials), strict=True):
            out[i] = e
    return out


def _linear_grids(op: dict, tensors: dict, reps: dict, params: dict, ps: list[LayoutParams], target: Target,
                  tiles: int, inner_block: int | None, partials: str) -> list[dict]:
    tokens = _tokens(op, params)
    n_r = [len(segmented_bounds(int(params["batch"]), tokens, p.row_block)) - 1 for p in ps]
    grids = [linear_grid(n, op["cols"], op["inner"], p, tiles) for n, p in zip(n_r, ps, strict=True)]
    waves = [_waves(params, p, g.shard, tokens)[0] for p, g in zip(ps, grids, strict=True)]
    n_w = np.array([len(w) for w in waves])
    starts = np.r_[0, np.cumsum(n_w)[:-1]]

    def per_wave(values: list) -> np.ndarray:
        return np.repeat(np.array(values), n_w)

    rows_w = np.concatenate(waves)
    per_tile = np.array([g.max_chunks_per_tile(tiles) for g in grids])
    cb = np.array([min(g.col_block, op["cols"]) for g in grids])
    ib = np.array([min(g.inner_block, op["inner"]) for g in grids])
    n_s = np.array([g.n_s for g in grids])
    oc = np.array([g.out_cols(op["cols"]) for g in grids])   # output columns per tile (a reduce-scatter slice)
    split = n_s > 1
    tile_w, ib_w, oc_w, n_s_w = (per_wave(v) for v in (per_tile, ib, oc, n_s))
    precision = PRECISION[tensors[op["inputs"][1]]["dtype"]]
    classes = np.array([compute_class(c, precision) for c in WEIGHT_CLASSES], dtype=object)[:, None]
    cyc, _, launch, _ = amp_cycles(rows_w, per_wave(cb), ib_w, target, weight_class=classes, dtype=precision,
                                   partials=np.where(n_s_w > 1, partials, "f16"), inner_block=inner_block,
                                   cast=casts_input(op, tensors))
    compute = np.add.reduceat(cyc * tile_w, starts, axis=1)
    a = tensors[op["inputs"][0]]
    recv_w = rows_w * ib_w * DTYPE_BYTES[a["dtype"]] * tile_w
    frag = np.ceil(recv_w / (target.packet_max_words * target.word_bytes)) + 1
    exchange = np.add.reduceat(phase_exchange_cycles(recv_w, frag, target), starts)
    syncs, phases = n_w, 3 * n_w
    if a["role"] == "input" and a.get("host_layout") and reps.get(op["block"], 1) == 1:
        exchange, syncs, phases = 0 * n_w, 0 * n_w, n_w   # the host wrote it in this op's panels: nothing received
                                                          # (the panels still occupy the tiles); a repeat's later
                                                          # instances receive it
    launches = launch[starts] * per_tile
    # reduce-scatter (inner splits): every tile of a panel receives the S partials of its column slice, sums them
    red = rows_w * oc_w * PARTIAL_BYTES[partials] * n_s_w * tile_w
    red_buf = np.where(split, np.maximum.reduceat(red, starts), 0)
    exchange = exchange + np.where(split, np.add.reduceat(phase_exchange_cycles(red, n_s_w, target), starts), 0)
    reduce = np.add.reduceat(reduce_cycles(rows_w * oc_w, n_s_w, target, partials) * tile_w, starts)
    compute = compute + np.where(split, reduce, 0)
    syncs, phases, launches = syncs + split * n_w, phases + split * 3 * n_w, launches + split * n_w
    recv = np.maximum.reduceat(recv_w, starts) + red_buf
    panel = np.maximum.reduceat(rows_w, starts) * ib * DTYPE_BYTES[a["dtype"]]
    w = tensors[op["inputs"][1]]
    rep = reps.get(op["block"], 1) if w["per_instance"] else 1
    wbytes = ib * cb * DTYPE_BYTES[w["dtype"]] * rep * per_tile
    bias = cb * 2 * rep * per_tile if len(op["inputs"]) > 2 else 0 * cb   # a linear without a bias has no bias
    out_b = DTYPE_BYTES[tensors[op["output"]]["dtype"]]
    tile = np.arange(tiles)
    out = []
    for i, (p, g) in enumerate(zip(ps, grids, strict=True)):
        mask = tile < min(tiles, g.shard * g.n_p * g.n_s)
        out_bytes = int(math.ceil(n_r[i] / g.shard) * p.row_block * int(oc[i]) * out_b * int(per_tile[i]))
        out.append({
            "kernel": amp_kernel(precision, partials if split[i] else None),
            "compute": {cls: int(compute[c, i]) for c, cls in enumerate(WEIGHT_CLASSES)},
            "exchange": int(exchange[i]), "syncs": int(syncs[i]), "phases": int(phases[i]),
            "launches": int(launches[i]),
            "weights": np.where(mask, int(wbytes[i] + bias[i]), 0), "inter": np.where(mask, int(wbytes[i]), 0),
            "out": np.where(mask, out_bytes, 0), "recv": np.where(mask, int(recv[i]), 0), "panel": int(panel[i]),
        })
    return out


def grid_after_linear(op: dict, src: dict, tensors: dict, params: dict, p: LayoutParams, target: Target,
                  tiles: int) -> dict:
    n_r = len(segmented_bounds(int(params["batch"]), _tokens(src, params), p.row_block)) - 1
    grid = linear_grid(n_r, src["cols"], src["inner"], p, tiles)
    per_tile = grid.max_chunks_per_tile(tiles)
    chunks = math.ceil(n_r / grid.shard) * per_tile   # producer chunks on the busiest tile, one invocation each
    cyc = chunks * int(vector_cycles(op["kind"], p.row_block, grid.out_cols(src["cols"]), target,
                                     out_cast=casts_output(op, tensors)))
    elements = chunks * p.row_block * grid.out_cols(src["cols"])
    used = min(tiles, grid.shard * grid.n_p * grid.out_slices(src["cols"]))
    mask = np.arange(tiles) < used
    out = elements * DTYPE_BYTES[tensors[op["output"]]["dtype"]]
    zero = np.zeros(tiles, dtype=np.int64)
    return {"kernel": op["kind"], "compute": dict.fromkeys(WEIGHT_CLASSES, cyc), "exchange": 0, "syncs": 0,
            "phases": 1, "launches": chunks,
            "weights": zero, "inter": zero, "out": np.where(mask, out, 0), "recv": zero, "panel": 0}


__all__ = ["grid_after_linear", "grid_linear"]
