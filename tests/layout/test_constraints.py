"""ipu-stack's constraint lines both ways: the codec, op numbers, errors by field, orientation, per-op memory
class, tile mappings, the emitted command, and every pinned plan its documents quote."""

from __future__ import annotations

import dataclasses
import re
import warnings

import numpy as np
import polars as pl
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import toolkit
from toolkit.errors import InfeasibleError, OptionError, ToolkitWarning
from toolkit.graph.builders import mlp_block
from toolkit.graph.presets import PRESETS
from toolkit.layout.constraints import constraint_plan, read_constraint, stored_weights, write_constraint
from toolkit.layout.cost import amp_cycles
from toolkit.layout.gemm import GemmPlan, balanced_bounds, parse_plan
from toolkit.layout.gemm_search import _check_fits
from toolkit.layout.ipu_stack import op_numbers, product_mode
from toolkit.layout.mapping import tile_permutation

IPU = toolkit.ipu21()
#: ipu-stack's benchmark presets (the workloads issue), or our graphs numbered the same way (their extra
#: LayerNorm, biases, residual add and output projection count nothing in ipu-stack's numbering)
MLP = "siglip-mlp-benchmark" if "siglip-mlp-benchmark" in PRESETS else "mlp-single-b1"
ATTN = "siglip-attention-benchmark" if "siglip-attention-benchmark" in PRESETS else "attention-b1"
H_UP = "0:4x92x4:4x1:48:interleaved:normal:complete:direct"
H_DOWN = "2:4x24x15:15x1:48:interleaved:normal:complete:direct"
S_DOWN = "2:4x24x15:15x1:48:standard:normal:complete:direct"


def _down(result: str = "15x1", reduction: str = "complete") -> str:
    return f"2:4x24x15:{result}:48:standard:normal:{reduction}:direct"


def _up(result: str = "4x1", reduction: str = "complete") -> str:
    return f"0:4x92x4:{result}:48:interleaved:normal:{reduction}:direct"


QKV = [f"{i}:10x46x3:1x1:16:interleaved:swapped:complete:direct" for i in range(3)]
#: every pinned plan ipu-stack's documents quote for the MLP and attention benchmarks (batch 1, F16), with its
#: source; lines are written the way the doc's scripts write them (scripts/mlp-layout-sweep.py Plan.constraint)
PINNED = [
    ("MLP_LAYOUT_SWEEP.md historical (188,196)", MLP, [H_UP, H_DOWN], None),
    ("MLP_LAYOUT_SWEEP.md down-22, down standard (186,630)", MLP, [H_UP, S_DOWN], None),
    ("MLP_LAYOUT_SWEEP.md up-15 5x135x2 (187,842)", MLP, ["0:5x135x2:2x1:32:interleaved:normal:complete:direct",
                                                         H_DOWN], None),
    ("MLP_LAYOUT_SWEEP.md default, down 3x18x27 standard (190,578)", MLP,
     [H_UP, "2:3x18x27:27x1:64:standard:normal:complete:direct"], None),
    ("MLP_LAYOUT_ALTERNATIVES.md control (175,140)", MLP, [_up(), _down()], None),
    *[(f"MLP_LAYOUT_ALTERNATIVES.md down result {r} ({c})", MLP, [_up(), _down(r)], None)
      for r, c in (("5x3", "173,442"), ("4x3", "176,652"), ("7x2", "177,558"), ("3x3", "179,214"))],
    ("MLP_LAYOUT_ALTERNATIVES.md up result 2x2 (179,274)", MLP, [_up("2x2"), _down()], None),
    ("MLP_LAYOUT_ALTERNATIVES.md up 2x2 and down 5x3 (177,570)", MLP, [_up("2x2"), _down("5x3")], None),
    *[(f"MLP_LAYOUT_ALTERNATIVES.md down batch-{n} ({c})", MLP, [_up(), _down(reduction=f"batch-{n}")], None)
      for n, c in ((7, "179,382"), (4, "190,800"), (2, "207,654"), (1, "235,032"))],
    *[(f"MLP_LAYOUT_ALTERNATIVES.md up batch-{n} ({c})", MLP, [_up(reduction=f"batch-{n}"), _down()], None)
      for n, c in ((2, "182,070"), (1, "188,214"))],
    ("MLP_LAYOUT_ALTERNATIVES.md mapping block-92-2 (174,132)", MLP, [_up(), _down()], "block-92-2"),
    ("MLP_LAYOUT_ALTERNATIVES.md mapping block-92-2, down 5x3 (172,158)", MLP, [_up(), _down("5x3")],
     "block-92-2"),
    ("MLP_LAYOUT_ALTERNATIVES.md global transpose 46 (one of 178,116 .. 189,816)", MLP, [_up(), _down()],
     "transpose-46"),
    ("QKV_PREPARATION.md Q/K/V 46x10x3 swapped (215,832 / 203,256)", ATTN, QKV, None),
    ("progress notes, multicast loopback: V 16x46x2 standard swapped (371,178)", ATTN,
     ["2:16x46x2:1x1:16:standard:swapped:complete:direct"], None),
]


