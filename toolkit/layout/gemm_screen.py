"""O(1) screen of per-op GEMM plans, vectorized over arrays of plans, and the ops in place on their output.

The busiest cell of a plan holds the largest balanced shard of every
dimension; its compute is the calibrated AMP rule, its exchange the received
left panel (an upper bound) plus the weight pieces a gathered plan receives and
the partials of its reduction (per epoch when staged), and its bytes the
weights, panels, partials and outputs a tile holds.
"""

from __future__ import annotations

import numpy as np

from toolkit.costs import PRECISION, amp_kernel
from toolkit.layout.cost import (
    DTYPE_BYTES,
    PARTIAL_BYTES,
    amp_cycles,
    cast_cycles,
    compute_class,
    copy_cycles,
    phase_exchange_cycles,
    reduce_cycles,
    vector_cycles,
)
from toolkit.layout.plans import LayoutParams
from toolkit.layout.reduction import staged_sender_pieces
from toolkit.options import WEIGHT_CLASSES
from toolkit.target import Target

#: elementwise kinds that run in place on a linear op's output, one invocation per output piece (:func:`after_gemm`)
IN_PLACE_KINDS = ("gelu", "cast", "copy")


def runs_in_place(op: dict, src: dict | None) -> bool:
    """Whether ``op`` runs in place on the output of ``src`` (its first input's producer), a linear op."""
    return op["kind"] in IN_PLACE_KINDS and src is not None and src["rule"] == "linear"


def in_place_cycles(op: dict, tensors: dict, out_rows, out_cols, chunks, target: Target) -> np.ndarray:
    """Cycles of ``op`` in place on a plan's output pieces (``chunks`` per tile of ``out_rows x out_cols``),
    vectorized over plans."""
    return np.asarray(chunks) * vector_cycles(op["kind"], out_rows, out_cols, target,
                                              out_cast=casts_output(op, tensors))


def linear_signature(op: dict, tensors: dict, reps: dict) -> tuple:
    """Everything the screens read of a linear op: its kind and shape, its operands' and result's dtypes and
    roles, and the instances of its block. Linear ops with equal signatures (Q, K and V of one attention) have
    equal estimates under every layout and plan, so one estimate serves them all."""
    a, w, out = (tensors[t] for t in (op["inputs"][0], op["inputs"][1], op["output"]))
    return (op["kind"], op["rule"], op["rows"], op["cols"], op["inner"], op["groups"], len(op["inputs"]),
            a["dtype"], a["role"], bool(a.get("host_layout")), w["dtype"], w["per_instance"],
            reps.get(op["block"], 1), out["dtype"])


def in_place_signature(op: dict, tensors: dict) -> tuple:
    """Everything :func:`in_place_cycles` reads of an op in place on a linear op's output."""
    return op["kind"], tensors[op["output"]]["dtype"]


def casts_input(op: dict, tensors: dict) -> bool:
    """An FP8 linear whose left operand arrives as FP16 casts it on every tile (a late cast)."""
    return PRECISION[tensors[op["inputs"][1]]["dtype"]] == "f8" and tensors[op["inputs"][0]]["dtype"] == "f16"


def casts_output(op: dict, tensors: dict) -> bool:
    """An elementwise op storing F143 for FP8 matmuls (an early cast)."""
    return tensors[op["output"]]["dtype"] in ("f8_143", "f8_152")


