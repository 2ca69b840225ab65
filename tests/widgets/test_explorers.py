from __future__ import annotations

import polars as pl
import pytest
from altair.jupyter.jupyter_chart import PointSelection

import toolkit
from toolkit.errors import InfeasibleError, OptionError
from toolkit.profile import synthetic_profile
from toolkit.widgets import LayoutExplorer, ProfileExplorer, SramExplorer, compare_layouts, pin_label


@pytest.fixture(scope="module")
def explorer() -> LayoutExplorer:
    return LayoutExplorer("mlp-small-repeat")


def test_layout_explorer_starts_on_the_searched_choice(explorer, small):
    assert explorer.row_block.value == "auto"                  # every control on auto: the searched program
    assert explorer.current_options().row_block is None
    assert explorer.compilation.summary()["lowered_cycles"].item() == small.lowered_cycles()
    spec = explorer.pareto_chart.spec
    assert spec == explorer.pareto_chart.chart.to_dict()           # what the browser receives
    assert spec["title"][-1].startswith(f"showing row_block={small.layout.chosen.row_block}")
    assert "searched" in explorer.table.value


def test_row_block_slider_recompiles_and_redraws(explorer):
    before = explorer.pareto_chart.chart.to_dict()
    before_tradeoff = explorer.tradeoff_chart.chart.to_dict()
    explorer.row_block.value = 36
    after = explorer.pareto_chart.chart.to_dict()
    assert after != before
    assert after["title"][1].startswith("chosen: row_block=36 ")
    assert explorer.compilation.layout.chosen.row_block == 36
    assert explorer.compilation.options.row_block == 36
    tradeoff = explorer.tradeoff_chart.chart.to_dict()
    assert tradeoff != before_tradeoff
    points = tradeoff["datasets"][tradeoff["hconcat"][0]["data"]["name"]]
    # the trade-off is drawn over the rows the layouts really run: the pinned row block bounds every op's rows
    chosen_rows = explorer.compilation.summary()["local_rows"].item()
    assert [p["local_rows"] for p in points if p["chosen"]] == [chosen_rows] and chosen_rows <= 36
    table = explorer.compared()
    assert table["layout"].to_list()[:2] == ["row_block=36", "searched"]
    assert table.filter(table["layout"] == "row_block=36")["row_block"].item() == 36


def test_layout_controls_pin_the_compile(explorer):
    explorer.row_block.value = 36
    shards = [v for _, v in explorer.row_shard.options if v != "auto"]
    assert shards and explorer.row_shard.options[0] == ("auto", "auto")
    explorer.inner_split.value = 2
    explorer.weight_class.value = "standard"
    chosen = explorer.compilation.layout.chosen
    assert (chosen.inner_split, chosen.weight_class) == (2, "standard")
    assert "row_block=36, inner_split=2, weight_class=standard" in explorer.status.value
    assert explorer.fused_qkv.disabled                               # an MLP has no QKV to fuse
    cand = explorer.candidates
    assert set(cand["weight_class"].unique()) == {"standard"}
    assert cand["row_block"].n_unique() > 1                          # every row block, for the slider
    assert cand["chosen"].sum() == 1
    explorer.weight_class.value = "auto"
    explorer.inner_split.value = "auto"
    assert explorer.current_options().inner_split is None


def test_infeasible_pins_show_an_error_not_a_crash(explorer, monkeypatch):
    good = explorer.pareto_chart.chart.to_dict()

    def no_fit(*_args, **_kwargs):
        raise InfeasibleError("no layout candidate fits (3 tried)")

    monkeypatch.setattr(toolkit.widgets.layout, "compile", no_fit)
    explorer.inner_split.value = 16
    assert "color:firebrick" in explorer.status.value
    assert "inner_split=16: no layout candidate fits (3 tried)" in explorer.status.value
    assert explorer.pareto_chart.chart.to_dict() == good              # the last good chart stays
    monkeypatch.undo()
    explorer.inner_split.value = "auto"
    assert "firebrick" not in explorer.status.value


def test_layout_explorer_rejects_unknown_pins():
    with pytest.raises(OptionError, match=r"unknown option 'row_blok'; did you mean 'row_block'\?"):
        LayoutExplorer("mlp-small-repeat", row_blok=18)


