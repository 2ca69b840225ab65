"""Per-op GEMM plans: enumerate and screen plans of every linear op, and offer chains of them.

Every linear op gets thousands of candidate plans (``m x n x k`` and result
splits, :func:`enumerate_plans`), screened at once by
:func:`toolkit.layout.gemm_screen.gemm_estimates` with the calibrated kernel
model, an exchange estimate and per-tile bytes, plus the elementwise ops that
run in place on the plan's output. The chain of plans is chosen jointly
(:mod:`toolkit.layout.chains`: the fastest chain whose resident weights,
largest transient set and operand panels fit one tile, under each of a ladder
of weight budgets); every chain offered then becomes a whole-graph candidate
that the layout screen, the beam refinement with real routes and placement
judge like any other. The per-op frame (:data:`OP_CANDIDATES_SCHEMA`) keeps
every plan with its estimates and the chains that chose it.
"""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl

from toolkit.costs import cycles
from toolkit.errors import InfeasibleError, OptionError
from toolkit.layout.chains import choose_chains
from toolkit.layout.gemm import GemmPlan
from toolkit.layout.gemm_screen import (
    gemm_estimates,
    in_place_cycles,
    in_place_signature,
    linear_signature,
    runs_in_place,
)
from toolkit.layout.ipu_stack import PRODUCT_MODES
from toolkit.layout.screen import region0_free_bytes, region1_bytes
from toolkit.options import Options
from toolkit.target import Target, ipu21

#: staged reductions are enumerated for plans whose transient bytes take more than this share of the memory
#: (past RESERVE_BYTES), where staging brings them below it: staging only trades time for memory
STAGED_SHARE = 0.5
#: package support kept out of the chain choice (its code reserves region 0 elements)
SUPPORT_BYTES = 48 * 1024
#: memory kept out of the chain choice: the staging window and package support
RESERVE_BYTES = 32 * 1024 + SUPPORT_BYTES
M_CHOICES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32)
K_CHOICES = (1, 2, 3, 4, 5, 6, 8, 9, 10, 12, 15, 16, 18, 20, 24, 27, 30, 32, 36)
#: reduction stagings tried beside all partials at once (remote partials per epoch; below k - 1)
STAGINGS = (1, 2, 4, 8)

OP_CANDIDATES_SCHEMA = {
    "op": pl.String, "plan": pl.String, "m": pl.Int64, "n": pl.Int64, "k": pl.Int64, "result_rows": pl.Int64,
    "result_cols": pl.Int64, "weights": pl.String, "staging": pl.Int64, "order": pl.String, "memory": pl.String,
    "orientation": pl.String, "tiles_used": pl.Int64,
    "est_compute_cycles": pl.Int64,
    "est_exchange_cycles": pl.Int64, "est_sync_cycles": pl.Int64, "est_cycles": pl.Int64,
    "est_in_place_cycles": pl.Int64,   # the elementwise ops run in place on the plan's output (GELU after fc1)
    "est_chain_cycles": pl.Int64,      # est_cycles + est_in_place_cycles: what the joint chain choice adds up
    "weight_bytes": pl.Int64, "transient_bytes": pl.Int64,
    "panel_bytes": pl.Int64,    # the largest operand panel a tile receives (contiguous: it needs one region's span)
    "gather_bytes": pl.Int64,   # a gathered plan's whole weight block, live with the panel in the weight class
    "feasible": pl.Boolean, "reject_reason": pl.String,
    "chosen_in": pl.List(pl.Int64),    # the offered chains (by rank, 0 = the fastest) that use this plan
}


def linear_ops(ops: list[dict], tensors: dict) -> list[dict]:
    return [op for op in ops if op["rule"] == "linear"]


