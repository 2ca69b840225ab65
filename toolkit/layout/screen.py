"""The candidate screen: analytic per-op estimates of cycles and per-tile bytes.

Linear ops (and the elementwise op that runs on a linear op's output) are
estimated from their own GEMM plan (:mod:`toolkit.layout.gemm_screen`) or on
the layout's global grid (:mod:`toolkit.layout.grid_screen`).
Attention and stream ops depend on the row block (and an attention on its
product grids and the swapped projections feeding it); their estimates come
from the actual op plans, built once per row block. Estimates are cached per
(op, deciding parameters) across candidates; a linear op's by its signature
(:func:`~toolkit.layout.gemm_screen.linear_signature`) in a part of the cache
the graph variants share; :func:`prime` fills that part for every grid
candidate at once, the kernel and exchange rules vectorized over every wave of
every grid.

Exchange is screened as an upper bound: every operand panel that is not read
in place is counted as received over the link; the beam is refined with the
real routes (:mod:`toolkit.layout.refine`).
"""

from __future__ import annotations

import numpy as np

from toolkit.layout.cost import (
    DTYPE_BYTES,
    PARTIAL_BYTES,
    amp_cycles,
    kernel_casts,
    merge_cycles,
    merge_pieces,
    phase_exchange_cycles,
    prep_pieces,
    rearrange_cycles,
    rearrange_pieces,
    unpack_cycles,
    vector_cycles,
    weight_read_class,
)
from toolkit.layout.gemm_screen import (
    after_gemm,
    gemm_estimate,
    linear_signature,
    runs_in_place,
)
from toolkit.layout.grid_screen import grid_after_linear, grid_linear
from toolkit.layout.layout import Layout
from toolkit.layout.plans import LayoutParams, OpPlan, plan_graph
from toolkit.layout.preparation import unpack_chunks
from toolkit.layout.reduction import staged_sender_pieces
from toolkit.options import WEIGHT_CLASSES
from toolkit.target import Target

PHASE_CODE_BYTES = 48   # generated supervisor code per distinct phase body per tile (screen estimate)
RUN_ENTRY_BYTES = 16    # one run-table entry per wave: waves of one op loop over one code body
#: the key of a screen cache's shared part (:func:`_shared`)
SHARED = "shared"


def region1_bytes(target: Target) -> int:
    return sum(e.size for e in target.memory_elements if e.interleaved)


