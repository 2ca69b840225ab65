import polars as pl
import pytest

import toolkit
from toolkit.errors import OptionError


@pytest.fixture(scope="module")
def small():
    return toolkit.compile("mlp-small-repeat")


def test_compile_returns_every_stage(small):
    frames = small.frames()
    for name in ("graph.ops", "graph.tensors", "graph.repeats", "layout.candidates", "schedule.phases",
                 "schedule.commands", "schedule.transfers", "schedule.objects", "exchange.packets", "exchange.rows",
                 "exchange.summary", "tiles.steps", "package.objects", "package.summary", "package.images",
                 "placement.placement", "placement.occupancy", "simulate.samples"):
        assert isinstance(frames[name], pl.DataFrame), name
    s = small.summary()
    assert s.height == 1
    for col in ("lowered_cycles", "lowered_launches", "phases", "commands", "transfers", "objects", "peak_sram_bytes",
                "screen_peak_bytes"):
        assert s[col].item() > 0, col
    assert s["tiles_used"].item() <= 64


def test_progress_callback_sees_every_stage():
    seen = []
    toolkit.compile("mlp-small-repeat", options={"row_block": 36}, progress=lambda st, i, n: seen.append(st))
    assert seen == ["graph", "layout", "schedule", "exchange", "tiles", "package", "placement", "placement",
                    "simulate", "done"]


def test_row_block_36_to_18_moves_launches_and_cycles():
    a = toolkit.compile("mlp-single-b1", options={"row_block": 36}).summary()
    b = toolkit.compile("mlp-single-b1", options={"row_block": 18}).summary()
    assert b["lowered_launches"].item() > a["lowered_launches"].item()   # more microblocks per tile: more launches
    # the 235-cycle weight feed of every microblock is amortized over fewer rows
    assert b["lowered_compute_cycles"].item() > a["lowered_compute_cycles"].item()


def test_unknown_option_rejected_by_name():
    with pytest.raises(OptionError, match="unknown option 'rowblock'"):
        toolkit.compile("mlp-small-repeat", options={"rowblock": 18})


def test_tiles_are_sparse(small):
    steps = small.tiles.steps
    assert set(steps["kind"].unique()) <= {"compute", "exchange", "sync"}
    # a tile appears only in phases where it works: fewer rows than tiles x phases
    assert steps.height < small.schedule.phases.height * small.tiles.per_tile.height


def test_exchange_steps_meet_the_bound_on_unicast_phases(small):
    summary = small.exchange.summary
    unicast = summary.filter(pl.col("multicast_groups") == 0)
    assert (unicast["steps"] == unicast["lower_bound"]).all()


def test_finalist_is_placed(small):
    c = small.layout.candidates
    assert c.filter(pl.col("chosen"))["placed"].item() is True
    assert small.placement.fits and small.summary()["placed"].item()


def test_check_runs_when_asked():
    c = toolkit.compile("mlp-small-repeat", options={"row_block": 36, "check": True})
    assert c.check is not None and c.check.passed
    assert 0 < c.check.max_rel_error < 0.05 and c.check.max_abs_deviation <= c.check.max_abs_error
    assert "check.outputs" in c.frames() or any(k.startswith("check.") for k in c.frames())


@pytest.mark.slow
@pytest.mark.parametrize("workload", [n for n in toolkit.graph.PRESETS if n != "mlp-small-repeat"])
def test_every_preset_places(workload):
    """The whole pipeline places every preset (siglip-so400m: 27 layers of weights) and verify_placement passes."""
    c = toolkit.compile(workload, options={"simulate": False})
    assert c.placement.fits, c.placement.failures.head(3)
    assert c.placement.failures.height == 0
    chosen = c.layout.candidates.filter(pl.col("chosen"))
    assert chosen["placed"].item() is True
    placed = c.placement.placement
    assert placed["address"].null_count() == 0 and set(placed["tile"].unique()) >= set(c.tiles.per_tile["tile"])