def _check_fits(op: dict, plan: GemmPlan, tiles: int, field: str, text: str) -> None:
    """A linear op's plan needs at most the compute tiles and at least one row, column and inner element per
    partition; the error names the closest plan that fits (or says none does)."""
    rows, cols, groups = int(op["rows"]), int(op["cols"]), int(op["inner"])
    m, n, k = min(plan.m, rows), min(plan.n, cols), min(plan.k, groups)
    if (m, n, k) != (plan.m, plan.n, plan.k):
        what = [f"{v} {name} partitions for {most} {unit}" for v, most, name, unit in (
            (plan.m, rows, "row", "rows"), (plan.n, cols, "column", "columns"),
            (plan.k, groups, "inner", "inner elements")) if v > most]
        msg = (f"plan {plan.label()} for op {op['name']!r} asks {'; '.join(what)}; "
               f"{_closest(m, n, k, tiles)}")
        raise InfeasibleError(msg, field=field, value=text, op=op["name"])
    if plan.tiles > tiles:
        msg = (f"plan {plan.label()} for op {op['name']!r} needs {plan.tiles} tiles, more than the {tiles} "
               f"compute tiles; {_closest(m, n, k, tiles)}")
        raise InfeasibleError(msg, field=field, value=text, op=op["name"])


def _closest(m: int, n: int, k: int, tiles: int) -> str:
    """The closest grid within ``tiles`` (columns cut first, then rows, then inner splits), said as a hint."""
    if k > tiles:
        k = tiles
    if m * k > tiles:
        m = max(1, tiles // k)
    n = max(1, min(n, tiles // (m * k)))
    return f"the closest that fits is {m}x{n}x{k}"


def _check_product(op: dict, plan: GemmPlan, key: str, text: str) -> None:
    """An attention product's plan is per (image, head): scores ``m x n x 1``, values ``m x 1 x k``."""
    scores = op["rule"] == "scores"
    bad = plan.k != 1 if scores else plan.n != 1
    if bad or plan.result_rows != 1 or plan.result_cols:
        want = f"{plan.m}x{plan.n}x1" if scores else f"{plan.m}x1x{plan.k}"
        what = ("query rows x key columns per head (no inner split: the head is 72 deep)" if scores else
                "query rows x 1 x key (inner) shards per head, partials reduced by rows")
        kind = "scores" if scores else "values"
        msg = f"plan {text!r} for op {op['name']!r}: an attention {kind} plan is {what}; e.g. {want!r}"
        raise OptionError(msg, field=f"plans.{key}", value=text, op=op["name"])


def enumerate_plans(op: dict, tiles: int, depth: int, row_block: int | None = None,
                    target: Target | None = None) -> dict[str, np.ndarray]:
    """Candidate plans of one linear op: row, column and inner partitions that fit the tiles, with result splits.

    Inner partitions keep at least one coefficient panel (``depth`` deep) per
    tile; column counts are the most the tiles allow and those giving whole
    16-column panels; inner-split plans scatter their result by columns (given
    explicitly) or by rows (gemm.DEFAULT_RESULT). Plans with several row
    partitions come twice: weights resident, and gathered (``gathered`` 1); inner-split plans once more per
    reduction staging of :data:`STAGINGS` below k. A pinned ``row_block`` fixes
    the row partitions to ``ceil(rows / row_block)`` (every tile's local rows
    at most the row block).
    """
    rows, cols, inner = op["rows"], op["cols"], op["inner"]
    ms = np.asarray(M_CHOICES if row_block is None else (-(-rows // row_block),), dtype=np.int64)
    m, k = (a.ravel() for a in np.meshgrid(ms, np.asarray(K_CHOICES, dtype=np.int64), indexing="ij"))
    ok = (m <= rows) & ((k == 1) | (-(-inner // k) >= depth)) & (m * k <= tiles)
    m, k = m[ok], k[ok]
    n_max = np.minimum(tiles // (m * k), cols)
    panels = np.unique(-(-cols // (16 * np.arange(1, 33))))               # whole 16-column panels per tile
    # every (m, k) with the most columns the tiles allow and each whole-panel count below it
    mi = np.concatenate([np.arange(len(m)), np.repeat(np.arange(len(m)), len(panels))])
    n = np.concatenate([n_max, np.tile(panels, len(m))])
    keep = (n >= 1) & (n <= n_max[mi])
    grid = np.unique(np.stack([m[mi][keep], n[keep], k[mi][keep]], axis=1), axis=0)
    m, n, k = grid.T
    by_rows = (k > 1) & (-(-rows // m) >= k)                             # the result split over k tiles by rows
    split = np.concatenate([np.zeros(len(m), dtype=bool), np.ones(int(by_rows.sum()), dtype=bool)])
    idx = np.concatenate([np.arange(len(m)), np.nonzero(by_rows)[0]])
    gathered = np.concatenate([np.zeros(len(idx), dtype=bool), np.ones(int((m[idx] > 1).sum()), dtype=bool)])
    idx, split = np.concatenate([idx, idx[m[idx] > 1]]), np.concatenate([split, split[m[idx] > 1]])
    # the column split (at least 8 columns a piece) is given explicitly: a plan without a result grid is
    # gemm.DEFAULT_RESULT, the row split
    by_cols = np.where(k[idx] > 1, np.maximum(1, np.minimum(k[idx], cols // n[idx] // 8)), 0)
    plans = {"m": m[idx], "n": n[idx], "k": k[idx], "result_rows": np.where(split, k[idx], 1),
             "result_cols": np.where(split, 1, by_cols), "gathered": gathered.astype(np.int64),
             "staging": np.zeros(len(idx), dtype=np.int64), "swapped": np.zeros(len(idx), dtype=np.int64)}
    cheaper = swaps(op, plans, depth, target or ipu21())
    return {key: np.concatenate([v, v[cheaper]]) if key != "swapped" else
            np.concatenate([v, np.ones(int(cheaper.sum()), dtype=np.int64)])
            for key, v in plans.items()}


def swaps(op: dict, plans: dict[str, np.ndarray], depth: int, target: Target) -> np.ndarray:
    """The plans whose transposed product (ipu-stack's ``swapped`` orientation) runs fewer AMP cycles: the
    kernel's rows become the cell's ``ceil(cols / n)`` columns and its 16-wide panels cut the cell's rows (the
    interleaved matmul rule of :mod:`toolkit.costs` on both shapes). Only these get a swapped variant."""
    r = -(-op["rows"] // plans["m"])
    c = -(-op["cols"] // plans["n"])
    local_inner = -(-op["inner"] // plans["k"])
    dtype = "f16" if depth == target.costs.amp_panel_depth_f16 else "f8"
    kw = {"inner": local_inner, "dtype": dtype, "weight_class": "interleaved"}
    normal = cycles("matmul", target, rows=r, cols=c, **kw)
    swapped = cycles("matmul", target, rows=c, cols=r, **kw)
    return swapped < normal


def staged_variants(plans: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, np.ndarray]:
    """The selected plans once per reduction staging of :data:`STAGINGS` that is below their k - 1."""
    parts = []
    for st in STAGINGS:
        keep = rows & (plans["k"] - 1 > st)
        parts.append({**{k: v[keep] for k, v in plans.items()}, "staging": np.full(int(keep.sum()), st)})
    if not parts:
        return {k: v[:0] for k, v in plans.items()}
    return {k: np.concatenate([p_[k] for p_ in parts]) for k in plans}


def op_candidates(op: dict, tensors: dict, reps: dict, target: Target, tiles: int, partials: str,
                  inner_block: int | None, weight_class: str, row_block: int | None = None,
                  followers: tuple[dict, ...] = ()) -> pl.DataFrame:
    """Every enumerated plan of one linear op with its screened estimates (OP_CANDIDATES_SCHEMA, no chains yet).

    ``feasible``: the plan's weights and transient bytes fit one tile beside
    RESERVE_BYTES (alone: the joint chain choice then shares the tile between
    ops). ``followers`` are the elementwise ops that run in place on the op's
    output (:func:`toolkit.layout.gemm_screen.runs_in_place`): their cycles
    depend on this plan's result grid, so they are priced with it
    (``est_in_place_cycles``). Staged reductions only trade time for memory:
    they are added for the plans whose transient bytes leave less than half the
    memory to weights, where staging brings them below that.
    """
    w = tensors[op["inputs"][1]]
    depth = target.costs.amp_panel_depth_f8 if w["dtype"].startswith("f8") else target.costs.amp_panel_depth_f16
    room = target.load_limit - target.memory_start - RESERVE_BYTES
    plans = enumerate_plans(op, tiles, depth, row_block, target)
    args = (op, tensors, reps, target, tiles, partials, inner_block, weight_class, followers)
    est = _estimates(*args, plans)
    heavy = est["transient_bytes"].to_numpy() > STAGED_SHARE * room
    if heavy.any():
        staged = staged_variants(plans, heavy)
        if len(staged["m"]):   # kept where staging brings the plan below the share
            more = _estimates(*args, staged)
            est = pl.concat([est, more.filter(pl.col("transient_bytes") <= STAGED_SHARE * room)])
    return _op_frame(est, room)


def _op_frame(est: pl.DataFrame, room: int) -> pl.DataFrame:
    """Estimated plans as OP_CANDIDATES_SCHEMA rows: labels, feasibility alone on a tile, no chain yet."""
    return est.with_columns(plan_labels(), *_fits(room), pl.lit([], dtype=pl.List(pl.Int64)).alias("chosen_in")
                            ).select(list(OP_CANDIDATES_SCHEMA)).cast(OP_CANDIDATES_SCHEMA)


def _estimates(op: dict, tensors: dict, reps: dict, target: Target, tiles: int, partials: str,
               inner_block: int | None, weight_class: str, followers: tuple[dict, ...],
               plans: dict[str, np.ndarray]) -> pl.DataFrame:
    plans = dict(plans)
    gathered = plans.pop("gathered").astype(bool)
    swapped = plans.pop("swapped", np.zeros(len(gathered), dtype=np.int64)).astype(bool)
    given = plans.pop("memory", None)   # the plans' own memory classes (none: "" each)
    memory = np.full(len(gathered), "") if given is None else given
    e = gemm_estimates(op, tensors, reps, plans["m"], plans["n"], plans["k"], plans["result_rows"],
                       plans["result_cols"], partials, inner_block, target, tiles, gathered, plans["staging"],
                       swapped)
    # gathered blocks are copied into the weight class before the AMP reads; a plan's own class prices it
    compute = np.where(memory == "standard", e["compute_standard"], np.where(
        memory == "interleaved", e["compute_interleaved"], e[f"compute_{weight_class}"]))
    sync = e["syncs"] * target.costs.sync_cycles
    in_place = sum((in_place_cycles(f, tensors, e["out_rows"], e["out_cols"], e["chunks"], target)
                    for f in followers), np.zeros(len(compute), dtype=np.int64))
    total = compute + e["exchange"] + sync
    # words as polars expressions: numpy string columns convert to polars element by element
    return pl.DataFrame({
        "op": op["name"], **plans, "gathered": gathered, "swapped": swapped,
        "order": "columns",   # the screen prices endpoint loads, not distance: tile orders are pinned, not searched
        "memory": "" if given is None else given,
        "tiles_used": e["tiles_used"], "est_compute_cycles": compute, "est_exchange_cycles": e["exchange"],
        "est_sync_cycles": sync, "est_cycles": total, "est_in_place_cycles": in_place,
        "est_chain_cycles": total + in_place,
        "weight_bytes": e["weight_bytes"] + e["bias_bytes"], "transient_bytes": e["recv_bytes"] + e["out_bytes"],
        "panel_bytes": e["panel_bytes"], "gather_bytes": e["gather_bytes"],
    }).with_columns(_word("gathered", "gathered", "resident").alias("weights"),
                    _word("swapped", "swapped", "normal").alias("orientation"))


def _word(flag: str, yes: str, no: str) -> pl.Expr:
    """``yes`` where boolean column ``flag`` holds, else ``no`` (a frame of no plans has a null-typed column)."""
    return pl.when(pl.col(flag).cast(pl.Boolean)).then(pl.lit(yes)).otherwise(pl.lit(no))


def _fits(room: int) -> tuple[pl.Expr, pl.Expr]:
    need = pl.col("weight_bytes") + pl.col("transient_bytes")
    reason = pl.format("needs {} B per tile (weights {}, transient {}) > {} B", need, "weight_bytes",
                       "transient_bytes", pl.lit(room))
    return (need <= room).alias("feasible"), pl.when(need > room).then(reason).alias("reject_reason")


def plan_labels() -> pl.Expr:
    """:meth:`GemmPlan.label` as a column expression over m, n, k, result_rows, result_cols."""
    base = pl.format("{}x{}x{}", "m", "n", "k")
    grid = pl.format("/{}x{}", pl.col("m") * pl.col("result_rows"), pl.col("n") * pl.col("result_cols").clip(1))
    given = (pl.col("result_rows") != 1) | (pl.col("result_cols") != 0)
    label = pl.when(given).then(pl.concat_str(base, grid)).otherwise(base)
    label = pl.when(pl.col("weights") == "resident").then(label).otherwise(
        pl.concat_str(label, pl.lit(" "), pl.col("weights")))
    memory = pl.col("memory").fill_null("")   # then the words of gemm.LABEL_WORDS, in their order
    label = pl.when(memory == "").then(label).otherwise(pl.concat_str(label, pl.lit(" "), memory))
    label = pl.when(pl.col("orientation").fill_null("normal") == "normal").then(label).otherwise(
        pl.concat_str(label, pl.lit(" "), pl.col("orientation")))
    label = pl.when(pl.col("order") == "columns").then(label).otherwise(
        pl.concat_str(label, pl.lit(" "), pl.col("order"), pl.lit("-fast")))
    staging = pl.col("staging")
    return (pl.when(staging == 0).then(label).when(staging == 1).then(pl.concat_str(label, pl.lit(" streamed")))
            .otherwise(pl.concat_str(label, pl.lit(" batched"), staging.cast(pl.String))).alias("plan"))


def plan_columns(variants: list[list[dict]]) -> dict[str, str]:
    """Candidate column per plannable op (linears and attention products) of every graph variant:
    ``plan_<short name>`` (``plan_fc1``), or ``plan_<full name>`` where short names collide."""
    names = sorted({op["name"] for ops in variants for op in ops if op["rule"] in ("linear", "scores", "values")})
    shorts = [n.rsplit(".", 1)[-1] for n in names]
    return {n: f"plan_{s if shorts.count(s) == 1 else n.replace('.', '_')}"
            for n, s in zip(names, shorts, strict=True)}


def searches_plans(o: Options) -> bool:
    """Per-op plans are searched unless turned off or a global grid knob is pinned (the grid then decides); a
    pinned ``row_block`` keeps the search and fixes every plan's local rows."""
    knobs = (o.row_shard, o.inner_split, o.panel_groups)
    return o.plan_search and all(k is None for k in knobs)


#: attention product grids tried per head (query-row shards; the key shards fill the tiles)
GRID_ROWS = (4, 8, 12)


def attention_grids(ops: list[dict], params: dict, tiles: int, pinned: dict, row_block: int | None = None,
                    mode: str | None = None) -> list[tuple]:
    """Attention product grids to try: shared rows (``()``), then scores ``m x n x 1`` with values ``m' x 1 x k``
    for ``m, m'`` in :data:`GRID_ROWS` (a pinned ``row_block``: ``ceil(tokens / row_block)`` query shards), each
    filling the tiles (pinned products stay as pinned). Every attention of the graph (each scores op and the
    values op after it) gets the grid, its query shards at most its own query rows (a pooling head has one) and
    its key shards at most its keys. ``mode`` (option ``attention_products``, ipu-stack's words) keeps the
    products it names on grids and the others on the shared rows; ``None`` tries shared rows and both on grids."""
    scores = [op for op in ops if op["rule"] == "scores"]
    values = [op for op in ops if op["rule"] == "values"]
    if not scores or len(scores) != len(values):
        return [()]
    on_grid = {None: (True, True), **{m: g for g, m in PRODUCT_MODES.items()}}[mode]
    _check_product_pins(scores, values, pinned, mode, on_grid)
    if mode == "shared-rows":
        return [()]
    tokens = int(params["tokens"])
    out: list[tuple] = [] if mode else [()]
    shards = GRID_ROWS if row_block is None else (-(-tokens // row_block),)
    for ms, mv in itertools.product(shards, shards if on_grid[1] else shards[:1]):
        grid = {}
        for sc, va in zip(scores, values, strict=True):
            q, keys, groups = int(sc["rows"]), int(sc["cols"]), int(sc["groups"])
            m_s, m_v = min(ms, q), min(mv, q)
            n, k = tiles // (groups * m_s), tiles // (groups * m_v)
            if min(n, k) < 1 or (q == tokens and max(ms, mv) > tokens):
                grid = {}
                break
            if on_grid[0]:
                grid[sc["name"]] = GemmPlan(m=m_s, n=min(n, keys), k=1)
            if on_grid[1]:
                grid[va["name"]] = GemmPlan(m=m_v, n=1, k=min(k, keys))
        if grid:
            out.append(tuple(sorted({**grid, **{o: pl_ for o, pl_ in pinned.items() if o in grid}}.items())))
    if not out:
        msg = (f"option attention_products={mode!r}: no product grid of {len(scores)} attention(s) fits {tiles} "
               f"tiles (each head needs a query shard and a key shard of its own); use 'shared-rows' or None")
        raise InfeasibleError(msg, field="attention_products", value=mode)
    return list(dict.fromkeys(out))


def _check_product_pins(scores: list[dict], values: list[dict], pinned: dict, mode: str | None,
                        on_grid: tuple[bool, bool]) -> None:
    """A pinned product plan is a grid: refused where ``attention_products`` keeps that product on shared rows."""
    if mode is None:
        return
    for ops_, grid, what in ((scores, on_grid[0], "scores"), (values, on_grid[1], "values")):
        named = [op["name"] for op in ops_ if op["name"] in pinned]
        if named and not grid:
            msg = (f"option attention_products={mode!r} keeps the {what} products on the shared query rows, but "
                   f"plans pins {named[0]}={pinned[named[0]].label()} on a grid; drop the pin or choose "
                   f"{PRODUCT_MODES[(on_grid[0] or what == 'scores', on_grid[1] or what == 'values')]!r}")
            raise OptionError(msg, field="attention_products", value=mode)


def _pinned_frame(args: tuple, followers: tuple[dict, ...], g: GemmPlan, room: int) -> pl.DataFrame:
    """The one-row per-op frame of a pinned plan (OP_CANDIDATES_SCHEMA), screened like any enumerated plan."""
    one = {"m": g.m, "n": g.n, "k": g.k, "result_rows": g.result_rows, "result_cols": g.result_cols,
           "gathered": int(g.weights == "gathered"), "staging": g.staging, "swapped": int(g.swapped)}
    given = {k: np.array([v], dtype=np.int64) for k, v in one.items()} | {"memory": np.array([g.memory])}
    est = _estimates(*args, followers, given)
    return _op_frame(est.with_columns(pl.lit(g.order).alias("order")), room)


def pinned_misfits(ops: list[dict], tensors: dict, reps: dict, target: Target, tiles: int, o: Options,
                   weight_class: str, pins: tuple) -> list[tuple[str, GemmPlan, str]]:
    """The pinned linear plans that cannot fit one tile even alone: (op, plan, why), in op order."""
    pinned = dict(pins)
    room = target.load_limit - target.memory_start - RESERVE_BYTES
    out = []
    for op in linear_ops(ops, tensors):
        if op["name"] not in pinned:
            continue
        followers = tuple(f for f in ops if f["inputs"] and f["inputs"][0] == op["output"] and runs_in_place(f, op))
        args = (op, tensors, reps, target, tiles, o.partials, o.inner_block, weight_class)
        row = _pinned_frame(args, followers, pinned[op["name"]], room).row(0, named=True)
        if not row["feasible"]:
            w, t = row["weight_bytes"], row["transient_bytes"]
            out.append((op["name"], pinned[op["name"]],
                        f"needs {w + t:,} B per tile (weights {w:,} B, transient {t:,} B) > {room:,} B"))
    return out


def plan_chains(ops: list[dict], tensors: dict, reps: dict, target: Target, tiles: int, o: Options,
                weight_class: str, pins: tuple, memo: dict | None = None) -> tuple[list[tuple], pl.DataFrame]:
    """The chains of per-op plans offered to the whole-graph screen (:func:`toolkit.layout.chains.choose_chains`)
    and the per-op frame: every plan of every unpinned linear op, plus the pinned plans' own rows.

    ``memo`` (a dict the caller keeps across the graph variants of one search, on one target) holds every op's
    screened plans by the op's signature and its followers': ops with equal ones (Q, K and V; the MLP in both
    QKV forms) are screened once."""
    pinned = dict(pins)
    room = target.load_limit - target.memory_start - RESERVE_BYTES
    memo = {} if memo is None else memo
    frames = {}
    for op in linear_ops(ops, tensors):
        followers = tuple(f for f in ops if f["inputs"] and f["inputs"][0] == op["output"] and runs_in_place(f, op))
        args = (op, tensors, reps, target, tiles, o.partials, o.inner_block, weight_class)
        if op["name"] in pinned:   # the pinned plan alone: its bytes share the tile with the searched ops
            frames[op["name"]] = _pinned_frame(args, followers, pinned[op["name"]], room)
            continue
        key = (linear_signature(op, tensors, reps), tuple(in_place_signature(f, tensors) for f in followers), tiles,
               o.partials, o.inner_block, weight_class, o.row_block)
        if key not in memo:
            memo[key] = op_candidates(*args, o.row_block, followers)
        frames[op["name"]] = memo[key].with_columns(pl.lit(op["name"]).alias("op"))
    # an op without an enumerable plan (a pinned row block needing more row partitions than the tiles) follows
    # the layout's global grid, which runs its row blocks in waves
    frames = {name: f for name, f in frames.items() if f.height}
    if not frames:
        return [()], pl.DataFrame(schema=OP_CANDIDATES_SCHEMA)
    regions = (region0_free_bytes(target, SUPPORT_BYTES), region1_bytes(target))
    producer = {op["output"]: op["name"] for op in ops}
    feeders = frozenset(producer[t] for op in ops if op["rule"] in ("scores", "values") for t in op["inputs"]
                        if t in producer) - set(pinned)
    return choose_chains(frames, target.load_limit - target.memory_start, RESERVE_BYTES, pinned, regions,
                         interleaved=weight_class == "interleaved", also_normal=feeders)


__all__ = [
    "OP_CANDIDATES_SCHEMA",
    "attention_grids",
    "enumerate_plans",
    "linear_ops",
    "op_candidates",
    "pinned_misfits",
    "plan_chains",
    "plan_columns",
    "searches_plans",
]