def screen(ops: list[dict], tensors: dict, reps: dict, params: dict, p: LayoutParams, target: Target, tiles: int,
           cache: dict, classes: tuple[str, ...] | None = None) -> dict[str, dict]:
    """Estimates of one candidate per weight class: cycles, launches, per-tile peak bytes, feasibility and reason.

    The classes (default: ``p.weight_class`` alone) share every transfer and
    byte count; only the AMP feed term and the interleaved checks differ, so
    they are screened in one pass. Returns ``{weight_class: estimates}``.
    """
    classes = classes or (p.weight_class,)
    compute = dict.fromkeys(classes, 0)
    exchange = syncs = launches = phases = bodies = 0
    panels: list[tuple[int, int]] = []   # per op: its largest operand panel and its gathered weight block
    transient = np.zeros(tiles, dtype=np.int64)
    live_out: dict[int, np.ndarray] = {}
    producer: dict[int, dict] = {}
    kernels = {"copy"}
    named = cache.get(("products", p.fused_qkv))
    if named is None:
        named = cache[("products", p.fused_qkv)] = _attention_names(cache[("ops", p.fused_qkv)])
    names, feeders = named
    # attention product grids, and the swapped projections feeding them (their operands are then prepared: the
    # preparation reads the projection's own result layout)
    products = tuple((n, g) for n, g in p.plans if n in names or (n in feeders and g.swapped))
    by_grid: tuple[list[dict], list[dict]] = ([], [])   # the estimates that follow the row block alone, and the
                                                         # ones that follow the linear grid or plans
    for op in ops:
        e, on_grid = _estimate(op, tensors, reps, params, p, target, tiles, producer, cache, products)
        producer[op["output"]] = op
        kernels.add(e["kernel"])
        times = reps.get(op["block"], 1)   # a repeated region's op runs once per instance, the rest once
        for cls in classes:
            compute[cls] += e["compute"][cls] * times
        exchange += e["exchange"] * times
        syncs += e["syncs"] * times
        launches += e["launches"] * times
        phases += e["phases"]
        panels.append((e["panel"], e.get("gather", 0)))
        bodies += 3
        by_grid[on_grid].append(e)
        op_bytes = _memo(cache, "own", e, _own_bytes)
        for t in op["inputs"]:
            if t in live_out:
                op_bytes = op_bytes + live_out[t]
        live_out[op["output"]] = e["out"]
        np.maximum(transient, op_bytes, out=transient)
    # resident bytes summed once per set of estimates: few row-block sets and grids recur in many candidates
    zero = np.zeros(tiles, dtype=np.int64)
    (w_row, i_row), (w_grid, i_grid) = (_memo(cache, "resident", tuple(es), lambda es: _resident(es, zero))
                                        for es in by_grid)
    weights, inter = w_row + w_grid, i_row + i_grid
    code = sum(target.code_bytes(k) for k in kernels) + bodies * PHASE_CODE_BYTES
    support = code + phases * RUN_ENTRY_BYTES
    staging = target.staging_window_bytes if exchange else 0
    peak = weights + transient + support + staging
    capacity = target.load_limit - target.memory_start
    reasons = []
    top = int(peak.max())
    if top > capacity:
        t = int(peak.argmax())
        reasons.append(f"tile {t} needs {peak[t]:,} B (weights {weights[t]:,}, transient {transient[t]:,}, "
                       f"support {support + staging:,}) > capacity {capacity:,} B")
    r0 = region0_free_bytes(target, code)
    sync_cycles = syncs * target.costs.sync_cycles
    busy = weights + transient > 0
    common = {
        "tiles_used": int(busy.sum()), "est_exchange_cycles": exchange, "est_sync_cycles": sync_cycles,
        "launches": launches, "peak_live_bytes": top, "weight_bytes": int(weights.max()),
        "support_bytes": int(support + staging),
    }
    out = {}
    r1 = region1_bytes(target)
    for cls in classes:
        why = list(reasons)
        peak_inter = int(inter.max()) if cls == "interleaved" else 0
        if peak_inter > r1:
            t = int(inter.argmax())
            why.append(f"tile {t} interleaved weights {inter[t]:,} B > interleaved capacity {r1:,} B")
        panel, room = _worst_panel(panels, r0, r1 - peak_inter, cls == "interleaved")
        if panel > room:
            why.append(f"an operand panel of {panel:,} B fits in no region (largest free: {room:,} B beside the "
                       f"code and the interleaved weights); raise inner_split or lower row_block")
        c = compute[cls]
        out[cls] = {**common, "est_compute_cycles": c, "est_cycles": c + exchange + sync_cycles,
                    "peak_interleaved_bytes": peak_inter, "feasible": not why, "reject_reason": "; ".join(why) or None}
    return out