def gemm_estimates(op: dict, tensors: dict, reps: dict, m, n, k, result_rows, result_cols, partials: str,
                   inner_block: int | None, target: Target, tiles: int, gathered=False,
                   staging=0, swapped=False) -> dict[str, np.ndarray]:
    """O(1) screen of GEMM plans of one linear op, vectorized over arrays of plans (``m, n, k`` and result split).

    The busiest cell holds the largest balanced shard of every dimension:
    ``ceil(rows / m) x ceil(cols / n) x ceil(inner / k)``; cells past the tiles
    fold (``ceil(m n k / tiles)`` per tile, run one after another). The left
    panel is received whole (an upper bound, as the layout screen counts it);
    inner splits reduce-scatter FP16 partials of a ``result_rows x result_cols``
    piece of each cell on each of its k tiles. Gathered weights (``gathered``
    true) keep ``1 / m`` of a block per tile, on another block's readers when
    there is more than one block (``stores.gathered_store``), and every reader
    receives its whole block (with one block, the rest of it) with the left
    panel before every use. A staged reduction (``staging`` N > 0) receives N partials per
    epoch: less buffer, one sync, exchange and reduction call more per epoch.
    A swapped plan (``swapped`` true) runs the transposed product: the kernel's
    rows are the cell's columns and its 16-wide panels cut the cell's rows
    (ipu-stack's ``swapped`` orientation, docs/QKV_PREPARATION.md).
    Returns per-plan arrays: compute per weight class, exchange, syncs,
    launches and per-tile bytes.
    """
    m, n, k, ra, rc = (np.asarray(v, dtype=np.int64) for v in (m, n, k, result_rows, result_cols))
    gathered = np.asarray(gathered, dtype=bool) & (m > 1)
    rows, cols, inner = op["rows"], op["cols"], op["inner"]
    r_max, c_max, k_max = -(-rows // m), -(-cols // n), -(-inner // k)
    per_tile = -(-(m * n * k) // tiles)
    split = k > 1
    swapped = np.asarray(swapped, dtype=bool)
    # no result grid given (rc 0): gemm.DEFAULT_RESULT, k pieces along the kernel's rows (swapped: the op's columns)
    default = split & (rc == 0)
    rb = np.where(split, np.where(default, np.where(swapped, 1, np.maximum(1, np.minimum(k, rows // m))), ra), 1)
    cb = np.where(split, np.where(default, np.where(swapped, np.maximum(1, np.minimum(k, cols // n)), 1), rc), 1)
    precision = PRECISION[tensors[op["inputs"][1]]["dtype"]]
    part = np.where(split, partials, "f16")
    # each stored class priced as the class the AMP reads (swapped: the coefficient is the activation panel)
    stored = np.array(WEIGHT_CLASSES, dtype=object)[:, None]
    read = np.array([compute_class(c, precision) for c in WEIGHT_CLASSES], dtype=object)[:, None]
    classes = np.where(np.atleast_1d(swapped)[None, :], stored, read) if swapped.any() else read
    cyc, _, launch, _ = amp_cycles(np.where(swapped, c_max, r_max), np.where(swapped, r_max, c_max), k_max, target,
                                   weight_class=classes, dtype=precision,
                                   partials=part, inner_block=inner_block)
    if casts_input(op, tensors):   # the FP16 activation panel (r_max x k_max in either orientation) cast to F143
        cyc = cyc + cast_cycles(r_max * k_max, target)
    a_bytes = DTYPE_BYTES[tensors[op["inputs"][0]]["dtype"]]
    w = tensors[op["inputs"][1]]
    w_bytes = DTYPE_BYTES[w["dtype"]]
    block = k_max * c_max * w_bytes                                  # one cell's (inner, column) weight block
    piece = np.where(gathered, -(-k_max // m) * c_max * w_bytes, block)  # what a tile keeps of it
    away = n * k > 1        # the block's pieces are held by another block's readers (stores.gathered_store)
    recv = (r_max * k_max * a_bytes + np.where(gathered, np.where(away, block, block - piece), 0)) * per_tile
    frag = -(-recv // (target.packet_max_words * target.word_bytes)) + 1 + np.where(gathered, m - 1 + away, 0)
    exchange = phase_exchange_cycles(recv, frag, target)
    a = tensors[op["inputs"][0]]
    if a["role"] == "input" and a.get("host_layout") and reps.get(op["block"], 1) == 1:   # host-written panels
        exchange = np.where(gathered, exchange, 0)
    piece_r, piece_c = -(-r_max // rb), -(-c_max // cb)
    # staged: epoch 0 takes the own partial and N remote ones, every later epoch the next N (staged_moves)
    step = np.where(np.asarray(staging) > 0, staging, np.maximum(k - 1, 1))   # remote partials per epoch
    full, rem = (k - 1) // step, (k - 1) % step                     # epochs of N remote partials, and the last's
    elems, slab = piece_r * piece_c, piece_r * piece_c * PARTIAL_BYTES[partials] * per_tile
    red = np.where(split, slab * (step + 1), 0)                     # the first epoch's buffer, the largest
    red_cycles = np.where(split, per_tile * (
        reduce_cycles(elems, step + 1, target, partials)
        + np.maximum(full - 1, 0) * reduce_cycles(elems, step + 1, target, partials)
        + (rem > 0) * reduce_cycles(elems, rem + 1, target, partials)), 0)
    staged = np.asarray(staging) > 0
    red = np.where(staged, red, np.where(split, slab * k, 0))      # unstaged: every slice lands at once
    # a piece narrower than its cell whose rows are not whole 32-byte AMP panel rows leaves row by row
    strided = (piece_c < c_max) & (piece_c * PARTIAL_BYTES[partials] % target.costs.exchange_panel_row_bytes != 0)
    runs = np.where(strided, piece_r * per_tile, 0)                 # partial-panel runs per remote piece
    pieces = staged_sender_pieces(k, staging)   # fixed partial groups: an epoch's senders send all their pieces
    sender, s_runs = (np.round(x * pieces).astype(np.int64) for x in (slab, runs))
    red_x = np.where(staged, full * phase_exchange_cycles(slab * step, step + 1, target, s_runs, sender)
                     + (rem > 0) * phase_exchange_cycles(slab * rem, rem + 1, target, s_runs, sender),
                     phase_exchange_cycles(slab * k, k, target, runs * (k - 1)))
    epochs = np.maximum(full + (rem > 0), 1)
    exchange = exchange + np.where(split, red_x, 0)
    rep = reps.get(op["block"], 1) if w["per_instance"] else 1
    wbytes = piece * rep * per_tile
    own = np.where(gathered, copy_cycles(piece, target) * per_tile, 0)   # the tile's own piece, copied locally
    out_b = DTYPE_BYTES[tensors[op["output"]]["dtype"]]
    return {
        "compute_interleaved": cyc[0] * per_tile + red_cycles + own,
        "compute_standard": cyc[1] * per_tile + red_cycles + own,
        "exchange": exchange, "syncs": np.where(split, 1 + epochs, 1), "phases": np.where(split, 3 + 3 * epochs, 3),
        "launches": launch * per_tile + np.where(split, epochs, 0), "weight_bytes": wbytes,
        "bias_bytes": c_max * 2 * rep * per_tile,
        "out_bytes": np.where(split, piece_r * piece_c, r_max * c_max) * out_b * per_tile,
        "recv_bytes": recv + red + np.where(gathered, piece * per_tile, 0),   # gathered: the whole block buffer
        "panel_bytes": r_max * k_max * a_bytes, "tiles_used": np.minimum(m * n * k, tiles),
        "gather_bytes": np.where(gathered, block * per_tile, 0),   # the whole gathered block, in the weight class
        "out_tiles": np.minimum(m * n * np.where(split, rb * cb, 1), tiles),
        "out_rows": np.where(split, piece_r, r_max), "out_cols": np.where(split, piece_c, c_max),
        "chunks": per_tile,
    }


def gemm_estimate(op: dict, gemm, tensors: dict, reps: dict, p: LayoutParams, target: Target, tiles: int) -> dict:
    """The screen's estimate of one linear op under its own GEMM plan (see :func:`gemm_estimates`)."""
    e = {k: np.asarray(v).reshape(-1)[0] for k, v in gemm_estimates(
        op, tensors, reps, gemm.m, gemm.n, gemm.k, gemm.result_rows, gemm.result_cols, p.partials, p.inner_block,
        target, tiles, gemm.weights == "gathered", gemm.staging, gemm.swapped).items()}
    mask = np.arange(tiles) < int(e["tiles_used"])
    precision = PRECISION[tensors[op["inputs"][1]]["dtype"]]
    # the op's own memory class prices both layout classes; swapped: the weights are the streamed operand
    inter_w = (gemm.weights != "gathered" and not gemm.swapped
               and compute_class(gemm.memory or "interleaved", precision) == "interleaved")
    return {
        "kernel": amp_kernel(precision, p.partials if gemm.k > 1 else None),
        "compute": {cls: int(e[f"compute_{gemm.memory or cls}"]) for cls in WEIGHT_CLASSES},
        "exchange": int(e["exchange"]),
        "syncs": int(e["syncs"]), "phases": int(e["phases"]), "launches": int(e["launches"]),
        "weights": np.where(mask, int(e["weight_bytes"] + e["bias_bytes"]), 0),
        "inter": np.where(mask, int(e["weight_bytes"]) if inter_w else 0, 0),
        "out": np.where(np.arange(tiles) < int(e["out_tiles"]), int(e["out_bytes"]), 0),
        "recv": np.where(mask, int(e["recv_bytes"]), 0), "panel": int(e["panel_bytes"]),
        "gather": int(e["gather_bytes"]),
    }


def after_gemm(op: dict, src: dict, gemm, tensors: dict, target: Target, tiles: int) -> dict:
    """An elementwise op in place on a GEMM plan's output: one invocation per output piece on each tile."""
    e = {k: np.asarray(v).reshape(-1)[0] for k, v in gemm_estimates(
        src, tensors, {}, gemm.m, gemm.n, gemm.k, gemm.result_rows, gemm.result_cols, "f16", None, target,
        tiles).items()}
    chunks = int(e["chunks"])
    cyc = int(in_place_cycles(op, tensors, e["out_rows"], e["out_cols"], chunks, target))
    out = chunks * int(e["out_rows"] * e["out_cols"]) * DTYPE_BYTES[tensors[op["output"]]["dtype"]]
    zero = np.zeros(tiles, dtype=np.int64)
    return {"kernel": op["kind"], "compute": dict.fromkeys(WEIGHT_CLASSES, cyc), "exchange": 0, "syncs": 0,
            "phases": 1, "launches": chunks, "weights": zero, "inter": zero,
            "out": np.where(np.arange(tiles) < int(e["out_tiles"]), out, 0), "recv": zero, "panel": 0}


__all__ = ["IN_PLACE_KINDS", "after_gemm", "casts_input", "casts_output", "gemm_estimate", "gemm_estimates",
           "in_place_cycles", "in_place_signature", "linear_signature", "runs_in_place"]
