"""Per-op GEMM plans: the plan type, pins and their errors, the schedule of every plan family, the per-op search."""

from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolkit
from toolkit.errors import InfeasibleError, InvalidIRError, OptionError
from toolkit.graph.builders import mlp_block
from toolkit.layout.gemm import GemmPlan, balanced_bounds, parse_plan, sub_bounds
from toolkit.layout.plans import LayoutParams
from toolkit.schedule import schedule
from toolkit.schedule.verify import verify_schedule

IPU = toolkit.ipu21()


def test_plan_text_round_trips_and_shards_balance() -> None:
    p = parse_plan("4x92x4/16x92")
    assert (p.m, p.n, p.k, p.result_rows, p.result_cols) == (4, 92, 4, 4, 1)
    assert p.label() == "4x92x4/16x92" and parse_plan("4x24x15").label() == "4x24x15"
    g = parse_plan("4x92x4/16x92 gathered")
    assert g.weights == "gathered" and g.label() == "4x92x4/16x92 gathered" and parse_plan(g.label()) == g
    for text, staging in (("4x24x15 streamed", 1), ("4x24x15 batched4", 4), ("4x92x4/16x92 gathered batched2", 2)):
        assert parse_plan(text).staging == staging and parse_plan(text).label() == text
    assert np.diff(balanced_bounds(729, 4)).tolist() == [183, 182, 182, 182]
    assert np.diff(balanced_bounds(4304, 92)).tolist().count(47) == 72   # 72 x 47 + 20 x 46 = 4304
    bounds, j, shard = sub_bounds(np.array([0, 5, 7]), 3)
    assert bounds.tolist() == [0, 1, 3, 5, 6, 7] and j.tolist() == [0, 1, 2, 0, 1] and shard.tolist() == [0, 0, 0, 1, 1]


@pytest.mark.parametrize(("text", "match"), [
    ("4x92", r"write 'MxNxK'"),
    ("4x0x4", r"partition counts must be positive"),
    ("4x92x4/10x92", r"must be a multiple of the compute grid's 4 rows x 92 columns"),
    ("4x92x2/16x92", r"needs more than the k=2 inner-split tiles"),
    ("4x92x4 scattered", r"'scattered' is neither a weight store \(\['resident', 'gathered'\]\), a reduction"),
    ("4x92x4 diagonal-fast", r"'diagonal-fast' is neither .* nor a tile order \('rows-fast', 'columns-fast'\)"),
    ("4x24x15 batched14", r"14 remote partials in batches of 14 is all partials at once"),
    ("4x24x1 streamed", r"has no inner split, so no partials to stage"),
    ("1x92x4 gathered", r"with one row partition every weight block is stored once already"),
])
def test_malformed_plans_name_the_op(text, match) -> None:
    with pytest.raises(OptionError, match=match) as err:
        parse_plan(text, op="mlp.fc1")
    assert err.value.field == "plans.mlp.fc1"


def test_pins_that_cannot_apply_are_refused_by_name() -> None:
    with pytest.raises(OptionError, match=r"plans names op 'fc3'.*did you mean 'fc2' or 'fc1'"):
        toolkit.compile("mlp-single-b1", options={"plans": {"fc3": "4x92x4"}})
    with pytest.raises(OptionError, match=r"'mlp.gelu' \(key 'gelu'\), which is a gelu; plans apply to matmuls"):
        toolkit.compile("mlp-single-b1", options={"plans": {"gelu": "4x92x4"}})
    with pytest.raises(InfeasibleError, match=r"needs 1600 tiles, more than the 1472 .* closest that fits is 4x92x4"):
        toolkit.compile("mlp-single-b1", options={"plans": {"fc1": "4x100x4"}})
    with pytest.raises(OptionError, match=r"must map op names to plan strings"):
        toolkit.compile("mlp-single-b1", options={"plans": {"fc1": 4}})


def _tiny(plans: dict[str, str], tokens=5, width=32, hidden=47, weight_dtype="f8_143"):
    from toolkit.graph.ir import DType
    g = mlp_block(tokens=tokens, width=width, hidden=hidden, weight_dtype=DType(weight_dtype))
    p = LayoutParams(row_block=tokens, stream_block=1,
                     plans=tuple(sorted((f"mlp.{k}", parse_plan(v)) for k, v in plans.items())))
    return g, p