def test_the_historical_lines_read_as_the_historical_plans() -> None:
    up, down = read_constraint(H_UP), read_constraint("--gemm-plan-constraint " + S_DOWN)
    # the K x 1 row split is the default result grid (ipu-stack's), written as none; an interleaved normal plan
    # with row partitions stores its weights once and gathers them, as ipu-stack builds it (stored_weights)
    assert constraint_plan(up, 729, 4304).label() == "4x92x4 gathered interleaved"
    assert constraint_plan(down, 729, 1152).label() == "4x24x15 standard"
    assert constraint_plan(up, 729, 4304).result_split(46, 182) == parse_plan("4x92x4/16x92").result_split(46, 182)
    assert parse_plan("4x92x4").result_split(46, 182) == (4, 1) and parse_plan("4x92x4 swapped").result_split(
        46, 182) == (1, 4)
    v = constraint_plan(read_constraint("2:16x46x2:1x1:16:standard:swapped:complete:direct"), 729, 1152)
    assert (v.m, v.n, v.k, v.orientation, v.result_split(25, 45)) == (46, 16, 2, "swapped", (1, 1))
    assert constraint_plan(read_constraint(_down(reduction="batch-7")), 729, 1152).staging == 7
    assert write_constraint(2, v, 729, 1152, "interleaved") == ("2:16x46x2:1x1:16:standard:swapped:complete:direct",
                                                                [])


_memory = st.sampled_from(["", "interleaved", "standard"])


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 64), st.integers(1, 64), st.integers(1, 16), st.integers(1, 4), st.integers(0, 4),
       st.integers(0, 6), _memory, st.sampled_from(["normal", "swapped"]), st.integers(16, 3000),
       st.integers(16, 5000))
def test_a_plan_survives_its_line(m, n, k, rr, rc, staging, memory, orientation, rows, cols) -> None:
    try:
        plan = GemmPlan(m=m, n=n, k=k, result_rows=rr, result_cols=rc, staging=staging, memory=memory,
                        orientation=orientation)
    except OptionError:
        assume(False)
    assume(m <= rows and n <= cols)
    built = stored_weights(memory or "interleaved", orientation, m)
    other = "gathered" if built == "resident" else "resident"
    if m > 1:   # the store ipu-stack does not build from the line is named as lost
        assert write_constraint(7, dataclasses.replace(plan, weights=other), rows, cols, "interleaved")[1][0] \
            .startswith(f"weights={other}")
    plan = dataclasses.replace(plan, weights=built)
    line, lost = write_constraint(7, plan, rows, cols, "interleaved")
    assert lost == []
    back = constraint_plan(read_constraint(line), rows, cols)
    size = (int(np.diff(balanced_bounds(cols, n)).min()), int(np.diff(balanced_bounds(rows, m)).min()))
    assert (back.m, back.n, back.k, back.staging, back.orientation, back.memory, back.weights) == (
        m, n, k, staging, orientation, memory or "interleaved", built)
    assert back.result_split(*size) == plan.result_split(*size)
    assert write_constraint(7, back, rows, cols, "standard")[0] == line   # the line is a fixed point
    assert parse_plan(plan.label()).label() == plan.label()               # and so is our own label


