"""Attention products on grids of their own: per-head ``m x n`` scores and ``m x 1 x k`` values plans.

With the shared-row plan (``plans.plan_graph``'s default) every scores cell
holds a block of query rows against every key, and the values cell on the same
tile reads those probabilities in place. An independent product grid (the
plan of the scores or values op, a :class:`~toolkit.layout.gemm.GemmPlan`
read per (image, head)) cuts the products differently:

- scores ``m x n``: m query-row shards x n key-column shards per head; the
  softmax then gathers complete rows (one owner per query shard: the tile of
  its first key shard), so the scores' exchange is a gather;
- values ``m x 1 x k``: m query-row shards x k key (inner) shards per head,
  each reading its probability block and value rows; with k > 1 the FP16
  partials are reduce-scattered by rows over the shard's k tiles.

Balanced shards, as for linear plans (729 keys in 11 shards are 67/66).
"""

from __future__ import annotations

import numpy as np

from toolkit.costs import amp_kernel
from toolkit.layout.gemm import GemmPlan, balanced_bounds, sub_bounds
from toolkit.layout.layout import Layout, block_bounds, segmented_bounds, spread
from toolkit.target import Costs


def _cells(groups: int, a: int, b: int, tiles: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tiles, cell ids and waves of a ``groups x a x b`` grid (one cell per tile, waves past the tiles)."""
    idx = np.arange(groups * a * b)
    return (idx % tiles).astype(np.int32).reshape(groups, a, b), idx.reshape(groups, a, b), idx // tiles


def _head_cols(shape: tuple[int, int, int], heads: int, hd: int, offset: int) -> tuple[np.ndarray, int]:
    cols = shape[2]
    col_b = np.unique(np.concatenate([[0], offset + np.arange(heads + 1) * hd, [cols]]))
    return col_b, int(np.searchsorted(col_b, offset))


def attention_cells(batch: int, heads: int, tokens: int, row_block: int, tiles: int) -> tuple[np.ndarray, np.ndarray]:
    """Shared-row attention: query row blocks of ``row_block`` and the tile of every (image, head, block) cell."""
    rb = block_bounds(tokens, row_block)
    n_r = len(rb) - 1
    cells = batch * heads * n_r
    idx = np.arange(cells)
    ct = (spread(cells, tiles) if cells <= tiles else (idx % tiles).astype(np.int32)).reshape(batch, heads, n_r)
    return rb, ct


def head_rows_need(shape: tuple[int, int, int], batch: int, heads: int, tokens: int, hd: int, offset: int,
                   row_b: np.ndarray, ct: np.ndarray, ci: np.ndarray) -> Layout:
    """Need of one head slice of Q, K or V: per image, rows cut by ``row_b``, the head's columns.

    ``ct``/``ci``: ``[batch, heads, row shards, replicas]`` tiles and cells of the cells reading each block.
    """
    col_b, first = _head_cols(shape, heads, hd, offset)
    n_rows = len(row_b) - 1
    rows = (np.arange(batch)[:, None] * tokens + row_b[None, :-1]).ravel()
    bounds = np.append(rows, batch * tokens)
    reps = ct.shape[3]
    tiles = np.full((1, batch * n_rows, len(col_b) - 1, reps), -1, dtype=np.int32)
    cells = np.full_like(tiles, -1, dtype=np.int64)
    tiles[0, :, first:first + heads, :] = ct.transpose(0, 2, 1, 3).reshape(batch * n_rows, heads, reps)
    cells[0, :, first:first + heads, :] = ci.transpose(0, 2, 1, 3).reshape(batch * n_rows, heads, reps)
    return Layout(shape, (np.array([0, 1]), bounds, col_b), tiles, cells)


def scores_grid(gemm: GemmPlan, batch: int, heads: int, tokens: int, hd: int, q_shape, q_off: int, k_off: int,
                tiles: int, *, keys: int | None = None, k_shape=None) -> dict:
    """Cells, needs (Q by query shard, K by key shard) and the output of an ``m x n`` scores grid per head
    (``tokens`` query rows against ``keys`` key rows per image, of ``k_shape``; by default the queries')."""
    groups = batch * heads
    keys = tokens if keys is None else keys
    qb, kb = balanced_bounds(tokens, gemm.m), balanced_bounds(keys, gemm.n)
    m, n = len(qb) - 1, len(kb) - 1
    ct, ci, wave = _cells(groups, m, n, tiles)
    g4 = (batch, heads)
    q_need = head_rows_need(q_shape, batch, heads, tokens, hd, q_off, qb,
                            ct.reshape(*g4, m, n), ci.reshape(*g4, m, n))
    k_need = head_rows_need(q_shape if k_shape is None else k_shape, batch, heads, keys, hd, k_off, kb,
                            ct.reshape(*g4, m, n).transpose(0, 1, 3, 2), ci.reshape(*g4, m, n).transpose(0, 1, 3, 2))
    out = Layout((groups, tokens, keys), (np.arange(groups + 1), qb, kb), ct[..., None], ci[..., None])
    rows, cols = np.diff(qb)[None, :, None], np.diff(kb)[None, None, :]
    shape = np.stack(np.broadcast_arrays(rows + 0 * ct, cols + 0 * ct, np.full_like(ct, hd), np.ones_like(ct)),
                     -1).reshape(-1, 4)
    return {"cell_tiles": ct.ravel(), "cell_shape": shape, "cell_wave": wave, "q": q_need, "k": k_need,
            "output": out}


def softmax_rows(scores: Layout, tiles: int) -> Layout:
    """Complete softmax rows of a key-split scores layout, spread over all the tiles.

    Every (image, head) group's query rows are cut into balanced blocks so that
    the owners fill the tiles, whatever the scores grid's query shards (the real
    compiler's materialized attention runs its softmax on the 1,472 shared-row
    owners, 7-8 rows of 729 keys each, with every product grid:
    docs/SOFTMAX_OPTIMIZATION.md); one owner per tile.
    """
    g_b = scores.bounds[0]
    groups, queries, keys = scores.shape
    row_b = balanced_bounds(queries, max(1, min(queries, tiles // max(1, groups))))
    owners = groups * (len(row_b) - 1)
    idx = np.arange(owners)
    tile = (idx % tiles).astype(np.int32).reshape(groups, -1, 1, 1)
    return Layout(scores.shape, (g_b, row_b, np.array([0, keys])), tile, idx.reshape(tile.shape))


def values_grid(gemm: GemmPlan, batch: int, heads: int, tokens: int, hd: int, v_shape, v_off: int,
                out_shape, tiles: int, *, keys: int | None = None) -> dict:
    """Cells, needs (P blocks, V by key shard), partials and output of an ``m x 1 x k`` values grid per head
    (``tokens`` query rows, ``keys`` value rows per image; by default as many as queries)."""
    groups = batch * heads
    keys = tokens if keys is None else keys
    qb, kb = balanced_bounds(tokens, gemm.m), balanced_bounds(keys, gemm.k)
    m, k = len(qb) - 1, len(kb) - 1
    ct, ci, wave = _cells(groups, m, k, tiles)
    g4 = (batch, heads)
    p_need = Layout((groups, tokens, keys), (np.arange(groups + 1), qb, kb), ct[..., None], ci[..., None])
    v_need = head_rows_need(v_shape, batch, heads, keys, hd, v_off, kb,
                            ct.reshape(*g4, m, k).transpose(0, 1, 3, 2), ci.reshape(*g4, m, k).transpose(0, 1, 3, 2))
    rows, inner = np.diff(qb)[None, :, None], np.diff(kb)[None, None, :]
    shape = np.stack(np.broadcast_arrays(rows + 0 * ct, np.full_like(ct, hd), inner + 0 * ct, np.ones_like(ct)),
                     -1).reshape(-1, 4)
    o_rows = np.append((np.arange(batch)[:, None] * tokens + qb[None, :-1]).ravel(), batch * tokens)
    o_cols = np.arange(heads + 1) * hd
    # [batch, heads, m, k] -> [k, batch * m, heads]
    per = ct.reshape(*g4, m, k).transpose(3, 0, 2, 1).reshape(k, batch * m, heads)
    per_c = ci.reshape(*g4, m, k).transpose(3, 0, 2, 1).reshape(k, batch * m, heads)
    g1 = np.array([0, 1])
    out = {"cell_tiles": ct.ravel(), "cell_shape": shape, "cell_wave": wave, "p": p_need, "v": v_need}
    if k == 1:
        out["output"] = Layout(out_shape, (g1, o_rows, o_cols), per[..., None], per_c[..., None])
        return out
    out["partials"] = Layout((k, *out_shape[1:]), (np.arange(k + 1), o_rows, o_cols), per[..., None],
                             per_c[..., None])
    red_rows, j, shard = sub_bounds(o_rows, k)   # each row shard's output cut by rows over its k tiles
    red_t, red_c = per[j, shard], per_c[j, shard]
    out["reduce_need"] = Layout((k, *out_shape[1:]), (np.array([0, k]), red_rows, o_cols), red_t[None, ..., None],
                                red_c[None, ..., None])
    out["output"] = Layout(out_shape, (g1, red_rows, o_cols), red_t[None, ..., None], red_c[None, ..., None])
    return out


def attention_grid(op: dict, gemm: GemmPlan, acts: list[int], src: dict, off: dict, shape, batch: int, heads: int,
                   tokens: int, hd: int, out_shape, partials: str, tiles: int, *, keys: int | None = None,
                   kv_shape=None) -> dict:
    """The OpPlan fields of a scores or values op on its own per-head grid.

    ``src``/``off``: the Q, K and V tensors and their column offsets (a fused
    QKV tensor holds all three); the AMP coefficient operand (K for scores, V
    for values) is named in ``coefficient``. ``keys`` / ``kv_shape``: the key
    rows per image and the K (scores) or V (values) tensor's shape, when they
    differ from the queries' (a pooling head's one query per image).
    """
    common = {"op_id": op["op_id"], "name": op["name"], "kind": op["kind"], "kernel": amp_kernel("f16")}
    if op["rule"] == "scores":
        g = scores_grid(gemm, batch, heads, tokens, hd, shape, off["q"], off["k"], tiles, keys=keys, k_shape=kv_shape)
        k_key = -src["k"] - 1 if src["k"] == src["q"] else src["k"]   # fused: two slices of one tensor
        return {**common, "rule": "scores", "cell_tiles": g["cell_tiles"], "cell_shape": g["cell_shape"],
                "cell_wave": g["cell_wave"], "needs": {src["q"]: g["q"], k_key: g["k"]}, "output": g["output"],
                "coefficient": k_key}
    g = values_grid(gemm, batch, heads, tokens, hd, shape if kv_shape is None else kv_shape, off["v"], out_shape,
                    tiles, keys=keys)
    split = "partials" in g
    return {**common, "kernel": amp_kernel("f16", partials if split else None),
            "rule": "values", "cell_tiles": g["cell_tiles"], "cell_shape": g["cell_shape"],
            "cell_wave": g["cell_wave"], "needs": {acts[0]: g["p"], src["v"]: g["v"]}, "output": g["output"],
            "partials": g.get("partials"), "reduce_need": g.get("reduce_need"), "coefficient": src["v"]}


#: key rows of one K panel on its preparation owner: ipu-stack packs an attention's K into 64 x 16 AMP
#: transposed-right panels, one per owner (16 heads x 12 key blocks x 5 = 960 owners for SigLIP B1), and keeps V
#: as whole-key BlockMajor 16-column panels (80 owners); the products' tiles copy their blocks from those panels
#: (its mid/implementation/attention.rs prepare_attention_blocks; docs/QKV_PREPARATION.md, "attention's
#: preparation copy")
K_PANEL_ROWS = 64
#: columns of one prepared panel: the AMP's micro-panel on the machine the plans are made for (``plan_graph`` has
#: no target; the cost rules read the same field of the target they price)
AMP_PANEL_COLS = Costs().amp_panel_cols


def operand_panels(shape: tuple[int, int, int], batch: int, heads: int, keys: int, hd: int, offset: int,
                   row_block: int, panel_cols: int, tiles: int) -> Layout:
    """Where an attention product's coefficient operand (K or V, columns at ``offset``) is prepared before the
    product reads it: per image, key blocks of ``row_block`` rows (``keys`` or more: whole keys) by
    ``panel_cols``-column panels of every head, one panel per owner, the owners spread evenly over the tiles
    (round robin past them)."""
    col_b = np.unique(np.concatenate([[0, shape[2]], offset + (np.arange(heads)[:, None] * hd + np.append(
        np.arange(0, hd, panel_cols), hd)[None, :]).ravel()]))
    rows_b = segmented_bounds(batch, keys, min(row_block, keys))
    lo, hi = int(np.searchsorted(col_b, offset)), int(np.searchsorted(col_b, offset + heads * hd))
    n = (len(rows_b) - 1) * (hi - lo)
    idx = np.arange(n, dtype=np.int64)
    owner = (idx * tiles // n if n <= tiles else idx % tiles).astype(np.int32)
    t = np.full((1, len(rows_b) - 1, len(col_b) - 1, 1), -1, dtype=np.int32)
    t[0, :, lo:hi, 0] = owner.reshape(len(rows_b) - 1, hi - lo)
    return Layout(shape, (np.array([0, 1]), rows_b, col_b), t)


def qkv_need(shape: tuple[int, int, int], batch: int, heads: int, tokens: int, head_dim: int, offset: int,
             ct: np.ndarray, rb: np.ndarray, *, by_row_block: bool) -> Layout:
    ci = np.arange(ct.size).reshape(ct.shape)
    """Need of one head slice of Q, K or V (columns at ``offset``) for the attention cells."""
    width = heads * head_dim
    cols = shape[2]
    col_b = np.unique(np.concatenate([[0], offset + np.arange(heads + 1) * head_dim, [cols]]))
    first = int(np.searchsorted(col_b, offset))
    n_c = len(col_b) - 1
    n_r = len(rb) - 1
    g1 = np.array([0, 1])
    if by_row_block:   # Q: rows [b*T + r-block], one replica
        rows_b = segmented_bounds(batch, tokens, int(rb[1] - rb[0])) if n_r > 1 else np.arange(batch + 1) * tokens
        tiles = np.full((1, batch * n_r, n_c, 1), -1, dtype=np.int32)
        cells = np.full_like(tiles, -1, dtype=np.int64)
        tiles[0, :, first:first + heads, 0] = ct.transpose(0, 2, 1).reshape(batch * n_r, heads)
        cells[0, :, first:first + heads, 0] = ci.transpose(0, 2, 1).reshape(batch * n_r, heads)
    else:              # K, V: whole image rows, replicated over the row blocks
        rows_b = np.arange(batch + 1, dtype=np.int64) * tokens
        tiles = np.full((1, batch, n_c, n_r), -1, dtype=np.int32)
        cells = np.full_like(tiles, -1, dtype=np.int64)
        tiles[0, :, first:first + heads, :] = ct
        cells[0, :, first:first + heads, :] = ci
    del width
    return Layout(shape, (g1, rows_b, col_b), tiles, cells)


__all__ = [
    "AMP_PANEL_COLS",
    "K_PANEL_ROWS",
    "attention_cells",
    "attention_grid",
    "head_rows_need",
    "operand_panels",
    "qkv_need",
    "scores_grid",
    "softmax_rows",
    "values_grid",
]