@pytest.mark.parametrize("plans", [
    {"fc1": "2x3x2/4x3 gathered", "fc2": "3x2x1 gathered"},   # weights stored once, gathered per use
    {"fc1": "2x3x2/4x3", "fc2": "2x2x3 streamed"},            # partials reduced one per epoch
    {"fc1": "2x3x2/4x3 rows-fast", "fc2": "3x2x2 gathered rows-fast"},   # row partitions fast over the tiles
    {"fc1": "1x3x2", "fc2": "1x1x4 batched2"},                # two per epoch: a full epoch, then one
    {"fc1": "2x3x2/4x3", "fc2": "1x2x3"},          # result by rows; uneven column shards (47 = 16 + 16 + 15)
    {"fc1": "3x2x1", "fc2": "2x2x2/2x4"},          # result by columns of each cell
    {"fc1": "1x1x1", "fc2": "5x1x1"},              # one cell; one row per tile
    {"fc1": "2x3x2/4x3 standard swapped", "fc2": "2x2x3 gathered swapped streamed"},   # transposed kernels
])
def test_every_plan_family_schedules_and_checks(plans) -> None:
    g, p = _tiny(plans)
    s = schedule(g, p, IPU, tiles=16)
    verify_schedule(s, IPU)
    c = toolkit.compile(g, options={"plans": plans, "tiles": 16, "row_block": 5, "stream_block": 1,
                                    "simulate": False, "check": True})
    assert c.check.passed, c.check.message
    assert c.layout.chosen.plans == p.plans


def test_a_staging_object_too_small_for_its_words_is_a_bug_in_us() -> None:
    g, p = _tiny({"fc1": "2x3x2/4x3", "fc2": "1x2x3"})
    s = schedule(g, p, IPU, tiles=16)
    staged = s.transfers.filter(pl.col("size_bytes") % 4 != 0)["staging_object"]
    assert staged.len(), "the case needs transfers of an odd number of half-words"
    shrunk = s.objects.with_columns(pl.when(pl.col("object_id") == staged[0]).then(pl.col("size_bytes") - 2)
                                    .otherwise(pl.col("size_bytes")).alias("size_bytes"))
    with pytest.raises(InvalidIRError, match=r"staging object smaller than the words it receives"):
        verify_schedule(dataclasses.replace(s, objects=shrunk), IPU)