def test_stages_take_earlier_results_and_a_compilation_stands_for_them(small):
    """simulate / roofline / check are typed functions of stage results; a Compilation may stand for them all."""
    from toolkit.check import check
    from toolkit.simulate import roofline, simulate
    direct = simulate(small.schedule, small.exchange, small.tiles, small.target)
    assert direct.samples.equals(simulate(small).samples)
    assert roofline(small.graph, small.schedule, small.target).equals(roofline(small))
    with pytest.raises(OptionError, match=r"missing \['tiles', 'target'\]"):
        simulate(small.schedule, small.exchange)
    with pytest.raises(OptionError, match=r"missing \['placement'\]"):
        check(small.graph, small.schedule)


def test_finalists_are_tried_in_order_until_one_places(small):
    from toolkit.layout.finalists import Finalist, choose_finalist, finalist_order
    order = finalist_order(small.layout)
    assert order[0] == int(small.layout.candidates.filter(pl.col("chosen"))["candidate_id"].item())
    tried = []

    def build(cid, places=frozenset(order[1:2])):
        tried.append(cid)
        return Finalist(f"built {cid}", cid in places, 1000 + len(tried))

    layout, built = choose_finalist(small.layout, build)
    assert tried == order[:2] and built == f"built {order[1]}"   # the first that places is kept
    cand = layout.candidates.filter(pl.col("candidate_id").is_in(order[:2])).sort("lowered_cycles")
    assert cand["placed"].to_list() == [False, True] and cand["chosen"].to_list() == [False, True]
    tried.clear()
    layout, built = choose_finalist(small.layout, lambda cid: build(cid, places=frozenset()))
    assert tried == order and built == f"built {order[0]}"   # none places: the first try is kept


TINY_MLP = {"tokens": 33, "width": 64, "hidden": 128, "compute_tiles": 16}


def _exchanges(c, op: str) -> int:
    p = c.schedule.phases
    return p.filter((pl.col("name") == op) & (pl.col("kind") == "exchange")).height


@pytest.mark.parametrize("host_layout", [True, False])
def test_a_host_placed_input_is_read_in_place_and_any_other_is_gathered(host_layout):
    """fc1 (one inner block: no partials) reads a host-placed input where the host wrote it, every column panel its
    own replica; the same graph with the input on the stream gathers it into fc1's panels first."""
    g = toolkit.build_graph("siglip-mlp-benchmark", host_layout=host_layout, **TINY_MLP)
    c = toolkit.compile(g, options={"plans": {"fc1": "2x4x1", "fc2": "2x2x1"}, "check": True})
    assert c.placement.fits and c.check.passed
    assert _exchanges(c, "mlp.fc1") == (0 if host_layout else 1)
    x = int(g.tensors.filter(pl.col("role") == "input")["tensor_id"].item())
    objs = c.schedule.objects.filter(pl.col("tensor_id") == x)
    assert objs.height == (2 * 4 if host_layout else objs.height) and objs["first"].min() == 0


def test_a_repeat_without_residual_carries_its_output_into_its_input():
    g = toolkit.build_graph("siglip-mlp-benchmark", blocks=3, **TINY_MLP)
    c = toolkit.compile(g, options={"check": True})
    assert c.placement.fits and c.check.passed and c.check.max_abs_error < 0.5
    last = c.schedule.phases.filter(pl.col("phase") == c.schedule.phases["phase"].max())
    assert last["block"].item() == "block" and last["name"].item() == "mlp.fc2"   # the carry ends the block


def test_a_host_placed_input_read_again_later_routes_from_its_replicas():
    """Without LayerNorm, Q/K/V read the host-placed input in place (one copy per column panel); the residual add
    reads it again on the stream, routed from those replicas (objects are per slot)."""
    g = toolkit.build_graph("attention-block-b1", tokens=33, width=64, heads=4, head_dim=16, compute_tiles=32,
                            host_layout=True, layernorm=False)
    c = toolkit.compile(g, options={"check": True})
    assert c.placement.fits and c.check.passed
    assert _exchanges(c, "attn.q") == 0 and _exchanges(c, "attn.residual") == 1


