"""Streaming (FlashAttention) attention plans: each query-row owner streams every key block of its head.

The plan of an ``attention`` op (``toolkit.graph.streaming``) is the
shared-row grid of the materialized form (:func:`~toolkit.layout.attention.attention_cells`:
one cell per (image, head, query-row block)), with different operands:

- Q: the cell's query rows of its head (one slot per cell), as the scores' need;
- K and V: the head's key rows cut into ``key_block`` blocks per image, every
  block replicated over the head's row owners (``key_need``: ``n_blocks`` slots
  per cell; the schedule moves one block of each per exchange phase, so at most
  one K block and one V block are live on a tile, never the whole K and V);
- the output: the heads' values on the cells, as the values product's.

Pricing (:func:`stream_cycles`), per cell and key block, the kernels
``ipu-stack`` runs for ``--attention-strategy flash``
(``crates/ipu-codegen/src/kernel/attention.rs``, costs in ``kernel/cost.rs``):
the QK product on the AMP (rows x head width x block keys; K block as the
coefficient, interleaved), the block softmax (the ``softmax`` rule on the block
padded to ``key_block``: FP16 exponentials against the block's own maximum,
FP32 maxima and sums), the PV product (block keys deep), and the attention
merge that folds the block into the FP32 accumulator: ``merge_first`` (first
block), ``merge_update`` (rescale by ``exp(m_old - m_new)`` and add),
``merge_last`` (the same, then normalize by the running sum and store FP16);
one block alone is the existing ``merge`` (first and final).
"""

from __future__ import annotations

import numpy as np

from toolkit.costs import cycles
from toolkit.layout.attention import attention_cells, qkv_need
from toolkit.layout.cost import DTYPE_BYTES, amp_cycles, phase_exchange_cycles
from toolkit.layout.layout import Layout, segmented_bounds
from toolkit.target import Target

KERNEL = "attention_stream"            # a key block that updates the FP32 state
LAST_KERNEL = "attention_stream_last"  # the last key block: normalize and write the FP16 result
#: need keys: Q by its tensor id, a second slice of one tensor ``-t - 1`` (as the scores' fused K), a third
#: (fused QKV's V, a fused KV's V) ``-t - 1 - V_SLOT``; :func:`need_tensor` reads any of them back
V_SLOT = 1 << 32
#: the AMP's coefficient panel columns: a key block is padded to them (and the softmax to ``key_block``)
PANEL = 16


def need_tensor(key: int) -> int:
    """The tensor of a need key (see :data:`V_SLOT`)."""
    return key if key >= 0 else (-key - 1) % V_SLOT


def need_keys(q: int, k: int, v: int) -> tuple[int, int, int]:
    """The need keys of Q, K and V (tensor ids; one tensor may hold several: fused QKV, a fused KV)."""
    return q, (-k - 1 if k == q else k), (-v - 1 - V_SLOT if v in (q, k) else v)


def key_blocks(keys: int, key_block: int) -> np.ndarray:
    """Bounds of the key blocks of one image's ``keys`` (the last may be short)."""
    return np.unique(np.append(np.arange(0, keys, key_block), keys))


def key_need(shape: tuple[int, int, int], batch: int, heads: int, keys: int, hd: int, offset: int, key_block: int,
             ct: np.ndarray) -> Layout:
    """K or V of every cell, cut into key blocks: chunk (image, block) x (head columns), replicas = the head's
    row blocks; slot ``(image, block, head, row block)`` belongs to cell ``(image, head, row block)``."""
    whole = qkv_need(shape, batch, heads, keys, hd, offset, ct, np.arange(ct.shape[2] + 1), by_row_block=False)
    kb = key_blocks(keys, key_block)
    n_b = len(kb) - 1
    rows_b = segmented_bounds(batch, keys, key_block)
    tiles = np.repeat(whole.tiles, n_b, axis=1)
    cells = np.repeat(whole.cells, n_b, axis=1)
    return Layout(shape, (whole.bounds[0], rows_b, whole.bounds[2]), tiles, cells)


