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

import itertools
import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from toolkit.errors import InfeasibleError
from toolkit.graph import Graph, Workload, build_graph
from toolkit.layout.cost import amp_cycles, exchange_cycles, vector_cycles
from toolkit.layout.layout import Layout
from toolkit.layout.plans import LayoutParams, OpPlan, plan_graph
from toolkit.options import WEIGHT_CLASSES, Options
from toolkit.target import Target

DTYPE_BYTES = {"f8_143": 1, "f8_152": 1, "f16": 2, "f32": 4}
PHASE_CODE_BYTES = 48  # generated supervisor code per phase per tile (screen estimate)

CANDIDATES_SCHEMA = {
    "candidate_id": pl.Int32, "row_block": pl.Int64, "row_shard": pl.Int64, "panel_groups": pl.Int64,
    "inner_split": pl.Int64, "inner_block": pl.Int64, "weight_class": pl.String, "fused_qkv": pl.Boolean,
    "tiles_used": pl.Int64, "est_compute_cycles": pl.Int64, "est_exchange_cycles": pl.Int64,
    "est_sync_cycles": pl.Int64, "est_cycles": pl.Int64, "launches": pl.Int64, "peak_live_bytes": pl.Int64,
    "peak_interleaved_bytes": pl.Int64, "weight_bytes": pl.Int64, "support_bytes": pl.Int64,
    "feasible": pl.Boolean, "reject_reason": pl.String, "beam": pl.Boolean, "sched_cycles": pl.Int64,
    "chosen": pl.Boolean, "pareto": pl.Boolean,
}


@dataclass(frozen=True, slots=True)
class LayoutResult:
    """Every candidate with its estimates, and the chosen layout."""

    candidates: pl.DataFrame   # CANDIDATES_SCHEMA
    chosen: LayoutParams
    graph: Graph               # the graph the chosen layout applies to (fused QKV may differ from the input)
    tiles: int

    def frames(self) -> dict[str, pl.DataFrame]:
        return {"candidates": self.candidates}


def search_layouts(graph: Graph, target: Target, options: Options, *, schedule_fn=None) -> LayoutResult:
    """Enumerate, screen, beam and choose a layout for ``graph``.

    ``schedule_fn(graph, params, target, tiles) -> phases frame`` scores beam
    members exactly (the compile pipeline passes the schedule stage); without
    it the screen estimate decides.
    """
    tiles = min(options.tiles or graph.params.get("compute_tiles") or target.tiles, target.tiles)
    graphs = _graph_variants(graph, options)
    rows = []
    cid = 0
    for fused, g in graphs.items():
        ops = list(g.ops.iter_rows(named=True))
        tensors = {r["tensor_id"]: r for r in g.tensors.iter_rows(named=True)}
        reps = dict(zip(g.repeats["block"].to_list(), g.repeats["instances"].to_list(), strict=True))
        total_w = _total_weight_bytes(g)
        plan_cache: dict = {}
        est_cache: dict = {}
        capacity = target.load_limit - target.memory_start
        for base in _enumerate(g, options, tiles):
            plans = None
            for cls in _classes(options):
                p = LayoutParams(**{**_asdict(base), "fused_qkv": fused, "weight_class": cls})
                bound = total_w * p.row_shard // tiles
                if bound > capacity:   # even a perfect weight spread cannot fit: skip the detailed screen
                    est = _weights_reject(bound, capacity)
                else:
                    plans = plans or plan_graph(ops, tensors, g.params, p, tiles, plan_cache)
                    est = screen(plans, ops, tensors, reps, p, target, tiles, est_cache)
                rows.append({"candidate_id": cid, **_param_cols(p), **est})
                cid += 1
    cand = pl.DataFrame(rows, schema_overrides={k: v for k, v in CANDIDATES_SCHEMA.items() if k in rows[0]})
    cand = cand.with_columns(
        pl.lit(False).alias("beam"), pl.lit(None, dtype=pl.Int64).alias("sched_cycles"),
        pl.lit(False).alias("chosen"), pl.lit(False).alias("pareto"))
    cand = cand.with_columns(_pareto(cand).alias("pareto"))
    feas = cand.filter(pl.col("feasible")).sort("est_cycles", "peak_live_bytes", "candidate_id")
    if feas.height == 0:
        raise _no_fit(cand, options)
    beam = feas.head(options.beam_width)
    scores = {}
    for r in beam.iter_rows(named=True):
        p = _params_of(r)
        if schedule_fn is not None:
            scores[r["candidate_id"]] = int(schedule_fn(graphs[p.fused_qkv], p, target, tiles))
        else:
            scores[r["candidate_id"]] = int(r["est_cycles"])
    best = min(scores, key=lambda k: (scores[k], k))
    sched = pl.DataFrame({"candidate_id": list(scores), "sched": list(scores.values())},
                         schema={"candidate_id": pl.Int32, "sched": pl.Int64})
    cand = (cand.join(sched, on="candidate_id", how="left")
            .with_columns(pl.col("sched").alias("sched_cycles"), pl.col("sched").is_not_null().alias("beam"),
                          (pl.col("candidate_id") == best).alias("chosen"))
            .drop("sched").cast(CANDIDATES_SCHEMA).select(list(CANDIDATES_SCHEMA)))
    chosen = _params_of(cand.filter(pl.col("chosen")).row(0, named=True))
    return LayoutResult(candidates=cand, chosen=chosen, graph=graphs[chosen.fused_qkv], tiles=tiles)


