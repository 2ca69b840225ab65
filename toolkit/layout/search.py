"""Layout search: enumerate candidates, screen them by cost and memory, keep a beam, choose.

Every candidate is a :class:`LayoutParams`. The screen is analytic and
vectorized over cells (no routing): compute cycles per (wave, tile) from the
AMP and vector cost model; exchange cycles from the bytes each tile must
receive per wave (every non-local operand panel, an upper bound) at the link
rate; one sync per exchange; launches as worker launches (one per AMP microblock, one per
elementwise command) on the busiest tile of every compute phase.
Memory per tile: resident weights (repeat instances included) plus the
largest transient set of any op (operand panels of one wave, the op's outputs
and its inputs) plus estimated package support. The interleaved peak (weights
in interleaved memory) is checked against region-1 capacity separately; it is
not summed with a standard peak. The beam (best feasible by screen) is then
scheduled exactly and the best scheduled estimate is chosen.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from toolkit import tables
from toolkit.errors import InfeasibleError, ModelError, OptionError, ToolkitWarning
from toolkit.graph import Graph, Workload, build_graph
from toolkit.graph.streaming import stream_attention
from toolkit.layout.gemm_search import (
    OP_CANDIDATES_SCHEMA,
    attention_grids,
    plan_chains,
    plan_columns,
    resolve_pins,
    searches_plans,
)
from toolkit.layout.ipu_stack import FP8_SCALE, constraint_lines, ipu_stack_args, product_mode
from toolkit.layout.mapping import tile_permutation
from toolkit.layout.pins import check_pins, compute_tiles
from toolkit.layout.plans import LayoutParams, linear_grid
from toolkit.layout.refine import refine_beam
from toolkit.layout.screen import DTYPE_BYTES, SHARED, prime, screen
from toolkit.options import WEIGHT_CLASSES, Options
from toolkit.target import Target

#: share of tile memory kept free when ranking finalists: a candidate whose screened peak plus plan rows fills
#: more than the rest rarely places (placement needs some room to pack objects of different lifetimes)
PACKING_MARGIN = 0.02
#: residual-stream row blocks searched below a larger matmul row block: LayerNorm and the residual add cost about
#: 6,700 and 1,400 cycles per 1152-wide row on hardware, so few rows per home tile pay off when exchange fragments
#: are nearly free (only blocks whose home tiles fit the compute tiles are tried)
STREAM_BLOCKS = (1, 2, 4, 8, 12, 24)

CANDIDATES_SCHEMA = {
    "candidate_id": pl.Int32, "row_block": pl.Int64, "stream_block": pl.Int64, "row_shard": pl.Int64,
    "panel_groups": pl.Int64,
    "inner_split": pl.Int64, "inner_block": pl.Int64, "weight_class": pl.String, "fused_qkv": pl.Boolean,
    "partials": pl.String, "stream_weights": pl.String,
    "local_rows": pl.Int64,  # the most rows any matmul holds on one tile as planned (LayoutParams.local_rows):
                             # the row block a grid layout runs, a plan chain's largest ceil(rows / m)
    "plans": pl.String,      # per-op GEMM plans ("fc1=4x92x4/16x92; fc2=4x24x15"); null: every linear on the grid
                             # (followed by one plan_<op> column per plannable op, null where that op is on the grid)
    "tiles_used": pl.Int64, "est_compute_cycles": pl.Int64, "est_exchange_cycles": pl.Int64,
    "est_sync_cycles": pl.Int64, "est_cycles": pl.Int64, "launches": pl.Int64, "peak_live_bytes": pl.Int64,
    "peak_interleaved_bytes": pl.Int64, "weight_bytes": pl.Int64, "support_bytes": pl.Int64,
    "feasible": pl.Boolean, "reject_reason": pl.String, "beam": pl.Boolean, "sched_cycles": pl.Int64,
    "plan_row_bytes": pl.Int64,
    "chosen": pl.Boolean, "pareto": pl.Boolean,
}
#: columns the pipeline adds for the finalists it compiled (LayoutResult.with_choice)
FINALIST_COLUMNS = {"placed": pl.Boolean, "lowered_cycles": pl.Int64}


@dataclass(frozen=True, slots=True)
class LayoutResult:
    """Every candidate with its estimates, and the chosen layout."""

    candidates: pl.DataFrame   # CANDIDATES_SCHEMA
    chosen: LayoutParams
    graph: Graph               # the graph the chosen layout applies to (fused QKV may differ from the input)
    tiles: int
    graphs: dict[bool, Graph]  # the graph variants searched, by fused QKV
    params: dict[int, LayoutParams] = field(default_factory=dict)   # the typed layout of every candidate id
    op_candidates: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=OP_CANDIDATES_SCHEMA))

    def __repr__(self) -> str:
        return tables.short_repr(self)

    def frames(self) -> dict[str, pl.DataFrame]:
        return {"candidates": self.candidates, "op_candidates": self.op_candidates}

    def constraints(self) -> list[str]:
        """ipu-stack's ``--gemm-plan-constraint`` line for every GEMM of the chosen program (op numbers as
        ipu-stack numbers them, :mod:`toolkit.layout.ipu_stack`); what a line cannot say is named in a
        :class:`~toolkit.errors.ToolkitWarning`."""
        lines, lost = constraint_lines(list(self.graph.ops.iter_rows(named=True)), self.chosen.plans,
                                       self.chosen.weight_class)
        for text in lost:
            warnings.warn(text, ToolkitWarning, stacklevel=2)
        return lines

    def ipu_stack_args(self) -> tuple[list[str], list[str]]:
        """The ``ipu-trivial-test`` argument list that runs the chosen program on hardware (workload, batch,
        constraint lines) and the warnings naming what it cannot say."""
        params = self.graph.params
        dtype = params.get("weight_dtype")
        return ipu_stack_args(params, str(params.get("kind")), list(self.graph.ops.iter_rows(named=True)),
                              self.chosen.plans, self.chosen.weight_class, FP8_SCALE if dtype == "f8_143" else None,
                              self.chosen.tile_mapping, self.chosen.qk_preparation)

    def with_choice(self, candidate_id: int, placed: dict[int, bool],
                    lowered: dict[int, int] | None = None) -> LayoutResult:
        """The same search with ``candidate_id`` chosen, the placement outcome of the tried finalists and
        their lowered estimates (``lowered_cycles``: compute as scheduled, exchange phases as lowered)."""
        lowered = lowered or {}
        tried = pl.DataFrame({"candidate_id": list(placed), "ok": list(placed.values()),
                              "low": [lowered.get(c) for c in placed]},
                             schema={"candidate_id": pl.Int32, "ok": pl.Boolean, "low": pl.Int64})
        cand = (self.candidates.drop("placed", "lowered_cycles", strict=False)
                .join(tried, on="candidate_id", how="left")
                .rename({"ok": "placed", "low": "lowered_cycles"})
                .with_columns((pl.col("candidate_id") == candidate_id).alias("chosen")))
        chosen = self.params[candidate_id]
        return LayoutResult(candidates=cand, chosen=chosen, graph=self.graphs[chosen.fused_qkv], tiles=self.tiles,
                            graphs=self.graphs, params=self.params, op_candidates=self.op_candidates)


def search_layouts(graph: Graph, target: Target, options: Options) -> LayoutResult:
    """Enumerate, screen, beam and choose a layout for ``graph``.

    Every candidate is screened analytically; the best ``beam_width`` feasible
    ones are refined with their real routes (``sched_cycles``) and the best
    refined estimate is chosen.
    """
    tiles = compute_tiles(graph, target, options)
    check_pins(graph, options)
    perm = tile_permutation(options.tile_mapping, tiles)   # applied to the typed layouts; the screen is blind to it
    graphs = _graph_variants(graph, options)
    prepared = {f: _prepare(g) for f, g in graphs.items()}
    pins = resolve_pins(options.plans, {f: v[0] for f, v in prepared.items()}, {f: v[1] for f, v in prepared.items()},
                        tiles, options.weight_class)
    if not searches_plans(options) and not any(_products_hold(v[0], dict(pins[f]), options.attention_products)
                                               for f, v in prepared.items()):
        msg = (f"option attention_products={options.attention_products!r} asks for product grids the plans do not "
               f"pin, and the plan search that would choose them is off; pin the products' plans or search plans")
        raise OptionError(msg, field="attention_products", value=options.attention_products)
    capacity = target.load_limit - target.memory_start
    classes = tuple(_classes(options))
    repeated = bool(graph.repeats.height) and int(graph.repeats["instances"].max()) > 1
    # gathering LayerNorm parameters saves memory in proportion to the instances: searched only where it repeats
    stores = ([options.stream_weights] if options.stream_weights is not None
              else ["resident", "gathered"] if repeated else ["resident"])
    rows: list[dict] = []
    params: dict[int, LayoutParams] = {}
    op_frames = []
    plan_cols = plan_columns([v[0] for v in prepared.values()])

    def add(p: LayoutParams, g: Graph, cache: dict) -> None:
        ops, tensors, reps = prepared[p.fused_qkv]
        if not _products_hold(ops, dict(p.plans), options.attention_products):
            return
        # both depend on the matmuls' grid and plans only, not on the stream's rows or LayerNorm parameters
        key = ("linear bound", p.fused_qkv, p.row_block, p.row_shard, p.inner_split, p.panel_groups, p.inner_block,
               p.plans)
        if key not in cache:
            cache[key] = (max((p.local_rows(op, int(g.params["tokens"])) for op in ops if op["kind"] == "matmul"),
                              default=None), _linear_weight_bound(ops, tensors, reps, g.params, p, tiles))
        local, bound = cache[key]
        if bound > capacity:   # the resident weight panels alone cannot fit: skip the detailed screen
            by_class = dict.fromkeys(classes, _weights_reject(bound, capacity))
        else:   # the weight classes share every byte count: one screen for all of them
            by_class = screen(ops, tensors, reps, g.params, p, target, tiles, cache, classes)
        cols = {**_param_cols(p), "local_rows": local}
        labels = {**dict.fromkeys(plan_cols.values()), **{plan_cols[n]: g.label() for n, g in p.plans}}
        for cls in classes:
            cid = len(rows)
            params[cid] = dataclasses.replace(p, weight_class=cls, tile_mapping=perm)
            rows.append({"candidate_id": cid, **cols, "weight_class": cls, **by_class[cls], **labels})

    shared: dict = {}   # linear estimates by signature: the QKV forms share their projections and MLP
    screened: dict = {}   # per-op GEMM plans by signature, likewise
    for fused, g in graphs.items():
        ops, tensors, reps = prepared[fused]
        cache: dict = {("ops", fused): ops, SHARED: shared}
        bases = [LayoutParams(**{**_asdict(base), "fused_qkv": fused, "weight_class": classes[0], "plans": pins[fused],
                                 "stream_weights": sw, "qk_preparation": options.qk_preparation})
                 for base, sw in itertools.product(_enumerate(g, options, tiles), stores)]
        prime(ops, tensors, reps, g.params, bases, target, tiles, cache)   # their linears on the grid, at once
        for p in bases:
            add(p, g, cache)
        if searches_plans(options):   # per-op GEMM plans: chains chosen per op, on every (row block, stream) base
            chains, per_op = plan_chains(ops, tensors, reps, target, tiles, options, classes[0], pins[fused],
                                          screened)
            op_frames.append(per_op.with_columns(pl.lit(fused).alias("fused_qkv")))
            seen = sorted({(b.row_block, b.stream_block) for b in bases}, key=lambda x: (x[0], x[1] or 0))
            grids = attention_grids(ops, g.params, tiles, dict(pins[fused]), options.row_block,
                                    options.attention_products)
            streams = sorted({sb for _, sb in seen}, key=lambda x: x or 0)
            for chain, grid in itertools.product(chains, grids):
                # shared-row attention depends on the row block; product grids and linear plans do not
                shared_rows = any(op["rule"] in ("scores", "values") and op["name"] not in dict(grid) for op in ops)
                places = seen if shared_rows else [(seen[0][0], sb) for sb in streams]
                for (rb, sb), sw in itertools.product(places, stores):
                    plans = tuple(sorted({**dict(chain), **dict(grid)}.items()))
                    add(LayoutParams(row_block=rb, stream_block=sb, fused_qkv=fused, weight_class=classes[0],
                                     partials=options.partials, inner_block=options.inner_block, plans=plans,
                                     stream_weights=sw, qk_preparation=options.qk_preparation), g, cache)
    cand = pl.DataFrame(rows, schema_overrides={**{k: v for k, v in CANDIDATES_SCHEMA.items() if k in rows[0]},
                                                **dict.fromkeys(plan_cols.values(), pl.String)})
    cand = cand.with_columns(
        pl.lit(False).alias("beam"),
        pl.lit(False).alias("chosen"), pl.lit(False).alias("pareto"))
    cand = cand.with_columns(pareto_front(cand).alias("pareto"))
    feas = cand.filter(pl.col("feasible")).sort("est_cycles", "peak_live_bytes", "candidate_id")
    if feas.height == 0:
        raise _no_fit(cand, options)
    # the beam holds distinct routes: weight-class twins share every transfer, keep the better one
    route_keys = ["row_block", "stream_block", "row_shard", "inner_split", "panel_groups", "inner_block", "fused_qkv",
                  "partials", "plans", "stream_weights"]
    distinct = feas.unique(route_keys, keep="first", maintain_order=True)
    capacity = target.load_limit - target.memory_start
    room = int(capacity * (1 - PACKING_MARGIN))
    refined = refine_beam(distinct, graphs, prepared, target, tiles, options.beam_width, params, room)
    sched = pl.DataFrame({"candidate_id": list(refined), "sched": [v[0] for v in refined.values()],
                          "rows": [v[1] for v in refined.values()]},
                         schema={"candidate_id": pl.Int32, "sched": pl.Int64, "rows": pl.Int64})
    cand = (cand.join(sched, on="candidate_id", how="left")
            .with_columns(pl.col("sched").alias("sched_cycles"), pl.col("rows").alias("plan_row_bytes"),
                          pl.col("sched").is_not_null().alias("beam"))
            .drop("sched", "rows"))
    # finalists that fit with their plan rows and a packing margin first, then by refined cycles
    ranked = (cand.filter(pl.col("beam"))
              .sort((pl.col("peak_live_bytes") + pl.col("plan_row_bytes")) > room, "sched_cycles", "candidate_id"))
    best = ranked["candidate_id"][0]
    cand = (cand.with_columns((pl.col("candidate_id") == best).alias("chosen"))
            .cast(CANDIDATES_SCHEMA).select(*CANDIDATES_SCHEMA, *plan_cols.values()))
    chosen = params[int(best)]
    op_cand = (pl.concat(op_frames) if op_frames else pl.DataFrame(schema={**OP_CANDIDATES_SCHEMA,
                                                                           "fused_qkv": pl.Boolean}))
    return LayoutResult(candidates=cand, chosen=chosen, graph=graphs[chosen.fused_qkv], tiles=tiles, graphs=graphs,
                        params=params, op_candidates=op_cand)


def _products_hold(ops: list[dict], plans: dict, mode: str | None) -> bool:
    """Whether a candidate's attention products are on grids as option ``attention_products`` asks (a graph
    without attention, or ``None``, takes any)."""
    return mode is None or product_mode(ops, plans) in (None, mode)


# -- enumeration ---------------------------------------------------------------
def _graph_variants(graph: Graph, options: Options) -> dict[bool, Graph]:
    """The graph in each QKV form searched: both where the graph allows, unless pinned or fixed by the workload.

    A workload whose name fixes its QKV form (``search_qkv=False``, e.g. the
    attention-b1 / attention-fused-b1 presets) keeps it unless ``fused_qkv`` is pinned.
    """
    fused_now = bool(graph.params.get("fused_qkv", False))
    has_attention = bool(graph.ops["rule"].is_in(["scores", "attention"]).any())
    streaming = graph.params.get("attention") == "streaming"   # a variant is streamed as the graph was
    searchable = has_attention and graph.params.get("search_qkv", True)
    searched = [False, True] if searchable else [fused_now]
    choices = searched if options.fused_qkv is None else [options.fused_qkv]
    out = {}
    for f in choices:
        if f == fused_now or not has_attention:
            out[f] = graph
        else:
            fields = {k: v for k, v in graph.params.items() if k in Workload.__slots__}
            fields.setdefault("name", graph.name)
            try:
                out[f] = build_graph(Workload(**{**fields, "fused_qkv": f}))
                if streaming:
                    out[f] = stream_attention(out[f], int(graph.params["key_block"]))
            except ModelError:   # a form the graph cannot take (mixed early casts of fused QKV): searched only
                if options.fused_qkv is not None:
                    raise
    return out


def _classes(o: Options) -> list[str]:
    return [o.weight_class] if o.weight_class is not None else list(WEIGHT_CLASSES)


def _linear_weight_bound(ops: list[dict], tensors: dict, reps: dict, params: dict, p: LayoutParams,
                         tiles: int) -> int:
    """Bytes of linear weight panels on the fullest tile, from the grid arithmetic alone (O(ops))."""
    total = 0
    for op in ops:
        ws = [t for t in op["inputs"] if tensors[t]["role"] == "weight" and len(tensors[t]["shape"]) == 2]
        if op["kind"] != "matmul" or not ws:
            continue
        tokens = int(op["rows"]) // int(params["batch"])   # the op's own rows per image
        n_r = int(params["batch"]) * math.ceil(tokens / p.row_block)
        w = tensors[ws[0]]
        rep = reps.get(op["block"], 1) if w["per_instance"] else 1
        gemm = p.plan_of(op["name"])
        if gemm is not None:   # the largest balanced shard, folded when the plan has more cells than tiles
            depth = -(-op["inner"] // gemm.k)
            depth = -(-depth // gemm.m) if gemm.weights == "gathered" else depth   # one piece of each block
            per_chunk = depth * -(-op["cols"] // gemm.n) * DTYPE_BYTES[w["dtype"]]
            total += per_chunk * rep * -(-gemm.tiles // tiles)
            continue
        grid = linear_grid(n_r, op["cols"], op["inner"], p, tiles)
        per_chunk = min(grid.inner_block, op["inner"]) * min(grid.col_block, op["cols"]) * DTYPE_BYTES[w["dtype"]]
        total += per_chunk * rep * grid.max_chunks_per_tile(tiles)
    return total


def _weights_reject(bound: int, capacity: int) -> dict:
    return {
        "tiles_used": None, "est_compute_cycles": None, "est_exchange_cycles": None, "est_sync_cycles": None,
        "est_cycles": None, "launches": None, "peak_live_bytes": bound, "peak_interleaved_bytes": None,
        "weight_bytes": bound, "support_bytes": None, "feasible": False,
        "reject_reason": f"resident weight panels alone need {bound:,} B on the fullest tile > capacity "
                         f"{capacity:,} B (lower row_shard or raise inner_split)",
    }


def _enumerate(g: Graph, o: Options, tiles: int):
    tokens, batch = int(g.params["tokens"]), int(g.params["batch"])
    row_blocks = [o.row_block] if o.row_block is not None else sorted(set(o.row_blocks))
    splits = [o.inner_split] if o.inner_split is not None else sorted(set(o.inner_splits))
    for rb in row_blocks:
        n_r = batch * math.ceil(tokens / min(rb, tokens))
        if o.row_shard is not None:
            shards = [o.row_shard]
        else:
            shards = sorted({max(1, math.ceil(n_r / d)) for d in (1, 2, 4, 8, 16, 32, 64)} | {1, 2}, reverse=True)
        if o.stream_block is not None:
            streams = [o.stream_block]
        else:   # the stream's row block may be smaller than the matmuls' (less memory on the home tiles)
            streams = sorted({rb, *(b for b in STREAM_BLOCKS
                                    if 2 * b <= rb and batch * math.ceil(tokens / b) <= tiles)})
        for shard, s, sb in itertools.product(shards, splits, streams):
            yield LayoutParams(row_block=rb, stream_block=None if sb == rb else sb, row_shard=shard,
                               panel_groups=o.panel_groups, inner_split=s, inner_block=o.inner_block,
                               partials=o.partials)


def _asdict(p: LayoutParams) -> dict:
    return {k: getattr(p, k) for k in LayoutParams.__slots__}


def _param_cols(p: LayoutParams) -> dict:
    return {"row_block": p.row_block, "stream_block": p.stream_block or p.row_block, "row_shard": p.row_shard,
            "panel_groups": p.panel_groups, "inner_split": p.inner_split, "inner_block": p.inner_block,
            "weight_class": p.weight_class, "fused_qkv": p.fused_qkv, "partials": p.partials,
            "stream_weights": p.stream_weights, "plans": plans_label(p)}


def plans_label(p: LayoutParams) -> str | None:
    """The per-op plans of a layout as text (``"fc1=4x92x4; fc2=4x24x15"``, short op names); None without any."""
    if not p.plans:
        return None
    return "; ".join(f"{name.rsplit('.', 1)[-1]}={g.label()}" for name, g in p.plans)


def _prepare(g: Graph) -> tuple[list[dict], dict, dict]:
    ops = list(g.ops.iter_rows(named=True))
    tensors = {r["tensor_id"]: r for r in g.tensors.iter_rows(named=True)}
    reps = dict(zip(g.repeats["block"].to_list(), g.repeats["instances"].to_list(), strict=True))
    return ops, tensors, reps


def params_of(row: dict) -> LayoutParams:
    sb = row.get("stream_block")
    return LayoutParams(row_block=row["row_block"], stream_block=None if sb in (None, row["row_block"]) else sb,
                        row_shard=row["row_shard"], panel_groups=row["panel_groups"],
                        inner_split=row["inner_split"], inner_block=row["inner_block"],
                        weight_class=row["weight_class"], fused_qkv=row["fused_qkv"],
                        partials=row.get("partials") or "f16",
                        stream_weights=row.get("stream_weights") or "resident")


def pareto_front(c: pl.DataFrame) -> pl.Series:
    """Feasible candidates not dominated in (est_cycles, peak_live_bytes): one sort and a running minimum."""
    ok = c["feasible"].fill_null(False).to_numpy()
    out = np.zeros(c.height, dtype=bool)
    idx = np.flatnonzero(ok)
    if not len(idx):
        return pl.Series(out)
    cyc = c["est_cycles"].to_numpy()[idx]
    mem = c["peak_live_bytes"].to_numpy()[idx]
    order = np.lexsort((mem, cyc))                    # by cycles, then memory
    m = mem[order]
    prev = np.r_[np.iinfo(np.int64).max, np.minimum.accumulate(m)[:-1]]   # best memory of every earlier point
    setter = np.maximum.accumulate(np.where(m < prev, np.arange(len(m)), 0))  # the earliest point at that best
    prev_cyc = np.r_[np.iinfo(np.int64).max, cyc[order][setter][:-1]]
    dominated = (prev < m) | ((prev == m) & (prev_cyc < cyc[order]))
    out[idx[order]] = ~dominated
    return pl.Series(out)


def _no_fit(cand: pl.DataFrame, options: Options) -> InfeasibleError:
    best = cand.sort("peak_live_bytes", nulls_last=True).row(0, named=True)
    pins = {k: v for k, v in _asdict_opts(options).items() if v is not None}
    msg = (f"no layout candidate fits ({cand.height} tried"
           + (f" with pins {pins}" if pins else "") + f"); the smallest, row_block={best['row_block']} "
           f"row_shard={best['row_shard']} inner_split={best['inner_split']}, was rejected: {best['reject_reason']}")
    return InfeasibleError(msg, field=next(iter(pins), None), value=next(iter(pins.values()), None))


def _asdict_opts(o: Options) -> dict:
    keys = ("row_block", "stream_block", "row_shard", "panel_groups", "inner_split", "inner_block", "weight_class",
            "fused_qkv")
    return {k: getattr(o, k) for k in keys}


