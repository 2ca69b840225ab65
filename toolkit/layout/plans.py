"""Per-op kernel plans: the tile grid, operand needs and output layout of each op.

A ``LayoutParams`` value (row block, panel width, inner split, weight memory
class, fused QKV) fixes a plan for every op of a graph. The rules are a table
keyed by op role:

- ``stream``: the residual stream and LayerNorm run on row-block home tiles,
  whole rows per tile. Every value that is live at once in the stream (block
  input, LayerNorm output, residual output) shares this edge-layout contract.
- ``linear``: ``A[rows, inner] x W[inner, cols]`` on an R x P x S grid of
  (row block, column panel of 16-column groups, inner split). A needs the
  contiguous ``[row block, inner slice]`` panel; W panels are resident. Q, K
  and V share one grid (one contract), so heads line up.
- ``scores`` / ``values``: per (image, head) group and row block of tokens.
- ``elementwise`` (GELU, softmax): in place on the producer's layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from toolkit.costs import PRECISION, amp_kernel
from toolkit.layout.attention import (
    AMP_PANEL_COLS,
    K_PANEL_ROWS,
    attention_cells,
    attention_grid,
    operand_panels,
    qkv_need,
    softmax_rows,
)
from toolkit.layout.gemm import GemmPlan, balanced_bounds, sub_bounds
from toolkit.layout.layout import Layout, block_bounds, remote_sources, segmented_bounds, spread
from toolkit.layout.layout import homes as home_tiles
from toolkit.layout.mapping import map_plans
from toolkit.layout.preparation import UNPACKED, qk_preparation, transposed_results
from toolkit.layout.reduction import REDUCE_SLICE_MIN_COLS, reduce_slices
from toolkit.layout.stores import gathered_store, stream_store

AMP_GROUP = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class LayoutParams:
    """The layout choice for a whole graph (one candidate)."""

    row_block: int = 36
    stream_block: int | None = None   # rows per home tile of the residual stream (None: row_block)
    row_shard: int | None = None      # row blocks processed side by side (None: all); the rest run in waves
    panel_groups: int | None = None   # output panel width in 16-column groups (None: fill the tiles)
    inner_split: int = 1              # tiles sharing one linear op's inner dimension (partials reduced)
    inner_block: int | None = None    # AMP inner block per call (None: whole inner slice)
    weight_class: str = "interleaved"  # interleaved | standard
    fused_qkv: bool = False
    partials: str = "f16"             # inner-split partials: f16 (the hardware's) | f32 (only when asked)
    plans: tuple[tuple[str, GemmPlan], ...] = ()   # per-op GEMM plans (op name, plan); other linears use the grid
    stream_weights: str = "resident"  # LayerNorm gamma / beta: resident on every home tile, or gathered (stored
                                      # once, in pieces over the home tiles, and gathered before every use)
    tile_mapping: tuple[int, ...] = ()  # execution tile of every planned tile (layout.mapping; (): the identity)
    qk_preparation: str = "grouped"   # QK_PREPARATIONS: swapped Q / K results unpack in one phase each
                                      # (separate) or both in the K projection's phase on disjoint owners

    def plan_of(self, op_name: str) -> GemmPlan | None:
        """The op's own GEMM plan, or None (it follows the global grid)."""
        return next((g for name, g in self.plans if name == op_name), None)

    def local_rows(self, op: dict, tokens: int) -> int:
        """The most rows of matmul ``op`` one tile holds: ``ceil(rows / m)`` under its own plan (balanced row
        partitions), the row block (at most one image's tokens) on the global grid."""
        gemm = self.plan_of(op["name"])
        return -(-int(op["rows"]) // gemm.m) if gemm is not None else min(self.row_block, tokens)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpPlan:
    """One op's grid and layouts. ``cells`` work cells map to ``cell_tiles``."""

    op_id: int
    name: str
    kind: str
    rule: str
    kernel: str
    cell_tiles: np.ndarray           # tile of each cell
    cell_shape: np.ndarray           # (cells, 4): rows, cols, inner, groups per cell
    cell_wave: np.ndarray | None = None  # wave of each cell (waves run one after another); None: one wave
    needs: dict[int, Layout] = field(default_factory=dict)   # input tensor -> need layout
    weights: dict[int, Layout] = field(default_factory=dict)  # resident weight tensor -> layout
    weight_slots: dict[int, np.ndarray] = field(default_factory=dict)  # weight tensor -> slot of each cell (-1: none)
    output: Layout | None = None
    partials: Layout | None = None   # inner-split partial sums [S, rows, cols] (None when S == 1)
    reduce_need: Layout | None = None
    staging: int = 0                 # remote partials reduced per epoch (0: all at once; see staged_moves)
    key: tuple = ()                  # the parameters this plan depends on (plans with equal keys are equal)
    precision: str = "f16"           # what the kernel's inputs are fed as (costs.PRECISION: f16 | f8)
    cast_input: bool = False         # an FP8 matmul casting its FP16 left panel on the tile (a late cast)
    cast_right: bool = False         # an FP8 attention product casting its FP16 right panel (K or V) on the tile
    out_cast: bool = False           # an elementwise op storing F143 for FP8 matmuls (an early cast)
    coefficient: int | None = None   # need key of an attention product's AMP coefficient operand held in the
                                     # layout's weight class (grid plans: K for scores, V for values)
    inputs: dict[int, Layout] = field(default_factory=dict)  # graph inputs this op reads first -> the layout they
                                     # start in: the residual stream's, or (host_layout) this op's need of them
    swapped: bool = False            # the kernel runs the transposed product: its rows are the cell's columns and
                                     # the left panel (need ``coefficient``) is the AMP coefficient
    weight_class: str = ""           # the op's own coefficient memory class ("": the layout's)
    unpack: tuple[int, int] | None = None  # output columns [lo, hi) a swapped projection unpacks into row-major
                                     # rows for the attention scores (Q, K; V's consumer reads the AMP order)
    unpack_later: bool = False       # grouped preparation: this op's unpack runs in the next unpacking op's last
                                     # compute phase, beside it on disjoint owners
    rearrange: int | None = None     # need key of an attention scores' query operand that every cell rearranges
                                     # from row-major (an unpacked swapped projection's rows) into the AMP's
                                     # left-operand order before its GEMM (ipu-stack's rearrange_amp_left_f16)
    prep: Layout | None = None       # an attention product's coefficient (K, V) prepared on panel owners first:
                                     # moved there, rearranged by ``prep_kernel`` ("": copied as they arrive),
                                     # then routed to the product's cells from there (attention.operand_panels)
    prep_kernel: str = ""
    prep_sources: int = 0            # the most remote source pieces one panel owner receives (its receive cutovers)


def stream_layout(rows_bounds: np.ndarray, shape: tuple[int, int, int], homes: np.ndarray) -> Layout:
    return Layout(shape, (np.array([0, 1]), rows_bounds, np.array([0, shape[2]])), homes.reshape(1, -1, 1, 1))


@dataclass(frozen=True, slots=True)
class LinearGrid:
    """The R x P x S grid of a linear op: row shard, panel and inner blocks."""

    shard: int
    col_block: int
    inner_block: int
    n_p: int
    n_s: int

    def max_chunks_per_tile(self, tiles: int) -> int:
        return math.ceil(self.shard * self.n_p * self.n_s / tiles)

    def out_slices(self, cols: int) -> int:
        """Tiles holding one panel's output (inner splits reduce-scatter a panel over up to S tiles)."""
        width = min(self.col_block, cols)
        return 1 if self.n_s == 1 else max(1, min(self.n_s, width // REDUCE_SLICE_MIN_COLS))

    def out_cols(self, cols: int) -> int:
        """Widest output column slice on one tile."""
        return math.ceil(min(self.col_block, cols) / self.out_slices(cols))


def linear_grid(n_r: int, cols: int, inner: int, p: LayoutParams, tiles: int) -> LinearGrid:
    """Grid arithmetic shared by ``linear_plan`` and the search's O(1) weight screen."""
    shard = n_r if p.row_shard is None else max(1, min(p.row_shard, n_r))
    groups = math.ceil(cols / AMP_GROUP)
    s = max(1, min(p.inner_split, math.ceil(inner / AMP_GROUP)))
    if p.panel_groups is not None:
        pg = max(1, min(p.panel_groups, groups))
    else:
        pg = math.ceil(groups / max(1, min(groups, tiles // max(1, shard * s))))
    col_block = AMP_GROUP * pg
    inner_block = AMP_GROUP * math.ceil(math.ceil(inner / AMP_GROUP) / s)
    return LinearGrid(shard=shard, col_block=col_block, inner_block=inner_block,
                      n_p=math.ceil(cols / col_block), n_s=math.ceil(inner / inner_block))


def linear_plan(op: dict, a: int, w: int, bias: int | None, out: int, p: LayoutParams, rows_bounds: np.ndarray,
                tiles: int, precision: str = "f16", gemm: GemmPlan | None = None, root_shift: int = 0) -> OpPlan:
    """The plan of one linear op: the layout's global grid, or its own ``gemm`` plan (balanced shards, one wave).

    ``root_shift``: the result pieces of every cell move that many inner tiles on (mod the inner shards), so
    that two projections of one plan reduce onto disjoint owners (grouped Q / K preparation)."""
    rows, cols, inner = op["rows"], op["cols"], op["inner"]
    if gemm is not None:
        rows_bounds = balanced_bounds(rows, gemm.m)
        col_b, inner_b = balanced_bounds(cols, gemm.n), balanced_bounds(inner, gemm.k)
        n_r = shard = len(rows_bounds) - 1
    else:
        n_r = len(rows_bounds) - 1
        grid = linear_grid(n_r, cols, inner, p, tiles)
        shard = grid.shard
        col_b = block_bounds(cols, grid.col_block)
        inner_b = block_bounds(inner, grid.inner_block)
    n_p, n_s = len(col_b) - 1, len(inner_b) - 1
    cells = n_r * n_p * n_s
    if gemm is not None and gemm.order == "rows":   # row partitions of a column before the next column
        spatial = spread(shard * n_p * n_s, tiles).reshape(n_p, shard, n_s).transpose(1, 0, 2)
    else:                                           # columns fast: a row partition's columns side by side
        spatial = spread(shard * n_p * n_s, tiles).reshape(shard, n_p, n_s)
    ct = spatial[np.arange(n_r) % shard]
    wave = np.repeat(np.arange(n_r) // shard, n_p * n_s)
    rr = np.diff(rows_bounds)[:, None, None]
    cc = np.diff(col_b)[None, :, None]
    kk = np.diff(inner_b)[None, None, :]
    shape = np.stack(np.broadcast_arrays(rr, cc, kk, np.ones_like(rr)), axis=-1).reshape(-1, 4)
    ci = np.arange(cells).reshape(n_r, n_p, n_s)
    g1 = np.array([0, 1])
    a_need = Layout((1, rows, inner), (g1, rows_bounds, inner_b), ct.transpose(0, 2, 1)[None],
                    ci.transpose(0, 2, 1)[None])                                                 # rep over P
    w_lay = Layout((1, inner, cols), (g1, inner_b, col_b), spatial.transpose(2, 1, 0)[None])  # rep over shard
    b_lay = Layout((1, 1, cols), (g1, g1, col_b), spatial[:, :, 0].T[None, None])
    r_, p_, s_ = (a.ravel() for a in np.meshgrid(np.arange(n_r), np.arange(n_p), np.arange(n_s), indexing="ij"))
    w_slot = (s_ * n_p + p_) * shard + r_ % shard
    b_slot = np.where(s_ == 0, p_ * shard + r_ % shard, -1)
    out_lay = Layout((1, rows, cols), (g1, rows_bounds, col_b), ct[:, :, :1][None], ci[:, :, :1][None])
    needs, weights, slots = {a: a_need}, {w: w_lay}, {w: w_slot}
    if bias is not None:   # a linear without a bias has no bias tensor
        weights[bias], slots[bias] = b_lay, b_slot
    if gemm is not None and gemm.weights == "gathered":   # stored once over the row partitions, gathered per use
        needs[w] = w_lay.with_cells(ci.transpose(2, 1, 0)[None])
        weights[w] = gathered_store(w_lay, inner_b, spatial)
        del slots[w]
    swapped = gemm is not None and gemm.swapped
    plan = OpPlan(op_id=op["op_id"], name=op["name"], kind=op["kind"], rule="linear", kernel=amp_kernel(precision),
                  precision=precision, cell_tiles=ct.ravel(), cell_shape=shape, cell_wave=wave, needs=needs,
                  weights=weights, weight_slots=slots, output=out_lay,
                  coefficient=a if swapped else w if w in needs else None, swapped=swapped,
                  weight_class=gemm.memory if gemm is not None else "")
    if n_s > 1:
        part = Layout((n_s, rows, cols), (np.arange(n_s + 1), rows_bounds, col_b), ct.transpose(2, 0, 1)[..., None],
                      ci.transpose(2, 0, 1)[..., None])
        # reduce-scatter: the S tiles of a (row block, panel) each sum one piece of the panel, so no tile
        # receives all S partials of a whole panel, and the output stays spread over the S tiles
        if gemm is None:   # column slices of at least REDUCE_SLICE_MIN_COLS
            slice_b, panel, j, _per = reduce_slices(col_b, n_s)
            red_rows, red_tiles, red_cells = rows_bounds, ct[:, panel, j], ci[:, panel, j]
        else:              # the plan's result grid: a x b pieces of every cell, piece (ja, jb) on inner tile ja b + jb
            a, b = gemm.result_split(int(np.diff(col_b).min()), int(np.diff(rows_bounds).min()))
            red_rows, ja, row_shard = sub_bounds(rows_bounds, a)
            slice_b, jb, panel = sub_bounds(col_b, b)
            jj = (ja[:, None] * b + jb[None, :] + root_shift) % n_s
            red_tiles = ct[row_shard[:, None], panel[None, :], jj]
            red_cells = ci[row_shard[:, None], panel[None, :], jj]
        red = Layout((n_s, rows, cols), (np.array([0, n_s]), red_rows, slice_b), red_tiles[None, ..., None],
                     red_cells[None, ..., None])
        out_lay = Layout((1, rows, cols), (g1, red_rows, slice_b), red_tiles[None, ..., None],
                         red_cells[None, ..., None])
        plan = OpPlan(**{**_fields(plan), "kernel": amp_kernel(precision, p.partials), "partials": part,
                         "reduce_need": red, "output": out_lay, "staging": 0 if gemm is None else gemm.staging})
    return plan




def _fields(plan: OpPlan) -> dict:
    return {name: getattr(plan, name) for name in OpPlan.__slots__}


def _row_geometry(batch: int, tokens: int, p: LayoutParams, tiles: int, cache: dict) -> tuple:
    """Matmul row blocks, residual stream rows, their home tiles and cells, of ``tokens`` rows per image (an
    op's own: a pooling head has one row per image), kept in ``cache``."""
    if tokens not in cache:
        stream_b = segmented_bounds(batch, tokens, p.stream_block or p.row_block)
        cache[tokens] = (segmented_bounds(batch, tokens, p.row_block), stream_b,
                         home_tiles(len(stream_b) - 1, tiles), np.arange(len(stream_b) - 1))
    return cache[tokens]


def _tensor3(tensors: dict, tid: int) -> tuple[int, int, int]:
    shape = tensors[tid]["shape"]
    return (1, *shape) if len(shape) == 2 else ((1, 1, shape[0]) if len(shape) == 1 else tuple(shape))


def identity(layout: Layout) -> Layout:
    """The layout itself with one cell per chunk (in-place elementwise ops)."""
    return layout.with_cells(np.arange(layout.tiles.size))


def _op_key(op: dict, tensors: dict, p: LayoutParams, key_of: dict, prep: dict | None = None,
            transposed: frozenset[int] = frozenset()) -> tuple:
    """The parameters an op's plan depends on."""
    kind = op["kind"]
    ins = list(op["inputs"])
    if op["rule"] == "linear":
        gemm = p.plan_of(op["name"])
        if gemm is not None:
            return ("gemm", gemm, p.partials, (prep or {}).get(op["output"], UNPACKED))
        return ("linear", p.row_block, p.row_shard, p.inner_split, p.panel_groups, p.partials)
    if kind == "matmul":   # an attention product: its operands' producers decide their preparation
        return ("attention", p.row_block, p.plan_of(op["name"]),
                tuple((t in transposed, key_of.get(t)) for t in ins))
    if kind in ("layernorm", "add"):
        return ("stream", p.stream_block or p.row_block, p.stream_weights)
    return ("elementwise", key_of.get(ins[0], ("stream", p.stream_block or p.row_block, p.stream_weights)))


def _stream_plan(op: dict, tensors: dict, acts: list[int], wts: list[int], stream_bounds: np.ndarray,
                 homes: np.ndarray, p: LayoutParams) -> OpPlan:
    """LayerNorm or the residual add on the stream's home tiles, whole rows per tile (parameters resident on
    every home tile, or gathered before every use: ``p.stream_weights``)."""
    out = op["output"]
    n_r = len(stream_bounds) - 1
    ci_home = np.arange(n_r)
    width = _tensor3(tensors, out)[2]
    stream = stream_layout(stream_bounds, _tensor3(tensors, out), homes).with_cells(ci_home)
    needs = {t: stream for t in acts}
    g1 = np.array([0, 1])
    whole = Layout((1, 1, width), (g1, g1, np.array([0, width])), homes.reshape(1, 1, 1, -1))
    weights = {t: whole for t in wts}
    if p.stream_weights == "gathered":   # stored once over the home tiles, gathered before every use
        weights = {t: stream_store(width, homes) for t in wts}
        needs.update({t: whole.with_cells(ci_home.reshape(1, 1, 1, -1)) for t in wts})
    slots = {t: ci_home for t in wts if t not in needs}
    for t in (t for t in wts if len(tensors[t]["shape"]) == 2):   # a per-token table (the position embedding),
        tokens = int(tensors[t]["shape"][0])                      # broadcast over the images: each image's home
        images = int(stream_bounds[-1]) // tokens                 # tiles hold the table rows of their rows
        per = n_r // images
        weights[t] = Layout((1, tokens, width), (g1, stream_bounds[:per + 1], np.array([0, width])),
                            homes.reshape(images, per).T.reshape(1, per, 1, images))
        needs.pop(t, None)
        slots[t] = (ci_home % per) * images + ci_home // per
    rows = np.diff(stream_bounds)
    shape_arr = np.stack([rows, np.full(n_r, width), np.zeros(n_r, int), np.ones(n_r, int)], -1)
    return OpPlan(op_id=op["op_id"], name=op["name"], kind=op["kind"], rule="stream", kernel=op["kind"],
                  cell_tiles=homes, cell_shape=shape_arr, needs=needs, weights=weights,
                  weight_slots=slots, output=stream)


def _with_casts(plan: OpPlan, op: dict, acts: list[int], tensors: dict, params: dict, key: tuple) -> OpPlan:
    """``plan`` with its precision and casts: an FP8 attention product (graph params ``qk_dtype`` /
    ``pv_dtype``) runs on the FP8 AMP; an FP8 matmul casts an FP16 left panel (and an attention product an FP16
    right panel) on the tile; a result stored as F143 is cast by its producer (an AMP's when it writes the
    result itself, not partials)."""
    product = {"scores": "qk_dtype", "values": "pv_dtype"}.get(op["rule"])
    if product is not None and PRECISION[params.get(product) or "f16"] == "f8":
        plan = OpPlan(**{**_fields(plan), "kernel": plan.kernel.replace("_f16", "_f8", 1), "precision": "f8"})
    fp8 = plan.precision == "f8"
    return OpPlan(**{**_fields(plan), "key": key,
                     "cast_input": fp8 and tensors[acts[0]]["dtype"] == "f16",
                     "cast_right": product is not None and fp8 and tensors[acts[-1]]["dtype"] == "f16",
                     "out_cast": tensors[op["output"]]["dtype"] in ("f8_143", "f8_152")
                     and (not plan.kernel.startswith("amp") or plan.partials is None)})


def plan_graph(ops: list[dict], tensors: dict[int, dict], params: dict, p: LayoutParams, tiles: int,
               cache: dict | None = None) -> list[OpPlan]:
    """One OpPlan per op, in op order. ``params`` are the graph's workload parameters.

    ``cache`` (a dict the caller keeps across candidates of one graph) reuses
    op plans whose deciding parameters are equal, so a search over hundreds of
    candidates plans each distinct (op, parameters) once.
    """
    cache = {} if cache is None else cache
    key_of: dict[int, tuple] = {}
    batch = int(params["batch"])
    geometry: dict[int, tuple] = {}   # per rows-per-image: _row_geometry
    layout_of: dict[int, Layout] = {}
    plans: list[OpPlan] = []
    attn_cells: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    qkv_src: dict[str, int] = {}
    prep = qk_preparation(ops, tensors, p, batch)
    transposed = transposed_results(ops, p)
    for op in ops:
        ins = list(op["inputs"])
        out = op["output"]
        kind = op["kind"]
        acts = [t for t in ins if tensors[t]["role"] in ("input", "activation", "output")]
        wts = [t for t in ins if tensors[t]["role"] == "weight"]
        key = _op_key(op, tensors, p, key_of, prep, transposed)
        key_of[out] = key
        if op["rule"] == "scores":    # inputs: Q then K (a fused QKV tensor: one input holding both)
            qkv_src.update(q=acts[0], k=acts[-1])
            qkv_src.pop("v", None)
        elif op["rule"] == "values":  # inputs: P then V
            qkv_src["v"] = acts[-1]
        fresh = [t for t in dict.fromkeys(acts) if t not in layout_of]   # graph inputs this op reads first
        for t in fresh:   # start on the stream layout of their own rows (host-placed inputs move to this op's need)
            in_rows = _tensor3(tensors, t)[1] // batch
            _rb, in_bounds, in_homes, in_cells = _row_geometry(batch, in_rows, p, tiles, geometry)
            layout_of[t] = stream_layout(in_bounds, _tensor3(tensors, t), in_homes).with_cells(in_cells)
        cached = cache.get((op["op_id"], key))
        if cached is not None:
            plans.append(_with_inputs(cached, fresh, tensors, layout_of))
            layout_of[out] = cached.output
            continue
        if kind == "matmul" and wts:
            rows_b = _row_geometry(batch, int(op["rows"]) // batch, p, tiles, geometry)[0]
            span, later, shift = prep.get(out, UNPACKED)
            plan = linear_plan(op, acts[0], wts[0], wts[1] if len(wts) > 1 else None, out, p, rows_b, tiles,
                               PRECISION[tensors[wts[0]]["dtype"]], p.plan_of(op["name"]), root_shift=shift)
            if span is not None:
                plan = OpPlan(**{**_fields(plan), "unpack": span, "unpack_later": later})
        elif kind == "matmul":   # queries: the op's rows; keys: the scores' columns, the values' inner
            tokens, keys = int(op["rows"]), int(op["cols"] if op["rule"] == "scores" else op["inner"])
            heads = int(op["groups"]) // batch
            hd = int(op["inner"] if op["rule"] == "scores" else op["cols"])
            rb, ct = attn_cells.get(tokens) or attn_cells.setdefault(
                tokens, attention_cells(batch, heads, tokens, p.row_block, tiles))
            ci = np.arange(ct.size).reshape(ct.shape)
            n_rb = len(rb) - 1
            s_shape = (batch * heads, tokens, keys)
            s_tiles = ct.reshape(batch * heads, n_rb)[:, :, None, None]
            s_cells = ci.reshape(batch * heads, n_rb)[:, :, None, None]
            s_lay = Layout(s_shape, (np.arange(batch * heads + 1), rb, np.array([0, keys])), s_tiles, s_cells)
            width = heads * hd
            src = {k: qkv_src.get(k, qkv_src.get("v")) for k in "qkv"}
            shape = _tensor3(tensors, src["q"])
            # a tensor holding several projections holds them in Q, K, V order (fused QKV: offsets 0, width,
            # 2 width; a pooling head's fused KV: K at 0, V at width)
            off = {x: [y for y in "qkv" if src[y] == src[x]].index(x) * width for x in "qkv"}
            cells = ct.size
            gemm = p.plan_of(op["name"])
            if gemm is not None:
                plan = OpPlan(**attention_grid(op, gemm, acts, src, off, shape, batch, heads, tokens, hd,
                                               _tensor3(tensors, op["output"]), p.partials, tiles, keys=keys,
                                               kv_shape=_tensor3(tensors, src["v"] if op["rule"] == "values"
                                                                 else src["k"])))
            elif op["rule"] == "scores":
                needs = {src["q"]: qkv_need(shape, batch, heads, tokens, hd, off["q"], ct, rb, by_row_block=True)}
                k_need = qkv_need(_tensor3(tensors, src["k"]), batch, heads, keys, hd, off["k"], ct, rb,
                                  by_row_block=False)
                # fused: Q and K slices of one tensor, two needs -> key by (tensor, slot)
                k_key = -src["k"] - 1 if src["k"] in needs else src["k"]
                needs[k_key] = k_need
                rows = np.diff(rb)[None, None, :].repeat(batch, 0).repeat(heads, 1).ravel()
                shape_arr = np.stack([rows, np.full(cells, keys), np.full(cells, hd), np.ones(cells, int)], -1)
                plan = OpPlan(op_id=op["op_id"], name=op["name"], kind=kind, rule="scores", kernel="amp_matmul_f16",
                              cell_tiles=ct.ravel(), cell_shape=shape_arr, cell_wave=np.arange(cells) // tiles,
                              needs=needs, output=s_lay, coefficient=k_key)
            else:
                probs = acts[0]
                needs = {probs: s_lay,   # in place after shared-row scores; gathered after a scores grid
                         src["v"]: qkv_need(_tensor3(tensors, src["v"]), batch, heads, keys, hd, off["v"], ct, rb,
                                            by_row_block=False)}
                rows = np.diff(rb)[None, None, :].repeat(batch, 0).repeat(heads, 1).ravel()
                shape_arr = np.stack([rows, np.full(cells, hd), np.full(cells, keys), np.ones(cells, int)], -1)
                o_rows = segmented_bounds(batch, tokens, p.row_block)
                o_tiles = ct.transpose(0, 2, 1).reshape(1, batch * n_rb, heads, 1)
                o_cells = ci.transpose(0, 2, 1).reshape(1, batch * n_rb, heads, 1)
                o_lay = Layout(_tensor3(tensors, out), (np.array([0, 1]), o_rows, np.arange(heads + 1) * hd), o_tiles,
                               o_cells)
                plan = OpPlan(op_id=op["op_id"], name=op["name"], kind=kind, rule="values", kernel="amp_matmul_f16",
                              cell_tiles=ct.ravel(), cell_shape=shape_arr, cell_wave=np.arange(cells) // tiles,
                              needs=needs, output=o_lay, coefficient=src["v"])
            if op["rule"] == "scores" and src["q"] in transposed:   # unpacked Q rows: every cell packs its own
                plan = OpPlan(**{**_fields(plan), "rearrange": src["q"]})   # AMP-left panel
            kv = "k" if op["rule"] == "scores" else "v"   # K in transposed-right panels, V in whole-key panels
            if src[kv] in transposed:
                panels = operand_panels(_tensor3(tensors, src[kv]), batch, heads, keys, hd, off[kv],
                                        K_PANEL_ROWS if kv == "k" else keys, AMP_PANEL_COLS, tiles)
                plan = OpPlan(**{**_fields(plan), "prep_kernel": "rearrange_right" if kv == "k" else "",
                                 "prep": panels, "prep_sources": remote_sources(layout_of[src[kv]], panels)})
        elif kind in ("layernorm", "add"):
            _rb, stream_bounds, homes, _ci = _row_geometry(batch, int(op["rows"]) // batch, p, tiles, geometry)
            plan = _stream_plan(op, tensors, acts, wts, stream_bounds, homes, p)
        elif layout_of[acts[0]].counts[2] > 1 and kind == "softmax":   # key-split scores: gather complete rows
            lay = softmax_rows(layout_of[acts[0]], tiles)
            ch = lay.chunks()
            shape_arr = np.stack([ch["r1"] - ch["r0"], ch["c1"] - ch["c0"], np.zeros(lay.tiles.size, int),
                                  ch["g1"] - ch["g0"]], -1)
            plan = OpPlan(op_id=op["op_id"], name=op["name"], kind=kind, rule="rows", kernel=kind,
                          cell_tiles=lay.tiles.ravel(), cell_shape=shape_arr, needs={acts[0]: lay}, output=lay)
        else:  # elementwise in place on the producer's layout
            lay = identity(layout_of[acts[0]])
            ch = lay.chunks()
            shape_arr = np.stack([ch["r1"] - ch["r0"], ch["c1"] - ch["c0"], np.zeros(lay.tiles.size, int),
                                  ch["g1"] - ch["g0"]], -1)
            plan = OpPlan(op_id=op["op_id"], name=op["name"], kind=kind, rule="elementwise", kernel=kind,
                          cell_tiles=lay.tiles.ravel(), cell_shape=shape_arr, needs={acts[0]: lay}, output=lay)
        plan = _with_casts(plan, op, acts, tensors, params, key)
        cache[(op["op_id"], key)] = plan
        layout_of[out] = plan.output
        plans.append(_with_inputs(plan, fresh, tensors, layout_of))
    return map_plans(plans, p.tile_mapping)


def _with_inputs(plan: OpPlan, fresh: list[int], tensors: dict, layout_of: dict[int, Layout]) -> OpPlan:
    """``plan`` with the layouts of the graph inputs it reads first: a ``host_layout`` input is written by the host
    straight into this op's need of it (every replica: read in place, nothing gathers it); any other starts on the
    residual stream's layout (``layout_of``), from which the op's need is routed like any operand."""
    if not fresh:
        return plan
    inputs = {}
    for t in fresh:
        if tensors[t].get("host_layout") and t in plan.needs:
            layout_of[t] = plan.needs[t]
        inputs[t] = layout_of[t]
    return OpPlan(**{**_fields(plan), "inputs": inputs})
