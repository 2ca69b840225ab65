"""The joint chain choice: exact under the shared-memory model, deterministic, pins included."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import toolkit
from toolkit.layout.chains import MAX_CHAINS, choose_chains
from toolkit.layout.gemm import GemmPlan
from toolkit.layout.gemm_screen import after_gemm
from toolkit.layout.gemm_search import OP_CANDIDATES_SCHEMA, RESERVE_BYTES, op_candidates

ROOM = 1000


def _frame(op: str, plans: list[tuple[int, int, int]]) -> pl.DataFrame:
    """Plans of one op as (cycles, weight bytes, transient bytes); plan i is the grid 1 x (i + 1) x 1."""
    n = len(plans)
    return pl.DataFrame({
        "op": [op] * n, "plan": [f"1x{i + 1}x1" for i in range(n)], "m": [1] * n, "n": list(range(1, n + 1)),
        "k": [1] * n, "result_rows": [1] * n, "result_cols": [0] * n, "weights": ["resident"] * n,
        "staging": [0] * n, "order": ["columns"] * n, "est_chain_cycles": [c for c, _, _ in plans],
        "weight_bytes": [w for _, w, _ in plans], "transient_bytes": [t for _, _, t in plans],
        "chosen_in": [[] for _ in range(n)]}, schema_overrides={"chosen_in": pl.List(pl.Int64)})


def _brute(ops: list[list[tuple[int, int, int]]]) -> int | None:
    best = None
    for combo in itertools.product(*ops):
        if sum(w for _, w, _ in combo) + max(t for _, _, t in combo) <= ROOM:
            cyc = sum(c for c, _, _ in combo)
            best = cyc if best is None else min(best, cyc)
    return best


plan = st.tuples(st.integers(1, 100), st.integers(0, 600), st.integers(0, 600))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(plan, min_size=1, max_size=5), min_size=1, max_size=3))
@example([[(10, 500, 100), (1, 900, 100)], [(10, 100, 500), (1, 100, 50)]])   # the fast plan of op 0 never fits
def test_the_fastest_offered_chain_is_the_exact_optimum(ops) -> None:
    frames = {f"op{i}": _frame(f"op{i}", p) for i, p in enumerate(ops)}
    chains, per_op = choose_chains(frames, ROOM + RESERVE_BYTES, RESERVE_BYTES, {})
    best = _brute(ops)
    assert 1 <= len(chains) <= MAX_CHAINS
    picked = [[ops[int(name[2:])][g.n - 1] for name, g in chain] for chain in chains]
    totals = [(sum(c for c, _, _ in p), sum(w for _, w, _ in p) + max(t for _, _, t in p)) for p in picked]
    if best is None:   # nothing fits: one chain of every op's smallest plan
        assert len(chains) == 1
        assert all(w + t == min(w_ + t_ for _, w_, t_ in o) for (_, w, t), o in zip(picked[0], ops, strict=True))
    else:
        assert totals[0][0] == best and totals[0][1] <= ROOM
        assert all(m <= ROOM for _, m in totals)
        # fastest first, each later chain smaller than every faster one (the trade-off, no dominated chain)
        assert all(a[0] <= b[0] and a[1] > b[1] for a, b in itertools.pairwise(totals))
    # chosen_in names each chain's plans by rank
    used = per_op.filter(pl.col("chosen_in").list.len() > 0)
    for rank, chain in enumerate(chains):
        for name, g in chain:
            assert rank in used.filter((pl.col("op") == name) & (pl.col("plan") == g.label()))["chosen_in"][0]


def test_projections_feeding_an_attention_are_offered_in_normal_orientation_too() -> None:
    """A swapped projection's own estimate cannot see the preparation it makes its attention run, so the chains
    with it in normal orientation are offered too (after the others, whatever their own cycles), for the
    whole-graph screen to weigh; an op not named is not."""
    q = _frame("q", [(100, 100, 100), (50, 100, 100)]).with_columns(pl.Series("orientation", ["normal", "swapped"]))
    fc = _frame("fc", [(10, 100, 100)]).with_columns(pl.Series("orientation", ["normal"]))
    alone, _ = choose_chains({"q": q, "fc": fc}, ROOM + RESERVE_BYTES, RESERVE_BYTES, {})
    both, per_op = choose_chains({"q": q, "fc": fc}, ROOM + RESERVE_BYTES, RESERVE_BYTES, {},
                                 also_normal=frozenset({"q"}))
    assert [dict(c)["q"].n for c in alone] == [2]
    assert [dict(c)["q"].n for c in both] == [2, 1]   # the per-op fastest first, then the normal one
    assert per_op.filter(pl.col("op") == "q").sort("n")["chosen_in"].to_list() == [[1], [0]]


def test_a_pinned_plan_shares_the_memory_and_stays_as_pinned() -> None:
    pinned = GemmPlan(m=1, n=1, k=1)
    frames = {"a": _frame("a", [(5, 800, 100)]),   # the pin: its 800 weight bytes leave 100 for the other op
              "b": _frame("b", [(1, 300, 50), (9, 50, 50)])}
    chains, _ = choose_chains(frames, ROOM + RESERVE_BYTES, RESERVE_BYTES, {"a": pinned})
    assert chains[0] == (("a", pinned), ("b", GemmPlan(m=1, n=2, k=1)))


def test_in_place_cycles_are_what_the_whole_graph_screen_prices() -> None:
    """GELU after fc1 is priced with fc1's plan by the one rule the layout screen uses (after_gemm)."""
    g = toolkit.build_graph("mlp-single-b1")
    ops = {o["name"]: o for o in g.ops.iter_rows(named=True)}
    tensors = {t["tensor_id"]: t for t in g.tensors.iter_rows(named=True)}
    target = toolkit.ipu21()
    fc1, gelu, fc2 = ops["mlp.fc1"], ops["mlp.gelu"], ops["mlp.fc2"]
    f = op_candidates(fc1, tensors, {}, target, 1472, "f16", None, "interleaved", followers=(gelu,))
    assert set(f.columns) == set(OP_CANDIDATES_SCHEMA)
    assert (f["est_in_place_cycles"] > 0).all()
    assert (f["est_chain_cycles"] == f["est_cycles"] + f["est_in_place_cycles"]).all()
    for row in f.sample(20, seed=0).iter_rows(named=True):
        plan = GemmPlan(m=row["m"], n=row["n"], k=row["k"], result_rows=row["result_rows"],
                        result_cols=row["result_cols"])
        assert row["est_in_place_cycles"] == after_gemm(gelu, fc1, plan, tensors, target, 1472)["compute"][
            "interleaved"], row["plan"]
    # fc2 has nothing in place on its output (the residual add runs on the stream's home tiles)
    f2 = op_candidates(fc2, tensors, {}, target, 1472, "f16", None, "interleaved")
    assert (f2["est_in_place_cycles"] == 0).all()