def test_the_explorer_shows_the_constraint_lines_and_takes_pasted_ones(explorer):
    shown = explorer.constraint_lines.value.splitlines()
    assert shown and all(line.count(":") == 7 for line in shown)
    fc2 = next(line for line in shown if line.startswith("2:"))
    explorer.constraint_lines.value = fc2   # pasted: pins fc2 by ipu-stack's number, the program says it back
    explorer.apply_lines.click()
    assert ("#", fc2) in explorer.current_options().plans
    assert fc2 in explorer.constraint_lines.value.splitlines()
    explorer.constraint_lines.value = ""
    explorer.apply_lines.click()
    assert explorer.current_options().plans == ()


def test_compare_layouts_side_by_side(small):
    table = compare_layouts({"a": small, "b": small})
    assert table.columns[:4] == ["layout", "lowered_cycles", "simulated_cycles", "vs_hardware"]
    assert table["lowered_cycles"][0] == small.lowered_cycles()
    assert table["layout"].to_list() == ["a", "b"]
    assert compare_layouts([small])["layout"].to_list() == [pin_label(small.options)] == ["searched"]
    with pytest.raises(OptionError, match="compilations is empty"):
        compare_layouts([])


def test_sram_explorer_tile_picker(small):
    ex = SramExplorer(small)
    busiest = int(ex.peaks["tile"][0])
    assert ex.tile.value == busiest
    assert ex.map_chart.chart.to_dict()["title"].startswith(f"tile {busiest}:")
    other = int(ex.peaks["tile"][1])
    ex.busiest.value = other
    assert ex.tile.value == other
    assert ex.map_chart.chart.to_dict()["title"].startswith(f"tile {other}:")
    assert ex.breakdown_chart.chart.to_dict()["title"].startswith(f"tile {other} peaks at event")
    assert ex.over_time_chart.chart.to_dict()["title"] == f"tile {other}: live bytes per event"
    ex.tile.value = busiest   # the slider moves the list too: it never shows a stale pick
    assert ex.busiest.value == busiest
    unlisted = next(t for t in range(small.target.tiles) if t not in set(ex.peaks["tile"].head(12).to_list()))
    ex.tile.value = unlisted
    assert ex.busiest.value == -1 and ex.tile.value == unlisted
    ex.color.value = "class"
    assert ex.map_chart.chart.to_dict()["layer"][0]["encoding"]["color"]["field"] == "class"


def test_sram_explorer_follows_a_heatmap_click(small):
    ex = SramExplorer(small)
    assert "picked_tile" in ex.heatmap.selections.trait_names()
    tile = int(ex.peaks["tile"][2])
    ex.heatmap.selections._set_value(
        "picked_tile", PointSelection(name="picked_tile", value=[{"tile": tile}], store=[]))
    assert ex.tile.value == tile


def test_sram_explorer_empty_tile(small):
    idle = int(small.placement.occupancy["tile"].max()) + 1
    ex = SramExplorer(small, tile=idle)
    assert ex.breakdown_chart.chart is None and ex.over_time_chart.chart is None
    assert ex.status.value == f"tile {idle} holds no objects: nothing is live on it"


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"tile": 1472}, r"tile=1472 is not a tile of ipu21 \(0..1471\)"),
    ({"color": "size"}, r"color='size' is not a memory-map colouring"),
])
def test_sram_explorer_bad_input(small, kwargs, match):
    with pytest.raises(OptionError, match=match):
        SramExplorer(small, **kwargs)