# -- enumeration ---------------------------------------------------------------
def _graph_variants(graph: Graph, options: Options) -> dict[bool, Graph]:
    fused_now = bool(graph.params.get("fused_qkv", False))
    has_attention = graph.params.get("kind") in ("attention", "encoder")
    choices = [options.fused_qkv] if options.fused_qkv is not None else ([False, True] if has_attention else [fused_now])
    out = {}
    for f in choices:
        if f == fused_now or not has_attention:
            out[f] = graph
        else:
            fields = {k: v for k, v in graph.params.items() if k in Workload.__slots__}
            out[f] = build_graph(Workload(**{**fields, "fused_qkv": f}))
    return out


def _classes(o: Options) -> list[str]:
    return [o.weight_class] if o.weight_class is not None else list(WEIGHT_CLASSES)


def _total_weight_bytes(g: Graph) -> int:
    w = g.tensors.filter(pl.col("role") == "weight")
    inst = dict(zip(g.repeats["block"].to_list(), g.repeats["instances"].to_list(), strict=True))
    reps = [inst.get(b, 1) if per else 1 for b, per in zip(w["block"], w["per_instance"], strict=True)]
    return int((w["size_bytes"].to_numpy() * np.array(reps, dtype=np.int64)).sum())


def _weights_reject(bound: int, capacity: int) -> dict:
    return {
        "tiles_used": None, "est_compute_cycles": None, "est_exchange_cycles": None, "est_sync_cycles": None,
        "est_cycles": None, "launches": None, "peak_live_bytes": bound, "peak_interleaved_bytes": None,
        "weight_bytes": bound, "support_bytes": None, "feasible": False,
        "reject_reason": f"weights alone need at least {bound:,} B per tile (row_shard copies of every weight "
                         f"spread over the tiles) > capacity {capacity:,} B",
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
            shards = sorted({max(1, math.ceil(n_r / d)) for d in (1, 2, 4, 8, 16, 32, 64)}, reverse=True)
        for shard, s in itertools.product(shards, splits):
            yield LayoutParams(row_block=rb, row_shard=shard, panel_groups=o.panel_groups, inner_split=s,
                               inner_block=o.inner_block)


def _asdict(p: LayoutParams) -> dict:
    return {k: getattr(p, k) for k in LayoutParams.__slots__}


def _param_cols(p: LayoutParams) -> dict:
    return {"row_block": p.row_block, "row_shard": p.row_shard, "panel_groups": p.panel_groups,
            "inner_split": p.inner_split, "inner_block": p.inner_block, "weight_class": p.weight_class,
            "fused_qkv": p.fused_qkv}


def _params_of(row: dict) -> LayoutParams:
    return LayoutParams(row_block=row["row_block"], row_shard=row["row_shard"], panel_groups=row["panel_groups"],
                        inner_split=row["inner_split"], inner_block=row["inner_block"],
                        weight_class=row["weight_class"], fused_qkv=row["fused_qkv"])


def _pareto(c: pl.DataFrame) -> pl.Series:
    """Feasible candidates not dominated in (est_cycles, peak_live_bytes)."""
    cyc = c["est_cycles"].fill_null(np.iinfo(np.int64).max).to_numpy()
    mem = c["peak_live_bytes"].fill_null(np.iinfo(np.int64).max).to_numpy()
    ok = c["feasible"].to_numpy()
    dom = ((cyc[None, :] <= cyc[:, None]) & (mem[None, :] <= mem[:, None])
           & ((cyc[None, :] < cyc[:, None]) | (mem[None, :] < mem[:, None])) & ok[None, :])
    return pl.Series(ok & ~dom.any(axis=1))


def _no_fit(cand: pl.DataFrame, options: Options) -> InfeasibleError:
    best = cand.sort("peak_live_bytes", nulls_last=True).row(0, named=True)
    pins = {k: v for k, v in _asdict_opts(options).items() if v is not None}
    msg = (f"no layout candidate fits ({cand.height} tried"
           + (f" with pins {pins}" if pins else "") + f"); the smallest, row_block={best['row_block']} "
           f"row_shard={best['row_shard']} inner_split={best['inner_split']}, was rejected: {best['reject_reason']}")
    return InfeasibleError(msg, field=next(iter(pins), None), value=next(iter(pins.values()), None))


def _asdict_opts(o: Options) -> dict:
    keys = ("row_block", "row_shard", "panel_groups", "inner_split", "inner_block", "weight_class", "fused_qkv")
    return {k: getattr(o, k) for k in keys}


# -- the screen ------------------------------------------------------------------
def _slot_bytes(layout: Layout, nbytes: int) -> np.ndarray:
    return layout.slot_elements() * nbytes


def _per_cell(layout: Layout, values: np.ndarray, n_cells: int) -> np.ndarray:
    cells = layout.cells.ravel()
    ok = cells >= 0
    return np.bincount(cells[ok], weights=values[ok], minlength=n_cells).astype(np.int64)


def _op_estimate(op: dict, plan: OpPlan, tensors: dict, reps: dict, p: LayoutParams, target: Target,
                 tiles: int) -> dict:
    """Cycles and per-tile bytes of one op (cached by the caller on the plan key)."""
    n = len(plan.cell_tiles)
    wave = plan.cell_wave if plan.cell_wave is not None else np.zeros(n, dtype=np.int64)
    n_w = int(wave.max()) + 1
    key = wave * tiles + plan.cell_tiles
    sh = plan.cell_shape
    if plan.kernel.startswith("amp"):
        inter_w = plan.rule == "linear" and p.weight_class == "interleaved"
        cyc, _, calls = amp_cycles(sh[:, 0], sh[:, 1], sh[:, 2], target, interleaved=inter_w,
                                   fp32=plan.partials is not None, inner_block=p.inner_block)
        cyc, calls = cyc * sh[:, 3], calls * sh[:, 3]
    else:
        cyc = vector_cycles(plan.kernel, sh[:, 0] * sh[:, 1] * sh[:, 3], target)
        calls = np.ones(n, dtype=np.int64)
    per = np.bincount(key, weights=cyc, minlength=n_w * tiles).reshape(n_w, tiles)
    est = {"compute": int(per.max(axis=1).sum()), "exchange": 0, "syncs": 0, "phases": n_w,
           "launches": int(np.bincount(key, weights=calls, minlength=n_w * tiles).reshape(n_w, tiles)
                           .max(axis=1).sum())}
    recv = np.zeros(n, dtype=np.int64)
    for t, need in plan.needs.items():
        tensor = t if t >= 0 else -t - 1
        local = plan.rule == "elementwise" or (plan.rule == "values" and tensor == op["inputs"][0])
        if not local:
            recv += _per_cell(need, _slot_bytes(need, DTYPE_BYTES[tensors[tensor]["dtype"]]), n)
    if plan.partials is not None:
        recv_red = _per_cell(plan.reduce_need, _slot_bytes(plan.reduce_need, 4), n)
        red = np.bincount(key, weights=recv_red, minlength=n_w * tiles).reshape(n_w, tiles).max(axis=1)
        est["exchange"] += int(exchange_cycles(red, np.full(n_w, plan.partials.counts[0]), target).sum())
        est["syncs"] += n_w
        est["phases"] += 3 * n_w
    rw = np.bincount(key, weights=recv, minlength=n_w * tiles).reshape(n_w, tiles)
    if recv.any():
        frag = np.ceil(rw.max(axis=1) / (target.packet_max_words * target.word_bytes))
        est["exchange"] += int(exchange_cycles(rw.max(axis=1), frag + 1, target).sum())
        est["syncs"] += n_w
        est["phases"] += 2 * n_w
    weights = np.zeros(tiles, dtype=np.int64)
    inter = np.zeros(tiles, dtype=np.int64)
    for t, lay in plan.weights.items():
        w = tensors[t]
        rep = reps.get(op["block"], 1) if w["per_instance"] else 1
        wb = np.bincount(lay.tiles.ravel(), weights=_slot_bytes(lay, DTYPE_BYTES[w["dtype"]]) * rep,
                         minlength=tiles).astype(np.int64)
        weights += wb
        if plan.kernel.startswith("amp") and len(w["shape"]) == 2 and p.weight_class == "interleaved":
            inter += wb
    out_b = DTYPE_BYTES[tensors[op["output"]]["dtype"]]
    est["out"] = np.bincount(plan.output.tiles.ravel().clip(0), weights=_slot_bytes(plan.output, out_b),
                             minlength=tiles).astype(np.int64)
    est["recv"] = rw.max(axis=0).astype(np.int64)
    est["weights"], est["inter"] = weights, inter
    return est


def screen(plans: list[OpPlan], ops: list[dict], tensors: dict, reps: dict, p: LayoutParams, target: Target,
           tiles: int, cache: dict | None = None) -> dict:
    """Analytic estimates of one candidate (see the module docstring)."""
    cache = {} if cache is None else cache
    compute = exchange = syncs = launches = phases = 0
    weights = np.zeros(tiles, dtype=np.int64)
    inter = np.zeros(tiles, dtype=np.int64)
    transient = np.zeros(tiles, dtype=np.int64)
    live_out: dict[int, np.ndarray] = {}
    for op, plan in zip(ops, plans, strict=True):
        amp_linear = plan.rule == "linear"
        ck = (op["op_id"], plan.key, p.weight_class if amp_linear else None, p.inner_block)
        if ck not in cache:
            cache[ck] = _op_estimate(op, plan, tensors, reps, p, target, tiles)
        e = cache[ck]
        compute += e["compute"]
        exchange += e["exchange"]
        syncs += e["syncs"]
        launches += e["launches"]
        phases += e["phases"]
        weights += e["weights"]
        inter += e["inter"]
        op_bytes = sum((live_out[t] for t in op["inputs"] if t in live_out), np.zeros(tiles, dtype=np.int64))
        live_out[op["output"]] = e["out"]
        transient = np.maximum(transient, op_bytes + e["out"] + e["recv"])
    support = sum(target.code_bytes(k) for k in {pl_.kernel for pl_ in plans} | {"copy"}) + phases * PHASE_CODE_BYTES
    staging = target.staging_window_bytes if exchange else 0
    peak = weights + transient + support + staging
    capacity = target.load_limit - target.memory_start
    region1 = sum(e.size for e in target.memory_elements if e.interleaved)
    reasons = []
    if peak.max() > capacity:
        t = int(peak.argmax())
        reasons.append(f"tile {t} needs {peak[t]:,} B (weights {weights[t]:,}, transient {transient[t]:,}, "
                       f"support {support + staging:,}) > capacity {capacity:,} B")
    if inter.max() > region1:
        t = int(inter.argmax())
        reasons.append(f"tile {t} interleaved weights {inter[t]:,} B > interleaved capacity {region1:,} B")
    sync_cycles = syncs * target.costs.sync_cycles
    used = np.zeros(tiles, dtype=bool)
    for pl_ in plans:
        used[pl_.cell_tiles] = True
    return {
        "tiles_used": int(used.sum()), "est_compute_cycles": compute, "est_exchange_cycles": exchange,
        "est_sync_cycles": sync_cycles, "est_cycles": compute + exchange + sync_cycles, "launches": launches,
        "peak_live_bytes": int(peak.max()), "peak_interleaved_bytes": int(inter.max()),
        "weight_bytes": int(weights.max()), "support_bytes": int(support + staging),
        "feasible": not reasons, "reject_reason": "; ".join(reasons) or None,
    }