@pytest.mark.parametrize(("line", "field", "closest"), [
    ("0:4x92x4:4x1:48:interleved:normal:complete:direct", "MEMORY", "interleaved"),
    ("0:4x92x4:4x1:48:interleaved:swaped:complete:direct", "ORIENTATION", "swapped"),
    ("0:4x92x4:4x1:48:interleaved:normal:batched-2:direct", "REDUCTION", "batch-2"),
    ("0:4x92x4:4x1:48:interleaved:normal:batch-0:direct", "REDUCTION", "batch-1"),
    ("0:4x92x4:4x1:48:interleaved:normal:complete:match-remote", "LOCAL", "direct"),
    ("0:4x92:4x1:48:interleaved:normal:complete:direct", "RxCxK", "4x92x1"),
    ("0:4x0x4:4x1:48:interleaved:normal:complete:direct", "RxCxK", "4x1x4"),
    ("0:4x92x4:4x1x1:48:interleaved:normal:complete:direct", "RRxRC", "4x1"),
    ("x:4x92x4:4x1:48:interleaved:normal:complete:direct", "OP", "0"),
    ("0:4x92x4:4x1:0:interleaved:normal:complete:direct", "BLOCK", "16"),
])
def test_a_bad_field_is_refused_by_name_with_the_closest_legal_value(line, field, closest) -> None:
    with pytest.raises(OptionError, match=rf"field {re.escape(field)} is .* the closest legal value is "
                                          rf"'{re.escape(closest)}'") as err:
        read_constraint(line)
    assert err.value.field == f"plans.{field}"


@pytest.mark.parametrize(("line", "field", "match"), [
    ("0:4x92x4:4x1:47:interleaved:normal:complete:direct", "BLOCK", r"blocks of 48; the closest legal value is '48'"),
    ("0:4x92x4:5x1:48:interleaved:normal:complete:direct", "RRxRC", r"at most the k=4 .* value is '4x1'"),
    ("1:4x92x4:4x1:48:interleaved:normal:complete:direct", "OP",
     r"OP is 1, which is not a GEMM .* the closest legal value is 0 \(GEMMs: 0 \(mlp.fc1\), 2 \(mlp.fc2\)\)"),
    ("0:4x92x4:4x1:48:interleaved:normal:batch-3:direct", "REDUCTION", r"all of them at once"),
    ("0:4x92x4:4x1:48:interleaved:normal:complete", "plans", r"has 7 fields; ipu-stack's line has 8"),
])
def test_a_line_that_does_not_fit_the_graph_is_refused_by_field(line, field, match) -> None:
    with pytest.raises(OptionError, match=match) as err:
        toolkit.compile("mlp-single-b1", options={"plans": [line]})
    assert err.value.field == (field if field == "plans" else f"plans.{field}")


def test_ops_are_numbered_as_ipu_stack_numbers_them() -> None:
    def numbers(name: str) -> dict[int, str]:
        return {n: op["name"] for n, op in op_numbers(list(toolkit.build_graph(name).ops.iter_rows(named=True)))
                .items()}
    assert numbers("mlp-single-b1") == {0: "mlp.fc1", 2: "mlp.fc2"}   # gemm, gelu, gemm; the LayerNorm counts 0
    assert numbers("attention-b1") == {0: "attn.q", 1: "attn.k", 2: "attn.v"}   # the hardware's: no projection
    assert numbers("attention-block-b1") == {0: "attn.q", 1: "attn.k", 2: "attn.v", 7: "attn.proj"}
    assert numbers("attention-block-fused-b1") == {0: "attn.qkv", 8: "attn.proj"}   # gemm + three slices


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 10**12), st.integers(1, 10**12), st.integers(1, 10**6), st.integers(1, 1472))
def test_a_plan_that_does_not_fit_suggests_one_that_does(m, n, k, tiles) -> None:
    op = {"name": "mlp.fc1", "rows": 729, "cols": 4304, "inner": 1152}
    plan = GemmPlan(m=m, n=n, k=k)
    try:
        _check_fits(op, plan, tiles, "plans.fc1", plan.label())
    except InfeasibleError as exc:
        suggested = re.search(r"the closest that fits is (\d+)x(\d+)x(\d+)", str(exc))
        assert suggested, str(exc)
        _check_fits(op, GemmPlan(**dict(zip("mnk", map(int, suggested.groups()), strict=True))), tiles, "p", "p")