def test_profile_explorer_range_and_crop():
    ex = ProfileExplorer(synthetic_profile(tiles=40, samples_per_tile=13, seed=3), tiles=8)
    spec = ex.timeline_chart.chart.to_dict()
    tiles = {r["tile"] for r in spec["datasets"][spec["data"]["name"]]}
    assert tiles == set(range(8))
    ex.tiles.value = (10, 13)
    spec = ex.timeline_chart.chart.to_dict()
    assert {r["tile"] for r in spec["datasets"][spec["data"]["name"]]} == {10, 11, 12, 13}
    assert spec["title"] == "tiles 10..13, cropped"
    cropped = ex.crop.cropped_cycles
    ex.shared_clock.value = True
    assert ex.timeline_chart.chart.to_dict()["title"] == "tiles 10..13, shared clock"
    assert ex.crop.cropped_cycles >= cropped
    assert "shared clock" in ex.status.value
    ex.by.value = "kernel"
    assert ex.bars_chart.chart.to_dict()["title"] == (
        "busy cycles (wall clock in which it runs on any tile) per kernel (tiles 10..13, shared clock)")
    ex.color.value = "phase"
    assert ex.timeline_chart.chart.to_dict()["encoding"]["color"]["field"] == "phase"
    ex.color.value = "category"     # the renderer's categories: it broke the explorer ("needs columns")
    assert ex.timeline_chart.chart.to_dict()["encoding"]["color"]["field"] == "category"
    assert "firebrick" not in ex.status.value
    ex.tiles.value = (0, 3)         # and every other control still works
    assert ex.timeline_chart.chart.to_dict()["title"] == "tiles 0..3, shared clock"


def test_profile_explorer_too_many_samples_is_reported():
    ex = ProfileExplorer(synthetic_profile(tiles=40, samples_per_tile=200, seed=1), tiles=4)
    good = ex.timeline_chart.chart.to_dict()
    ex.tiles.value = (0, 39)
    assert "max_rows=5000" in ex.status.value
    assert ex.timeline_chart.chart.to_dict() == good


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    ((None,), {}, r"profile must be a toolkit.profile.Profile, got NoneType"),
    ((synthetic_profile(tiles=2),), {"tiles": 0}, r"tiles=0 must be a positive number of tiles"),
    ((synthetic_profile(tiles=2),), {"color": "x"}, r"color='x' is not a sample column"),
    ((synthetic_profile(tiles=2),), {"by": "x"}, r"by='x' is not a profile grouping"),
])
def test_profile_explorer_bad_input(args, kwargs, match):
    with pytest.raises(OptionError, match=match):
        ProfileExplorer(*args, **kwargs)


def test_setup_rejects_bad_max_rows():
    with pytest.raises(OptionError, match=r"max_rows=0 must be a positive number of rows"):
        toolkit.widgets.setup(max_rows=0)


def test_layout_explorer_pins_set_the_controls():
    ex = LayoutExplorer("mlp-small-repeat", row_block=36, inner_split=2, weight_class="standard")
    assert (ex.row_block.value, ex.inner_split.value, ex.weight_class.value, ex.row_shard.value) == (
        36, 2, "standard", "auto")
    opts = ex.current_options()
    assert (opts.row_block, opts.inner_split, opts.weight_class, opts.row_shard) == (36, 2, "standard", None)
    assert ex.compared()["layout"].to_list() == ["row_block=36, inner_split=2, weight_class=standard"]


def test_phase_bars_keep_numeric_phase_order():
    ex = ProfileExplorer(synthetic_profile(tiles=4, samples_per_tile=40, seed=2))
    order = ex.bars_chart.chart.to_dict()["encoding"]["y"]["sort"]
    phases = [int(label.split(" ")[0]) for label in order]   # "12 op3 compute": the phase, then what it is
    assert phases == sorted(phases) and 12 in phases


def test_a_setting_seen_before_redraws_from_its_cached_view(explorer):
    start = explorer.row_block.value
    one, two = [v for _, v in explorer.row_block.options if v not in (start, "auto")][:2]
    explorer.row_block.value = one
    first = explorer.pareto_chart.chart
    explorer.row_block.value = two
    assert explorer.pareto_chart.chart is not first
    explorer.row_block.value = one
    assert explorer.pareto_chart.chart is first          # the same chart object: its widget skips the compile
    assert explorer.compared()["layout"].to_list()[:2] == [f"row_block={one}", f"row_block={two}"]