@settings(max_examples=12, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 3), st.booleans(), st.integers(3, 9), st.booleans(), st.booleans(), st.integers(0, 2))
def test_random_pins_on_random_mlps_schedule_and_check(m1, n1, k1, m2, n2, k2, by_rows, tokens, g1, g2,
                                                       stage) -> None:
    k1 = min(k1, 2)   # 32-wide inner: at most two 16-deep shards
    fc1 = f"{m1}x{n1}x{k1}" + (f"/{m1 * k1}x{n1}" if by_rows and k1 > 1 and tokens // m1 >= k1 else "")
    plans = {"fc1": fc1 + (" gathered" if g1 and m1 > 1 else ""),
             "fc2": f"{m2}x{n2}x{k2}" + (" gathered" if g2 and m2 > 1 else "")
             + ("" if not 0 < stage < k2 - 1 else " streamed" if stage == 1 else f" batched{stage}")
             + (" rows-fast" if by_rows else "")}
    g, p = _tiny(plans, tokens=tokens, hidden=40, weight_dtype="f16")
    verify_schedule(schedule(g, p, IPU, tiles=64), IPU)
    c = toolkit.compile(g, options={"plans": plans, "tiles": 64, "row_block": tokens, "stream_block": 1,
                                    "simulate": False, "check": True, "placement_time_limit": 1.0})
    assert c.check.passed, (plans, c.check.message)


def test_the_search_offers_per_op_chains_and_keeps_the_typed_plan() -> None:
    r = toolkit.compile("mlp-single-b1", options={"simulate": False}).layout
    per_op = r.op_candidates
    assert set(per_op["op"]) == {"mlp.fc1", "mlp.fc2"} and per_op.height > 1000
    assert per_op["feasible"].any() and (~per_op["feasible"]).any()
    bad = per_op.filter(~pl.col("feasible"))
    assert bad["reject_reason"].null_count() == 0 and bad["reject_reason"].str.contains("needs .* B per tile").all()
    assert per_op.filter(pl.col("feasible"))["reject_reason"].null_count() == per_op["feasible"].sum()
    assert per_op.filter(pl.col("chosen_in").list.len() > 0).height >= 2
    chains = r.candidates.filter(pl.col("plans").is_not_null())
    assert chains.height > 0 and chains["feasible"].any()
    chosen = r.candidates.filter(pl.col("chosen")).row(0, named=True)
    assert r.params[chosen["candidate_id"]] == r.chosen   # the typed value, never parsed back from the row
    if chosen["plans"] is not None:
        assert all(f"{n.rsplit('.', 1)[1]}={g.label()}" in chosen["plans"] for n, g in r.chosen.plans)
    # one column per GEMM, holding the typed plan's label (null where the op follows the global grid)
    for cid in chains["candidate_id"].head(50).to_list():
        row = r.candidates.filter(pl.col("candidate_id") == cid).row(0, named=True)
        assert {row["plan_fc1"], row["plan_fc2"]} == {g.label() for _, g in r.params[cid].plans}
    assert r.candidates.filter(pl.col("plans").is_null())["plan_fc1"].null_count() == \
        r.candidates.filter(pl.col("plans").is_null()).height
    # a grid knob pinned: the grid decides every linear (no per-op chains)
    grid = toolkit.compile("mlp-single-b1", options={"inner_split": 2, "simulate": False}).layout
    assert grid.candidates["plans"].null_count() == grid.candidates.height and grid.chosen.inner_split == 2
    assert all(not p.plans for p in grid.params.values())


def test_a_pinned_row_block_fixes_every_plans_local_rows() -> None:
    """row_block stays a first-class knob: plans keep being searched, each with m = ceil(rows / row_block)."""
    cycles = {}
    for rb in (18, 36):
        r = toolkit.compile("mlp-single-b1", options={"row_block": rb, "simulate": False})
        lay = r.layout
        assert lay.chosen.row_block == rb
        chained = [p for p in lay.params.values() if p.plans]
        assert chained and all(g.m == -(-729 // rb) for p in chained for _, g in p.plans)
        assert set(lay.op_candidates["m"]) == {-(-729 // rb)}
        cycles[rb] = (r.lowered_cycles("compute"), int(r.summary()["lowered_launches"].item()))
    # more, shorter launches cost more compute (the whole program may still win on exchange: 117,878 against
    # 118,324 lowered when this was written, with 17,144 against 24,829 exchange cycles)
    assert cycles[18][1] > cycles[36][1] and cycles[18][0] > cycles[36][0]


@pytest.mark.slow
def test_the_historical_fp16_plan_compiles_places_and_checks() -> None:
    c = toolkit.compile("mlp-single-b1", options={"weight_dtype": "f16", "check": True,
                                                  "plans": {"fc1": "4x92x4", "fc2": "4x24x15"}})
    assert c.placement.fits and c.check.passed, c.check.message
    fc1_id = c.graph.ops.filter(pl.col("name") == "mlp.fc1")["op_id"].item()
    fc1 = c.schedule.commands.filter((pl.col("op_id") == fc1_id) & pl.col("kernel").str.starts_with("amp"))
    assert fc1["tile"].n_unique() == 1472 and set(fc1["rows"]) == {182, 183} and set(fc1["inner"]) == {288}
    assert dict(c.layout.chosen.plans)["mlp.fc1"] == GemmPlan(m=4, n=92, k=4)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("plans", [
    {"scores": "3x2x1", "values": "2x1x3"},   # both products on grids: a gather into softmax rows, FP16 partials
    {"scores": "2x3x1"},                      # key-split scores, shared-row values reading gathered rows
    {"values": "3x1x2"},                      # shared-row scores, values on a grid
])
def test_attention_product_grids_schedule_and_check(fused, plans) -> None:
    from toolkit.graph.builders import attention_block
    g = attention_block(tokens=9, width=16, heads=2, batch=2, fused_qkv=fused)
    c = toolkit.compile(g, options={"plans": plans, "tiles": 32, "row_block": 4, "stream_block": 1, "check": True})
    assert c.check.passed, c.check.message
    names = {n.rsplit(".", 1)[-1]: p.label() for n, p in c.layout.chosen.plans}
    assert all(names[k] == v for k, v in plans.items())
    if "scores" in plans:   # the softmax gathers complete rows of the key-split scores
        sm = c.schedule.phases.filter((pl.col("name") == "attn.softmax") & (pl.col("kind") == "exchange"))
        assert sm.height == 1
        # on owners that fill the tiles whatever the query shards (the hardware's 1,472 shared-row owners):
        # 4 groups over 32 tiles, 8 owners each, 9 query rows cut 1-2 rows per owner
        soft = c.schedule.commands.filter(pl.col("kernel") == "softmax")
        assert soft["tile"].n_unique() == 32 and set(soft["rows"]) == {1, 2}


def test_attention_product_plans_have_their_own_shape() -> None:
    with pytest.raises(OptionError, match=r"an attention scores plan is query rows x key columns.*e.g. '8x11x1'"):
        toolkit.compile("attention-b1", options={"plans": {"scores": "8x11x2"}})
    with pytest.raises(OptionError, match=r"an attention values plan is .* e.g. '8x1x8'"):
        toolkit.compile("attention-b1", options={"plans": {"values": "8x2x8"}})


@pytest.mark.parametrize("mode", ["shared-rows", "qk-only", "pv-only", "independent"])
def test_attention_products_keeps_the_named_products_on_grids(mode) -> None:
    """Option attention_products (ipu-stack's --attention-products words): every candidate searched has exactly
    the products it names on grids, the chosen program too, and the emitted command says the same mode."""
    from toolkit.graph.builders import attention_block
    from toolkit.layout.ipu_stack import PRODUCT_MODES
    g = attention_block(tokens=9, width=16, heads=2, batch=2)
    c = toolkit.compile(g, options={"attention_products": mode, "tiles": 64, "simulate": False})
    want = next(on for on, m in PRODUCT_MODES.items() if m == mode)
    for p in c.layout.params.values():
        names = {n.rsplit(".", 1)[-1] for n, _ in p.plans}
        assert ("scores" in names, "values" in names) == want
    args, _ = c.layout.ipu_stack_args()
    assert args[args.index("--attention-products") + 1] == mode
    assert c.layout.candidates.height > 1   # a search, not one program


def test_attention_products_refuses_what_it_cannot_honour() -> None:
    with pytest.raises(OptionError, match=r"attention_products='rows'.*must be one of") as e:
        toolkit.compile("attention-b1", options={"attention_products": "rows"})
    assert (e.value.field, e.value.value) == ("attention_products", "rows")
    with pytest.raises(OptionError, match=r"keeps the scores products on the shared query rows.*choose 'qk-only'"):
        toolkit.compile("attention-b1", options={"attention_products": "shared-rows",
                                                 "plans": {"scores": "8x11x1"}})
    with pytest.raises(OptionError, match=r"plan search that would choose them is off"):
        toolkit.compile("attention-b1", options={"attention_products": "independent", "plan_search": False})


@settings(max_examples=10, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.booleans(), st.booleans(),
       st.integers(5, 11))
def test_random_attention_grids_schedule_and_check(sm, sn, vm, vk, fused, scores_on_grid, tokens) -> None:
    from toolkit.graph.builders import attention_block
    g = attention_block(tokens=tokens, width=16, heads=2, batch=1, fused_qkv=fused)
    plans = {"values": f"{vm}x1x{vk}"}
    if scores_on_grid:
        plans["scores"] = f"{sm}x{sn}x1"
    c = toolkit.compile(g, options={"plans": plans, "tiles": 24, "row_block": 4, "stream_block": 1, "check": True,
                                    "simulate": False, "placement_time_limit": 1.0})
    assert c.check.passed, (plans, c.check.message)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 9), st.integers(1, 3), st.integers(0, 3))
def test_the_label_column_writes_what_gemm_plan_label_writes(m, n, k, rows, cols) -> None:
    from toolkit.layout.gemm_search import plan_labels
    if rows * max(cols, 1) > k or (cols == 0 and rows != 1):   # no result grid: both counts are the default
        return
    for store in ("resident", "gathered") if m > 1 else ("resident",):
        for staging in range(min(k - 1, 3)):
            for order, memory, orientation in (("columns", "", "normal"), ("rows", "standard", "swapped"),
                                               ("columns", "interleaved", "swapped")):
                f = pl.DataFrame({"m": [m], "n": [n], "k": [k], "result_rows": [rows], "result_cols": [cols],
                                  "weights": [store], "staging": [staging], "order": [order], "memory": [memory],
                                  "orientation": [orientation]})
                assert f.select(plan_labels())["plan"].item() == GemmPlan(
                    m=m, n=n, k=k, result_rows=rows, result_cols=cols, weights=store, staging=staging,
                    order=order, memory=memory, orientation=orientation).label()


def test_gathered_weights_are_read_per_repeat_instance() -> None:
    """A repeated block gathers each instance's weights from the iterated store (address + i x stride): the
    transfers read iterated objects, and the functional check (which compares every weight read with that
    instance's tensor) passes."""
    from toolkit.graph.builders import mlp_block, repeat
    g = repeat(mlp_block(tokens=6, width=32, hidden=40), 3)
    plans = {"fc1": "3x2x2/6x2 gathered", "fc2": "2x2x1 gathered"}
    c = toolkit.compile(g, options={"plans": plans, "tiles": 24, "row_block": 6, "stream_block": 1,
                                    "simulate": False, "check": True, "placement_time_limit": 1.0})
    assert c.check.passed, c.check.message
    iterated = c.schedule.objects.filter(pl.col("repeat_count") > 1)["object_id"]
    assert c.schedule.transfers.filter(pl.col("src_object").is_in(iterated.implode())).height > 0
    per_tile = c.schedule.objects.filter((pl.col("kind") == "weight") & (pl.col("name").str.contains("fc1")))
    assert per_tile.group_by("tile").len()["len"].max() <= 2   # one piece of the weight, one of the bias


@pytest.mark.parametrize("fc1", ["3x2x2/6x2", "4x3x1", "2x1x3"])
def test_gathered_weight_homes_are_not_the_blocks_own_consumers(fc1) -> None:
    """ipu-stack keeps gathered (compact) weight homes on a grid of their own, so a tile that reads a block
    receives all of it (MLP_LAYOUT_ALTERNATIVES.md: the fc1 gather, 7,048 cycles, is about one whole 288 x 48
    block per tile): every reader receives its whole block, and every tile still holds at most one piece."""
    from toolkit.graph.builders import mlp_block
    g = mlp_block(tokens=12, width=32, hidden=48)
    c = toolkit.compile(g, options={"plans": {"fc1": f"{fc1} gathered", "fc2": "1x1x1"}, "tiles": 24,
                                    "row_block": 12, "simulate": False, "check": True,
                                    "placement_time_limit": 1.0})
    assert c.check.passed, c.check.message
    m, n, k = (int(v) for v in fc1.split("/")[0].split("x"))
    homes = c.schedule.objects.filter((pl.col("kind") == "weight") & (pl.col("name") == "mlp.fc1.weight"))
    assert homes.group_by("tile").len()["len"].max() == 1
    moved = c.schedule.transfers.filter(pl.col("src_object").is_in(homes["object_id"].implode()))
    received = moved.group_by("destination").agg(pl.col("size_bytes").sum())
    assert received.height == m * n * k
    # each of a block's m readers receives all of it: m copies of the whole weight move, not m - 1
    assert received["size_bytes"].sum() == m * homes["size_bytes"].sum()


@pytest.mark.parametrize(("fc2", "epochs"), [("2x2x4", 1), ("2x2x4 batched2", 2), ("2x2x4 streamed", 3)])
def test_a_staged_reduction_runs_one_epoch_per_batch(fc2, epochs) -> None:
    """Each epoch is a sync, an exchange and a reduction; later epochs add to the running sum (one more input)."""
    g, p = _tiny({"fc1": "1x1x1", "fc2": fc2})
    s = schedule(g, p, IPU, tiles=16)
    verify_schedule(s, IPU)
    fc2_id = int(g.ops.filter(pl.col("name") == "mlp.fc2")["op_id"].item())
    red = s.commands.filter((pl.col("op_id") == fc2_id) & (pl.col("kernel") == "reduce"))
    assert red["phase"].n_unique() == epochs
    inputs = red.group_by("phase").agg(pl.col("inner").first()).sort("phase")["inner"].to_list()
    sizes = {1: [4], 2: [3, 2], 3: [2, 2, 2]}[epochs]   # own + N remote, then N remote and the running sum
    assert inputs == sizes
    # the receive buffer of one epoch holds at most that epoch's partials: 4, 3 or 2 slices
    buffers = s.objects.filter(pl.col("name") == "mlp.fc2.out.reduce")
    slices = {1: 4, 2: 3, 3: 2}[epochs]
    per_slice = s.objects.filter(pl.col("name") == "mlp.fc2.out.partials")["size_bytes"].max()
    assert buffers.height and buffers["size_bytes"].max() <= slices * per_slice


def test_rows_fast_lays_row_partitions_on_consecutive_tiles() -> None:
    """columns-fast: a row partition's column cells side by side; rows-fast: a column's row partitions."""
    g, cols_fast = _tiny({"fc1": "2x3x1", "fc2": "1x1x1"})
    _, rows_fast = _tiny({"fc1": "2x3x1 rows-fast", "fc2": "1x1x1"})
    tiles = {}
    for name, p in (("columns", cols_fast), ("rows", rows_fast)):
        s = schedule(g, p, IPU, tiles=16)
        fc1 = int(g.ops.filter(pl.col("name") == "mlp.fc1")["op_id"].item())
        cmd = s.commands.filter((pl.col("op_id") == fc1) & pl.col("kernel").str.starts_with("amp"))
        tiles[name] = cmd.sort("tile").select("tile", "rows", "cols").rows()
    assert tiles["columns"] != tiles["rows"]
    assert sorted(t for t, *_ in tiles["columns"]) == sorted(t for t, *_ in tiles["rows"])