@pytest.mark.parametrize("text", ["4x8x2 batched0", "4x8x4 batched0", "4x8x4 batched00"])
def test_a_staging_of_no_partials_is_refused(text) -> None:
    with pytest.raises(OptionError, match=r"stages no partials per epoch; write 'batched<N>' with N >= 1"):
        parse_plan(text, op="mlp.fc1")


@pytest.mark.parametrize("row_block", [1, 2])
def test_a_row_block_no_plan_can_use_leaves_the_ops_on_the_grid(row_block) -> None:
    c = toolkit.compile("mlp-small-repeat", options={"row_block": row_block, "simulate": False})
    assert c.layout.chosen.row_block == row_block and c.placement.failures.height == 0


def _tiny(plans: dict, **options):
    g = mlp_block(tokens=9, width=32, hidden=48)
    return toolkit.compile(g, options={"plans": plans, "tiles": 32, "row_block": 9, "stream_block": 1,
                                       "simulate": False, "check": True, **options})


def test_a_swapped_plan_runs_the_transposed_kernel_with_the_panel_as_coefficient() -> None:
    c = _tiny({"fc1": "3x2x2 swapped", "fc2": "3x1x3 standard"})
    assert c.check.passed, c.check.message
    cmd = c.schedule.commands.join(c.schedule.phases.select("phase", "name"), on="phase")
    fc1 = cmd.filter((pl.col("name") == "mlp.fc1") & pl.col("kernel").str.starts_with("amp"))
    rows, cols, inner = (fc1[k].to_numpy() for k in ("rows", "cols", "inner"))
    # the F143 weights stream as the kernel's left panel; the FP16 activation, its coefficient, is what is cast
    want = amp_cycles(cols, rows, inner, IPU, weight_class="interleaved", dtype="f8", cast_right=True)[0]
    assert np.array_equal(fc1["est_cycles"].to_numpy(), want * fc1["groups"].to_numpy())
    fc2 = cmd.filter((pl.col("name") == "mlp.fc2") & pl.col("kernel").str.starts_with("amp"))
    assert set(fc2["weight_class"]) == {"standard"} and set(fc1["weight_class"]) == {"interleaved"}
    obj = c.schedule.objects
    w1 = obj.filter(pl.col("name").str.starts_with("mlp.fc1.w") & (pl.col("kind") == "weight"))
    assert set(w1["class"]) == {"standard"}   # swapped: the weights are the streamed operand


def test_the_search_finds_the_swapped_form_where_it_pays() -> None:
    """Few tokens against wide features (16 rows of 1152 -> 4304): the transposed kernel runs the features as
    AMP rows, so fc1's chosen plan is swapped (its 24 features a tile fill one 16-column panel where 16 tokens
    x 24 columns take two), and pinning the same grids unswapped prices the program dearer. (fc2's 13 output
    features a tile would run below one 16-row AMP block, no cheaper than its 16 tokens.)
    (On the full-size attention benchmark the exchange model prices the unswapped 5x72x4 below any
    swapped Q/K/V plan, so the search there keeps the normal form.)"""
    from toolkit.layout.search import search_layouts
    g = toolkit.build_graph(MLP, tokens=16)
    opts = {"weight_dtype": "f16"}
    r = search_layouts(g, IPU, toolkit.options.as_options(opts))
    chosen = dict(r.chosen.plans)
    linears = [n for n in chosen if n.endswith(("fc1", "fc2"))]
    assert linears and chosen["mlp.fc1"].swapped, {n: p.label() for n, p in chosen.items()}
    normal = {n.rsplit(".", 1)[-1]: chosen[n].label().replace(" swapped", "") for n in linears}
    pinned = search_layouts(g, IPU, toolkit.options.as_options({**opts, "plans": normal}))
    est = pl.col("est_cycles")
    assert r.candidates.filter(pl.col("chosen"))[0, "est_cycles"] < pinned.candidates.filter(pl.col("chosen")).select(
        est).item()