# -- the summary's names say whose figure each is ---------------------------------------------------------------
#: columns summary() shares with layout.candidates: each the same quantity in both (the chosen candidate's value is
#: the summary's); a new shared name must be added here, and so checked, or be renamed
SHARED_WITH_CANDIDATES = ("lowered_cycles", "placed", "tiles_used", "row_block", "local_rows", "row_shard",
                          "inner_split", "plans", "weight_class", "fused_qkv")


def test_the_summary_has_its_owner_s_schema_and_every_column_a_meaning(small):
    from toolkit.tables import SUMMARY_MEANINGS, SUMMARY_RENAMED, SUMMARY_SCHEMA
    s = small.summary()
    assert dict(s.schema) == SUMMARY_SCHEMA and set(SUMMARY_MEANINGS) == set(SUMMARY_SCHEMA)
    assert not set(SUMMARY_RENAMED) & set(s.columns)      # an old, ambiguous name is never reused
    assert s["lowered_cycles"].item() == small.lowered_cycles()
    assert sum(s[f"lowered_{k}_cycles"].item() for k in ("compute", "exchange", "sync")) == small.lowered_cycles()


@pytest.mark.parametrize("options", [None, {"row_block": 36, "simulate": False}])
def test_summary_and_candidates_never_share_a_name_with_two_meanings(small, options):
    """A column named in both summary() and layout.candidates holds the same quantity: the chosen candidate's
    value is the summary's. The screen's figures (est_cycles, launches, peak_live_bytes) differ from the lowered
    and placed ones, so the summary names those differently."""
    c = small if options is None else toolkit.compile("mlp-single-b1", options=options)
    s = c.summary().row(0, named=True)
    cand = c.layout.candidates
    chosen = cand.filter(pl.col("chosen")).row(0, named=True)
    shared = set(s) & set(cand.columns)
    assert shared == set(SHARED_WITH_CANDIDATES), shared ^ set(SHARED_WITH_CANDIDATES)
    assert {k: s[k] for k in shared} == {k: chosen[k] for k in shared}
    assert s["screen_peak_bytes"] == chosen["peak_live_bytes"]
    assert s["peak_sram_bytes"] == c.placement.occupancy["live_bytes"].max()


def test_the_peak_says_whose_it_is_when_placement_failed_or_left_no_occupancy(small):
    """No placed peak when placement did not place every object (its occupancy counts only the objects that
    placed) or produced no occupancy: null, never the screen's figure in its place; the screen's stays beside it."""
    import dataclasses

    from toolkit.tables import FAILURES_SCHEMA, OCCUPANCY_SCHEMA
    from toolkit.widgets.layout import peak_note
    failure = pl.DataFrame({"tile": [0], "event": [3], "live_bytes": [700_000], "capacity_bytes": [638_976],
                            "largest_objects": [[1]], "proven": [True], "reason": ["over capacity"]},
                           schema=FAILURES_SCHEMA)
    screen = small.layout.candidates.filter(pl.col("chosen"))["peak_live_bytes"].item()
    failed = dataclasses.replace(small, placement=dataclasses.replace(small.placement, failures=failure))
    empty = dataclasses.replace(small, placement=dataclasses.replace(
        small.placement, occupancy=pl.DataFrame(schema=OCCUPANCY_SCHEMA)))
    for c, placed, why in ((failed, False, "did not place every object"), (empty, True, "produced no occupancy")):
        s = c.summary().row(0, named=True)
        assert (s["placed"], s["peak_sram_bytes"], s["screen_peak_bytes"]) == (placed, None, screen)
        peaks = {r["kind"]: r for r in c.numbers().filter(pl.col("quantity") == "peak SRAM per tile").iter_rows(
            named=True)}
        assert peaks["placed"]["value"] is None and why in peaks["placed"]["source"]
        assert peaks["screen estimate"]["value"] == screen
        note = peak_note(s)
        assert "no placed peak" in note and f"(screen estimate {screen:,} B per tile)" in note
    s = small.summary().row(0, named=True)
    assert peak_note(s) == f"peak {s['peak_sram_bytes']:,} B per tile (placed)"