def region0_free_bytes(target: Target, code_bytes: int) -> int:
    """Region 0 bytes left beside the code: executable objects reserve whole elements there (DESIGN section 3)."""
    elements = [e.size for e in target.memory_elements if not e.interleaved]
    size = elements[0] if elements else 1
    return sum(elements) - -(-code_bytes // size) * size


def _worst_panel(panels: list[tuple[int, int]], r0_free: int, r1_free: int, interleaved: bool) -> tuple[int, int]:
    """The operand panel with the least room (and that room): a panel is contiguous, so it needs one region's
    free span: region 0 beside the code, or region 1 beside the resident interleaved weights and, for interleaved
    weights, the op's own gathered block (live with the panel)."""
    worst = (0, max(r0_free, r1_free))
    for panel, gather in panels:
        room = max(r0_free, r1_free - (gather if interleaved else 0))
        if panel - room > worst[0] - worst[1]:
            worst = (panel, room)
    return worst


def _memo(cache: dict, what: str, of: dict | tuple[dict, ...], value) -> np.ndarray | tuple:
    """``value(of)`` computed once per estimate (or tuple of them) by identity: every estimate lives in ``cache``
    for as long as the cache does, so its id names it."""
    key = (what, id(of)) if isinstance(of, dict) else (what, *map(id, of))
    out = cache.get(key)
    if out is None:
        out = cache[key] = value(of)
    return out


def _own_bytes(e: dict) -> np.ndarray:
    """Per-tile bytes an op holds while it runs besides its inputs: its output and what it receives."""
    return e["out"] + e["recv"]


def _resident(es: tuple[dict, ...], zero: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-tile weight bytes of some ops' estimates, and the part that goes interleaved."""
    weights, inter = (sum((e[k] for e in es), zero) for k in ("weights", "inter"))
    return weights, inter


def _is_linear(op: dict, tensors: dict) -> bool:
    return op["rule"] == "linear"


def _estimate(op: dict, tensors: dict, reps: dict, params: dict, p: LayoutParams, target: Target, tiles: int,
              producer: dict, cache: dict, products: tuple) -> tuple[dict, bool]:
    """The estimate of ``op`` under ``p``, and whether it follows the linear grid or plans (else the row block
    alone). ``products``: the attention product grids of ``p.plans`` and the swapped projections feeding them."""
    if _is_linear(op, tensors):
        gemm = p.plan_of(op["name"])
        shared = _shared(cache)
        key = (_signature(op, tensors, reps, params, cache),
               *(_grid_key(p) if gemm is None else ("gemm", gemm, p.inner_block, p.partials)))
        e = shared.get(key)
        if e is None:
            e = shared[key] = (grid_linear(op, tensors, reps, params, [p], target, tiles)[0] if gemm is None
                               else gemm_estimate(op, gemm, tensors, reps, p, target, tiles))
        return e, True
    src = producer.get(op["inputs"][0])
    if runs_in_place(op, src):
        gemm = p.plan_of(src["name"])
        key = (op["op_id"], "after", *(_grid_key(p) if gemm is None else ("gemm", gemm)))
        if key not in cache:
            cache[key] = (grid_after_linear(op, src, tensors, params, p, target, tiles) if gemm is None
                          else after_gemm(op, src, gemm, tensors, target, tiles))
        return cache[key], True
    key = (op["op_id"], "planned", p.row_block, p.stream_block, p.inner_block, p.fused_qkv, p.partials, products,
           p.weight_class, p.stream_weights)
    if key not in cache:
        # op plans are cached by (op, the op's own key), which names every knob it depends on (stream rows and
        # parameter store for stream ops): one cache serves every stream variant of a row block
        plans = cache.setdefault(("plans", p.row_block, p.fused_qkv), {})
        graph_key = ("by op", p.row_block, p.stream_block, p.fused_qkv, p.stream_weights, products)
        if graph_key not in cache:   # one plan of the whole graph serves every op's estimate under these knobs
            ops_all = cache[("ops", p.fused_qkv)]
            base = LayoutParams(row_block=p.row_block, stream_block=p.stream_block, fused_qkv=p.fused_qkv,
                                plans=products, stream_weights=p.stream_weights)
            cache[graph_key] = {pl_.op_id: pl_ for pl_ in plan_graph(ops_all, tensors, params, base, tiles, plans)}
        plan = cache[graph_key][op["op_id"]]
        by_plan = (op["op_id"], "estimate", plan.key, p.partials, p.inner_block)   # all op_estimate reads
        if by_plan not in cache:   # equal plan keys are equal plans: a LayerNorm's estimate ignores the grids
            cache[by_plan] = op_estimate(op, plan, tensors, reps, p, target, tiles)
        cache[key] = cache[by_plan]
    return cache[key], False


def _signature(op: dict, tensors: dict, reps: dict, params: dict, cache: dict) -> tuple:
    """A linear op's signature and the batch: linears of equal ones share their estimates (Q, K and V; both QKV
    forms)."""
    sig = cache.get(("signature", op["op_id"]))
    if sig is None:
        sig = cache[("signature", op["op_id"])] = (linear_signature(op, tensors, reps), int(params["batch"]))
    return sig


def _grid_key(p: LayoutParams) -> tuple:
    """The knobs of the layout's global linear grid."""
    return ("linear", p.row_block, p.row_shard, p.inner_split, p.panel_groups, p.inner_block, p.partials)


def _shared(cache: dict) -> dict:
    """The part of a screen cache whose keys name no op id (linear estimates by signature): the search hands the
    same one to the caches of every graph variant."""
    shared = cache.get(SHARED)
    if shared is None:
        shared = cache[SHARED] = {}
    return shared


def _attention_names(ops: list[dict]) -> tuple[frozenset[str], frozenset[str]]:
    """The names of a graph's attention products and of the linear ops producing their operands."""
    producer = {o["output"]: o for o in ops}
    products = [o for o in ops if o["rule"] in ("scores", "values")]
    feeders = {producer[t]["name"] for o in products for t in o["inputs"]
               if t in producer and producer[t]["rule"] == "linear"}
    return frozenset(o["name"] for o in products), frozenset(feeders)


def prime(ops: list[dict], tensors: dict, reps: dict, params: dict, ps: list[LayoutParams], target: Target,
          tiles: int, cache: dict) -> None:
    """Estimate every linear op on the global grid of every layout in ``ps`` in one vectorized pass per op, into
    ``cache``, where :func:`screen` then finds them (the search primes its grid candidates)."""
    shared = _shared(cache)
    for op in ops:
        if not _is_linear(op, tensors):
            continue
        sig = _signature(op, tensors, reps, params, cache)
        todo = {}
        for p in ps:
            key = (sig, *_grid_key(p))
            if p.plan_of(op["name"]) is None and key not in shared:
                todo.setdefault(key, p)
        shared.update(zip(todo, grid_linear(op, tensors, reps, params, list(todo.values()), target, tiles),
                           strict=True))


def _slot_bytes(layout: Layout, nbytes: int) -> np.ndarray:
    return layout.slot_elements() * nbytes


def _per_cell(layout: Layout, values: np.ndarray, n_cells: int) -> np.ndarray:
    cells = layout.cells.ravel()
    ok = cells >= 0
    return np.bincount(cells[ok], weights=values[ok], minlength=n_cells).astype(np.int64)


def op_estimate(op: dict, plan: OpPlan, tensors: dict, reps: dict, p: LayoutParams, target: Target,
                 tiles: int) -> dict:
    """Cycles and per-tile bytes of one op (cached by the caller on the plan key)."""
    n = len(plan.cell_tiles)
    wave = plan.cell_wave if plan.cell_wave is not None else np.zeros(n, dtype=np.int64)
    n_w = int(wave.max()) + 1
    key = wave * tiles + plan.cell_tiles
    sh = plan.cell_shape
    compute: dict[str, int] = {}
    if plan.kernel.startswith("amp"):
        k_rows, k_cols = (sh[:, 1], sh[:, 0]) if plan.swapped else (sh[:, 0], sh[:, 1])   # swapped: transposed
        pre = rearrange_cycles("rearrange_left", *rearrange_pieces(plan), target) if plan.rearrange is not None else 0
        for cls in WEIGHT_CLASSES:   # both weight classes in one pass: only the feed term differs
            wc = weight_read_class(plan, plan.weight_class or cls)
            cyc, _, calls, _ = amp_cycles(k_rows, k_cols, sh[:, 2], target, weight_class=wc,
                                          dtype=plan.precision, partials=p.partials if plan.partials else "f16",
                                          inner_block=p.inner_block, **kernel_casts(plan),
                                          out_cast=plan.out_cast)
            per = np.bincount(key, weights=cyc * sh[:, 3] + pre, minlength=n_w * tiles).reshape(n_w, tiles)
            compute[cls] = int(per.max(axis=1).sum())
        calls = calls * sh[:, 3]
    else:
        cyc = vector_cycles(plan.kernel, sh[:, 0] * sh[:, 3], sh[:, 1], target, out_cast=plan.out_cast)
        calls = np.ones(n, dtype=np.int64)
        per = np.bincount(key, weights=cyc, minlength=n_w * tiles).reshape(n_w, tiles)
        compute = dict.fromkeys(WEIGHT_CLASSES, int(per.max(axis=1).sum()))
    if plan.unpack is not None and not plan.unpack_later:   # grouped: the first unpack runs beside this one
        _slots, rows, cols = unpack_chunks(plan)
        extra = int(unpack_cycles(rows, cols, target).max(initial=0))
        compute = {cls: cyc + extra for cls, cyc in compute.items()}
    if plan.rule == "values":   # the attention merges where the product's rows end: the busiest tile's
        tile, rows, cols = merge_pieces(plan.output)
        extra = int(np.bincount(tile, weights=merge_cycles(rows, cols, target)).max(initial=0)) if len(tile) else 0
        compute = {cls: cyc + extra for cls, cyc in compute.items()}
    est = {"kernel": plan.kernel, "compute": compute, "exchange": 0, "syncs": 0, "phases": n_w,
           "launches": int(np.bincount(key, weights=calls, minlength=n_w * tiles).reshape(n_w, tiles)
                           .max(axis=1).sum())}
    recv = np.zeros(n, dtype=np.int64)
    est["panel"] = 0
    for t, need in plan.needs.items():
        tensor = t if t >= 0 else -t - 1
        local = plan.rule == "elementwise" or (plan.rule == "values" and tensor == op["inputs"][0])
        if not local:
            slot_bytes = _slot_bytes(need, DTYPE_BYTES[tensors[tensor]["dtype"]])
            recv += _per_cell(need, slot_bytes, n)
            used = need.cells.ravel() >= 0
            est["panel"] = max(est["panel"], int(slot_bytes[used].max(initial=0)))
    if plan.partials is not None:
        s = plan.partials.counts[0]
        step = plan.staging or s - 1                         # remote partials per epoch
        epochs = -(-(s - 1) // step)
        recv_red = _per_cell(plan.reduce_need, _slot_bytes(plan.reduce_need, PARTIAL_BYTES[p.partials]), n)
        red = np.bincount(key, weights=recv_red, minlength=n_w * tiles).reshape(n_w, tiles).max(axis=1)
        per_epoch = red * min(step + 1, s) // s               # an epoch's share of the partials (upper bound)
        # staged: fixed partial groups, an epoch's busiest sender sends all its pieces (staged_moves)
        sender = (red * staged_sender_pieces(s, step) // s).astype(np.int64) if plan.staging else None
        est["exchange"] += epochs * int(phase_exchange_cycles(per_epoch, np.full(n_w, min(step + 1, s)),
                                                              target, send_bytes=sender).sum())
        est["syncs"] += n_w * epochs
        est["phases"] += 3 * n_w * epochs
    rw = np.bincount(key, weights=recv, minlength=n_w * tiles).reshape(n_w, tiles)
    prep_recv = np.zeros(tiles, dtype=np.int64)
    if plan.prep is not None:   # the coefficient's preparation panels: their own exchange and rearrangement
        tile, rows, cols = prep_pieces(plan)
        t = plan.coefficient if plan.coefficient >= 0 else -plan.coefficient - 1
        prep_recv = np.bincount(tile, weights=rows * cols * DTYPE_BYTES[tensors[t]["dtype"]],
                                minlength=tiles).astype(np.int64)
        busiest = prep_recv.max(initial=0)   # its owners' receives: one cutover per remote source piece
        est["exchange"] += int(phase_exchange_cycles(busiest, max(plan.prep_sources, 1), target))
        prep = (np.bincount(tile, weights=rearrange_cycles(plan.prep_kernel, rows, cols, target)).max(initial=0)
                if plan.prep_kernel else 0)
        est["compute"] = {cls: cyc + int(prep) for cls, cyc in est["compute"].items()}
        est["syncs"] += 1
        est["phases"] += 3
    if recv.any():
        frag = np.ceil(rw.max(axis=1) / (target.packet_max_words * target.word_bytes))
        est["exchange"] += int(phase_exchange_cycles(rw.max(axis=1), frag + 1, target).sum())
        est["syncs"] += n_w
        est["phases"] += 2 * n_w
    weights = np.zeros(tiles, dtype=np.int64)
    inter = np.zeros(tiles, dtype=np.int64)   # bytes that go interleaved when the weight class is interleaved
    for t, lay in plan.weights.items():
        w = tensors[t]
        rep = reps.get(op["block"], 1) if w["per_instance"] else 1
        wb = np.bincount(lay.tiles.ravel(), weights=_slot_bytes(lay, DTYPE_BYTES[w["dtype"]]) * rep,
                         minlength=tiles).astype(np.int64)
        weights += wb
        if plan.kernel.startswith("amp") and len(w["shape"]) == 2 and t not in plan.needs:   # gathered: standard
            inter += wb
    out_b = DTYPE_BYTES[tensors[op["output"]]["dtype"]]
    est["out"] = np.bincount(plan.output.tiles.ravel().clip(0), weights=_slot_bytes(plan.output, out_b),
                             minlength=tiles).astype(np.int64)
    est["recv"] = np.maximum(rw.max(axis=0), prep_recv).astype(np.int64)
    est["weights"], est["inter"] = weights, inter
    return est