def test_mappings_are_data_and_move_every_tile() -> None:
    t = np.arange(1472)
    assert np.array_equal(tile_permutation("block-92-2", 1472), 92 * (t // 92) + 46 * (t % 2) + (t % 92) // 2)
    assert np.array_equal(tile_permutation("transpose-46", 1472), (t % 46) * 32 + t // 46)
    assert tile_permutation("identity", 1472) == ()
    with pytest.raises(OptionError, match=r"the group 90 does not divide 1472 tiles; the closest that does is 92"):
        tile_permutation("block-90-2", 1472)
    with pytest.raises(OptionError, match=r"must be a permutation of the 32 compute tiles"):
        tile_permutation([0] * 32, 32)
    perm = tuple(int(x) for x in np.random.default_rng(1).permutation(32))
    plain, mapped = _tiny({"fc1": "3x2x2"}), _tiny({"fc1": "3x2x2"}, tile_mapping=perm)
    assert mapped.check.passed, mapped.check.message
    moved = plain.schedule.commands["tile"].to_numpy()
    assert np.array_equal(np.asarray(perm)[moved], mapped.schedule.commands["tile"].to_numpy())


def test_the_emitted_command_runs_the_program_and_names_what_it_cannot_say() -> None:
    # a standard-class line's weights are resident in ipu-stack (materialized into interleaved compute storage)
    c = _tiny({"fc1": "3x2x2 gathered standard", "fc2": "3x1x3 swapped"})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        lines = c.layout.constraints()
    assert lines == ["0:3x2x2:2x1:32:standard:normal:complete:direct",       # 48 columns in 2: blocks of 32
                     "2:1x3x3:3x1:16:interleaved:swapped:complete:direct"]    # swapped: R splits the columns
    assert any(issubclass(w.category, ToolkitWarning) and "cannot say weights=gathered" in str(w.message)
               for w in seen)
    args, lost = c.layout.ipu_stack_args()
    assert args[:3] == ["ipu-trivial-test", "c600-init.ipucfg", "--workload"] and "--mlp-batch" in args
    assert [args[i + 1] for i, a in enumerate(args) if a == "--gemm-plan-constraint"] == lines
    assert any("LayerNorm" in w for w in lost) and any("gathered" in w for w in lost)


def test_the_cli_emits_the_command() -> None:
    from typer.testing import CliRunner

    from toolkit.cli import app
    out = CliRunner().invoke(app, ["compile", "mlp-small-repeat", "-q", "--emit", "ipu-stack",
                                   "-o", "simulate=false"])
    assert out.exit_code == 0, out.output
    assert "ipu-trivial-test c600-init.ipucfg --workload siglip-mlp-benchmark" in out.stdout
    assert "--mlp-blocks 3" in out.stdout and "--gemm-plan-constraint 0:" in out.stdout
    bad = CliRunner().invoke(app, ["compile", "mlp-small-repeat", "-q", "--emit", "poplar"])
    assert bad.exit_code == 2 and "use one of ['ipu-stack']" in bad.output


@pytest.mark.slow
@pytest.mark.parametrize(("source", "workload", "lines", "mapping"), PINNED, ids=[p[0] for p in PINNED])
def test_every_pinned_plan_of_the_docs_compiles_places_and_checks(source, workload, lines, mapping) -> None:
    """Full size (the so400m MLP and attention at batch 1, F16 weights as the benchmarks run)."""
    c = toolkit.compile(workload, options={"plans": lines, "weight_dtype": "f16", "tile_mapping": mapping,
                                           "check": True, "simulate": False})
    assert c.placement.failures.height == 0
    assert c.check.passed, (source, c.check.message)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ToolkitWarning)
        # the program says the lines it was given (batch-1, one remote partial per epoch, is written streamed)
        assert {line.replace(":batch-1:", ":streamed:") for line in lines} <= set(c.layout.constraints())


def _read_back(c) -> dict:
    """The options that compile ``c``'s chosen program again from its constraint lines: the lines, the other
    knobs of the layout, and by label the plans a line cannot carry (attention products, gathered weights)."""
    p = c.layout.chosen
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ToolkitWarning)
        lines = c.layout.constraints()
    numbers = op_numbers(list(c.layout.graph.ops.iter_rows(named=True)))
    written = {numbers[int(line.split(":")[0])]["name"] for line in lines}
    # a line says a weight store only as ipu-stack builds it (constraints.stored_weights): any other store is
    # carried by label, as the warning of constraints() says
    carried = [f"{name}={plan.label()}" for name, plan in p.plans if name not in written
               or plan.weights != stored_weights(plan.memory or p.weight_class or "interleaved", plan.orientation,
                                                 plan.m) or plan.order != "columns"]
    lines = [line for line in lines if numbers[int(line.split(":")[0])]["name"] not in
             {e.split("=")[0] for e in carried}]
    ops = list(c.layout.graph.ops.iter_rows(named=True))
    from toolkit.layout.applicability import Feature, graph_features
    has = graph_features(c.layout.graph)   # a knob of an op the graph does not have is refused, not carried
    out = {"plans": lines + carried, "row_block": p.row_block, "weight_class": p.weight_class}
    if Feature.STREAM in has:
        out["stream_block"] = p.stream_block or p.row_block
    if Feature.LAYERNORM in has:
        out["stream_weights"] = p.stream_weights
    if Feature.ATTENTION in has:
        out.update(fused_qkv=p.fused_qkv, attention_products=product_mode(ops, dict(p.plans)))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_round_trips_through_its_constraint_lines(preset) -> None:
    first = toolkit.compile(preset)
    lines = _read_back(first)
    again = toolkit.compile(preset, options=lines)
    # the lines are a fixed point (a result grid equal to the real compiler's default is written as the default,
    # so a label may read shorter), and they are the same program: cycles and every command
    assert _read_back(again) == lines
    assert again.profile.samples["end_cycle"].max() == first.profile.samples["end_cycle"].max()
    cols = ["phase", "tile", "kernel", "rows", "cols", "inner", "est_cycles"]   # the same program, command by command
    assert again.schedule.commands.select(cols).equals(first.schedule.commands.select(cols))


@pytest.mark.parametrize(("pins", "mode"), [({}, "shared-rows"), ({"scores": "2x2x1"}, "qk-only"),
                                            ({"values": "2x1x2"}, "pv-only"),
                                            ({"scores": "2x2x1", "values": "2x1x2"}, "independent")])
def test_the_command_names_the_attention_product_ownership(pins: dict, mode: str) -> None:
    from toolkit.graph import attention_block
    g = attention_block(tokens=16, width=32, heads=2, fused_qkv=False)
    names = {op.rsplit(".", 1)[-1]: op for op in g.ops["name"].to_list()}
    c = toolkit.compile(g, options={"tiles": 16, "fused_qkv": False, "simulate": False, "plan_search": False,
                                    "plans": {names[k]: v for k, v in pins.items()}})
    args, lost = c.layout.ipu_stack_args()
    at = args.index("--attention-products")
    assert args[at - 2:at + 2] == ["--attention-strategy", "materialized", "--attention-products", mode]
    assert any("chooses its attention product grids" in w for w in lost) == bool(pins)