def streaming_plan(op: dict, acts: list[int], tensors_shape, batch: int, row_block: int, tiles: int,
                   key_block: int, out_shape: tuple[int, int, int]) -> dict:
    """The fields of the OpPlan of one streaming attention op (``acts``: Q, K, V, or a fused QKV tensor, or Q and
    a fused KV; ``tensors_shape``: tensor -> its (G, R, C) shape)."""
    src = dict(zip("qkv", [acts[0], acts[min(1, len(acts) - 1)], acts[-1]], strict=True))
    tokens, keys, hd = int(op["rows"]), int(op["inner"]), int(op["cols"])
    heads = int(op["groups"]) // batch
    rb, ct = attention_cells(batch, heads, tokens, row_block, tiles)
    ci = np.arange(ct.size).reshape(ct.shape)
    n_rb = len(rb) - 1
    cells = ct.size
    # a tensor holding several projections holds them in Q, K, V order (fused QKV: offsets 0, width, 2 width)
    off = {x: [y for y in "qkv" if src[y] == src[x]].index(x) * heads * hd for x in "qkv"}
    q, k, v = need_keys(src["q"], src["k"], src["v"])
    needs = {q: qkv_need(tensors_shape(src["q"]), batch, heads, tokens, hd, off["q"], ct, rb, by_row_block=True),
             k: key_need(tensors_shape(src["k"]), batch, heads, keys, hd, off["k"], key_block, ct),
             v: key_need(tensors_shape(src["v"]), batch, heads, keys, hd, off["v"], key_block, ct)}
    rows = np.diff(rb)[None, None, :].repeat(batch, 0).repeat(heads, 1).ravel()
    shape_arr = np.stack([rows, np.full(cells, hd), np.full(cells, keys), np.ones(cells, int)], -1)
    o_rows = segmented_bounds(batch, tokens, row_block)
    o_tiles = ct.transpose(0, 2, 1).reshape(1, batch * n_rb, heads, 1)
    o_cells = ci.transpose(0, 2, 1).reshape(1, batch * n_rb, heads, 1)
    o_lay = Layout(out_shape, (np.array([0, 1]), o_rows, np.arange(heads + 1) * hd), o_tiles, o_cells)
    return {"op_id": op["op_id"], "name": op["name"], "kind": op["kind"], "rule": "attention", "kernel": KERNEL,
            "cell_tiles": ct.ravel(), "cell_shape": shape_arr, "cell_wave": np.arange(cells) // tiles,
            "needs": needs, "output": o_lay, "coefficient": k, "key_block": key_block}


def stream_cycles(rows: np.ndarray, hd: int, keys: int, key_block: int, target: Target) -> dict[str, np.ndarray]:
    """Per key block (``[blocks, cells]``): cycles, calls and worker launches of one cell's QK product, block
    softmax, PV product and merge, each with its supervisor launch (see the module doc)."""
    rows = np.asarray(rows, dtype=np.int64)
    kb = np.diff(key_blocks(keys, key_block))
    n_b = len(kb)
    out = {"cycles": np.zeros((n_b, len(rows)), dtype=np.int64), "calls": np.zeros((n_b, len(rows)), dtype=np.int64),
           "launches": np.zeros((n_b, len(rows)), dtype=np.int64)}
    launch = target.costs.launch_cycles
    for j, width in enumerate(kb):
        qk, qk_calls, qk_l, _ = amp_cycles(rows, np.full(len(rows), width), np.full(len(rows), hd), target,
                                           weight_class="interleaved")
        pv, pv_calls, pv_l, _ = amp_cycles(rows, np.full(len(rows), hd), np.full(len(rows), width), target,
                                           weight_class="interleaved")
        soft = cycles("softmax", target, rows=rows, cols=width, padded=key_block) + launch
        stage = "merge" if n_b == 1 else ("merge_first" if j == 0 else "merge_last" if j == n_b - 1 else "merge_update")
        merge = cycles(stage, target, rows=rows, cols=hd) + launch
        out["cycles"][j] = qk + soft + pv + merge
        out["calls"][j] = qk_calls + pv_calls + 2
        out["launches"][j] = qk_l + pv_l + 2
    return out


def stream_estimate(plan, tensors: dict, target: Target, tiles: int) -> dict:
    """The screen's estimate of one streaming attention op (the keys of ``layout.screen.op_estimate``): compute
    on the busiest tile, one sync and exchange phase per key block (Q with the first), received bytes of Q plus
    one K and one V block per tile (what is live at once)."""
    sh = plan.cell_shape
    hd, keys = int(sh[0, 1]), int(sh[0, 2])
    priced = stream_cycles(sh[:, 0], hd, keys, plan.key_block, target)
    per = np.bincount(plan.cell_tiles, weights=priced["cycles"].sum(axis=0), minlength=tiles)
    n_b = priced["cycles"].shape[0]
    q, k, _v = list(plan.needs)
    q_need = plan.needs[q]
    q_bytes = q_need.slot_elements() * DTYPE_BYTES[tensors[need_tensor(q)]["dtype"]]
    kv_slot = int(plan.needs[k].slot_elements().max(initial=0)) * DTYPE_BYTES[tensors[need_tensor(k)]["dtype"]]
    recv = np.bincount(q_need.tiles.ravel().clip(0), weights=np.where(q_need.tiles.ravel() >= 0, q_bytes, 0),
                       minlength=tiles)
    block = np.bincount(plan.cell_tiles, minlength=tiles) * 2 * kv_slot
    first = phase_exchange_cycles(np.array([recv.max(initial=0) + block.max(initial=0)]), np.array([4]), target)
    rest = phase_exchange_cycles(np.array([block.max(initial=0)]), np.array([3]), target)
    launches = np.bincount(plan.cell_tiles, weights=priced["calls"].sum(axis=0), minlength=tiles)
    return {"kernel": plan.kernel, "compute": dict.fromkeys(("interleaved", "standard"), int(per.max(initial=0))),
            "exchange": int(first.sum()) + (n_b - 1) * int(rest.sum()), "syncs": n_b, "phases": 3 * n_b,
            "launches": int(launches.max(initial=0)), "panel": kv_slot, "recv": (recv + block).astype(np.int64)}