@pytest.mark.parametrize("pins", [{"fc1": "4x92x4/16x92"}, {"fc2": "3x18x27"}])
def test_a_pinned_op_gets_its_own_row_and_the_other_op_is_chosen_around_it(pins) -> None:
    from toolkit.options import as_options
    g = toolkit.build_graph("mlp-single-b1")
    r = toolkit.layout.search_layouts(g, toolkit.ipu21(), as_options({"plans": pins}))
    key, text = next(iter(pins.items()))
    rows = r.op_candidates.filter(pl.col("op") == f"mlp.{key}")
    assert rows["plan"].to_list() == [text] and rows["chosen_in"][0].len() >= 1
    assert all(dict(p.plans)[f"mlp.{key}"].label() == text for p in r.params.values() if p.plans)


def test_local_rows_says_what_each_candidate_runs() -> None:
    """A plan chain's row_block only sets the attention and stream rows: local_rows is the rows its GEMMs hold."""
    r = toolkit.compile("mlp-single-b1", options={"simulate": False}).layout
    rows = {o["name"]: o["rows"] for o in r.graph.ops.iter_rows(named=True)}
    cand = r.candidates
    for row in cand.sample(200, seed=1).iter_rows(named=True):
        p = r.params[row["candidate_id"]]
        plans = dict(p.plans)
        want = max(-(-rows[n] // plans[n].m) if n in plans else min(p.row_block, 729) for n in ("mlp.fc1", "mlp.fc2"))
        assert row["local_rows"] == want, row
    chained = cand.filter(pl.col("plans").is_not_null())
    assert (chained["local_rows"] != chained["row_block"]).any()   # the column the row_block label hid
    summary = toolkit.compile("mlp-single-b1", options={"row_block": 18, "simulate": False}).summary()
    assert summary["local_rows"].item() <= 18


def test_a_panel_too_big_for_region_0_caps_the_weights_beside_it() -> None:
    """A contiguous panel over region 0's span must share region 1 with every op's interleaved weights and the
    op's own gathered block: the fast plan with a big panel is refused when the other op's weights crowd it."""
    def with_regions(f: pl.DataFrame, panels: list[int], gathers: list[int]) -> pl.DataFrame:
        return f.with_columns(pl.Series("panel_bytes", panels), pl.Series("gather_bytes", gathers))
    a = with_regions(_frame("a", [(1, 100, 400), (5, 100, 150)]), [350, 100], [0, 0])
    b = with_regions(_frame("b", [(1, 300, 10)]), [10], [0])
    # without regions the fast plan of a fits (100 + 300 + 400 <= 1000)
    free, _ = choose_chains({"a": a, "b": b}, ROOM + RESERVE_BYTES, RESERVE_BYTES, {})
    assert dict(free[0])["a"].n == 1
    # region 0 holds 200 B, region 1 600 B: a's 350 B panel needs 350 + 400 weights > 600 in region 1
    held, _ = choose_chains({"a": a, "b": b}, ROOM + RESERVE_BYTES, RESERVE_BYTES, {}, regions=(200, 600))
    assert dict(held[0])["a"].n == 2
    # a gathered block of the op counts beside its panel in region 1
    g = with_regions(_frame("a", [(1, 100, 400), (5, 100, 150)]), [250, 100], [100, 0])
    assert dict(choose_chains({"a": g, "b": b}, ROOM + RESERVE_BYTES, RESERVE_BYTES, {}, regions=(200, 600))[0][0])[
        "a"].n == 2
    assert dict(choose_chains({"a": g, "b": b}, ROOM + RESERVE_BYTES, RESERVE_BYTES, {}, regions=(200, 800))[0][0])[
        "a"].n == 1


@pytest.mark.slow
def test_on_real_plans_the_ladder_finds_the_brute_force_optimum(monkeypatch) -> None:
    """mlp-single-b1's fc1 (GELU in place) and fc2 plans: with every budget of the ladder tried, the fastest chain
    is the optimum over all pairs under the same memory model; the default ladder of CAPS budgets is within 1 %."""
    from toolkit.layout import chains
    from toolkit.layout.gemm_search import SUPPORT_BYTES
    from toolkit.layout.screen import region0_free_bytes, region1_bytes

    g = toolkit.build_graph("mlp-single-b1")
    ops = {o["name"]: o for o in g.ops.iter_rows(named=True)}
    tensors = {t["tensor_id"]: t for t in g.tensors.iter_rows(named=True)}
    target = toolkit.ipu21()
    frames = {"mlp.fc1": op_candidates(ops["mlp.fc1"], tensors, {}, target, 1472, "f16", None, "interleaved",
                                       followers=(ops["mlp.gelu"],)),
              "mlp.fc2": op_candidates(ops["mlp.fc2"], tensors, {}, target, 1472, "f16", None, "interleaved")}
    capacity = target.load_limit - target.memory_start
    room = capacity - RESERVE_BYTES
    regions = (region0_free_bytes(target, SUPPORT_BYTES), region1_bytes(target))

    def cols(f: pl.DataFrame) -> tuple:
        c, w, t = (f[k].to_numpy().astype(np.int64) for k in ("est_chain_cycles", "weight_bytes", "transient_bytes"))
        p, gb = f["panel_bytes"].to_numpy(), f["gather_bytes"].to_numpy()
        ceiling = np.where(p > regions[0], regions[1] - gb - p, regions[1])
        return c, w, t, ceiling

    (c1, w1, t1, e1), (c2, w2, t2, e2) = cols(frames["mlp.fc1"]), cols(frames["mlp.fc2"])
    weights = w1[:, None] + w2[None, :]
    fits = (weights + np.maximum(t1[:, None], t2[None, :]) <= room) & (weights <= np.minimum(e1[:, None], e2[None, :]))
    best = int(np.where(fits, c1[:, None] + c2[None, :], np.iinfo(np.int64).max).min())

    def fastest() -> int:
        chain = dict(choose_chains(frames, capacity, RESERVE_BYTES, {}, regions)[0][0])
        total = 0
        for name, f in frames.items():
            row = f.filter(pl.col("plan") == chain[name].label()).sort("est_chain_cycles").row(0, named=True)
            total += row["est_chain_cycles"]
        return total

    assert fastest() <= 1.01 * best
    monkeypatch.setattr(chains, "CAPS", 10**6)
    assert fastest() == best