def test_chart_widget_compiles_each_chart_once(monkeypatch):
    """With VegaFusion, a chart assigned again reuses its compiled state and spec; a new chart compiles."""
    import altair as alt
    import polars as pl

    from toolkit.widgets.render import ChartWidget, chart_widget
    alt.data_transformers.enable("vegafusion")
    compiles = []
    original = alt.JupyterChart._init_with_vegafusion
    monkeypatch.setattr(alt.JupyterChart, "_init_with_vegafusion",
                        lambda self, tz: (compiles.append(self.chart), original(self, tz))[1])
    a = alt.Chart(pl.DataFrame({"x": [1, 2, 3]})).mark_point().encode(x="x:Q")
    b = alt.Chart(pl.DataFrame({"x": [4, 5]})).mark_point().encode(x="x:Q")
    widget = chart_widget(None)
    assert isinstance(widget, ChartWidget)
    widget.local_tz = "UTC"
    widget.chart = a
    spec_a = widget.spec
    widget.chart = b
    assert widget.spec != spec_a
    widget.chart = a
    assert widget.spec == spec_a
    assert compiles == [a, b]


def test_every_explorer_chart_compiles_under_vegafusion(small):
    """The notebooks run VegaFusion (unit tests read Vega-Lite without it): every chart an explorer draws must
    compile there too (a one-element title list once failed only there)."""
    import altair as alt

    alt.data_transformers.enable("vegafusion")
    explorers = [LayoutExplorer("mlp-small-repeat"), SramExplorer(small),
                 ProfileExplorer(synthetic_profile(tiles=8, samples_per_tile=12, seed=1))]
    for ex in explorers:
        charts = [v for v in vars(ex).values() if isinstance(v, alt.JupyterChart)]
        assert charts
        for chart in charts:
            chart.local_tz = "UTC"   # as the front end reports it: the compile runs now
            assert chart.chart is None or chart.spec is not None
    explorers[0].row_block.value = next(v for _, v in explorers[0].row_block.options
                                        if v not in (explorers[0].row_block.value, "auto"))
    explorers[1].tile.value = int(explorers[1].peaks["tile"][3])
    explorers[2].shared_clock.value = True
    for ex in explorers:
        for chart in (v for v in vars(ex).values() if isinstance(v, alt.JupyterChart)):
            assert chart.chart is None or chart.spec is not None


def test_one_program_is_one_row_and_plans_say_their_local_rows():
    """Two settings that compile the same program are one row under both labels; a plan layout's status gives
    each op's local rows (the row block the plan runs), not the grid's row_block."""
    import dataclasses
    explorer = LayoutExplorer("mlp-small-repeat")   # its own: the test adds a setting to the history
    first = explorer.current_options()
    pinned = dataclasses.replace(first, row_block=explorer.compilation.layout.chosen.row_block)
    explorer._views[pinned] = explorer._view(first)   # as if pinning the searched row block compiled the same
    explorer._compiled[pinned] = explorer.compilation
    explorer._order.append(pinned)
    table = explorer.compared()
    assert table["layout"].to_list()[0] == f"{pin_label(pinned)} = {pin_label(first)}"
    assert table.height == len(explorer._order) - 1
    c = explorer.compilation
    if c.layout.chosen.plans:
        name, plan = c.layout.chosen.plans[0]
        rows = int(c.graph.ops.filter(c.graph.ops["name"] == name)["rows"].item())
        assert f"{name.rsplit('.', 1)[-1]} {-(-rows // plan.m)}" in explorer.status.value


def test_memory_classes_keep_their_palette_colour_in_every_view(small):
    """The memory map, the peak breakdown and any other chart colour a class alike (toolkit.viz.palette)."""
    from toolkit.viz.palette import color_of
    ex = SramExplorer(small, color="class")
    scales = [ex.map_chart.chart.to_dict()["layer"][0]["encoding"]["color"]["scale"],
              *(c["encoding"]["color"]["scale"] for c in ex.breakdown_chart.chart.to_dict()["hconcat"])]
    for scale in scales:
        assert scale["range"] == [color_of(v) for v in scale["domain"]]
        assert "interleaved" in scale["domain"] or "standard" in scale["domain"]


def test_an_empty_vs_hardware_always_says_why() -> None:
    from toolkit.widgets.layout import hardware_note
    some = pl.DataFrame({"vs_hardware": [0.91, None]})
    none = pl.DataFrame({"vs_hardware": [None, None]}, schema={"vs_hardware": pl.Float64})
    assert hardware_note(some, "mlp-single-b1").endswith("; empty: no hardware measurement of that program")
    assert hardware_note(none, "mlp-small-repeat") == \
        "vs hardware empty: no hardware measurement of mlp-small-repeat as compiled here"
