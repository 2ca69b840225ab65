"""The sweep Pareto chart, read through ``to_dict()``: the front, failed and unplaced points, colours, errors."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.errors import OptionError
from toolkit.sweep.rows import to_frame
from toolkit.viz import sweep_pareto
from toolkit.viz.palette import color_scale
from toolkit.viz.sweeps import WIDTH


def sweep_rows(points: list[tuple[int, int, bool]], *, errors: int = 0, row_blocks=(18, 36, None),
               classes=("interleaved", "standard")):
    """A sweep frame: one ok row per (peak bytes, cropped cycles, placed), then ``errors`` failed rows (a point
    that did not place has the screen's peak only, as a sweep records it)."""
    rows = [{"point_id": f"p{i}", "workload": "mlp-small-repeat", "batch": 1, "blocks": 3, "status": "ok",
             "peak_sram_bytes": x if placed else None, "screen_peak_bytes": x, "cropped_cycles": y,
             "lowered_cycles": y - 600, "placed": placed,
             "opt_row_block": row_blocks[i % len(row_blocks)], "opt_weight_class": classes[i % len(classes)],
             "fail_reason": None if placed else "over capacity"}
            for i, (x, y, placed) in enumerate(points)]
    rows += [{"point_id": f"e{i}", "workload": "mlp-small-repeat", "batch": 1, "blocks": 3, "status": "error",
              "error": "plan 4x16x4 for op 'mlp.fc1' needs 256 tiles"} for i in range(errors)]
    return to_frame(rows)


def layer_rows(spec: dict, layer: int) -> list[dict]:
    return spec["datasets"][spec["layer"][layer]["data"]["name"]]


def title_lines(spec: dict) -> list[str]:
    t = spec["title"]
    return [t] if isinstance(t, str) else t


def brute_front(points: list[tuple[int, int, bool]]) -> set[str]:
    placed = [(f"p{i}", x, y) for i, (x, y, ok) in enumerate(points) if ok]
    return {p for p, x, y in placed
            if not any(a <= x and b <= y and (a < x or b < y) for _, a, b in placed)}


POINTS = st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6), st.booleans()), min_size=1, max_size=14)


@settings(max_examples=60, deadline=None)
@given(POINTS)
def test_front_is_exactly_the_non_dominated_placed_points(points):
    spec = sweep_pareto(sweep_rows(points)).to_dict()
    front = {r["point_id"] for r in layer_rows(spec, 2)}          # the rings
    assert front == brute_front(points)
    assert {r["point_id"] for r in layer_rows(spec, 0) if r["on_front"]} == front
    assert [r["peak_sram_bytes"] for r in layer_rows(spec, 1)] == sorted(r["peak_sram_bytes"]
                                                                        for r in layer_rows(spec, 1))


def test_failed_points_are_not_drawn_and_are_counted():
    points = [(100, 900, True), (200, 800, True), (300, 850, True)]
    spec = sweep_pareto(sweep_rows(points, errors=2)).to_dict()
    drawn = layer_rows(spec, 0)
    assert {r["point_id"] for r in drawn} == {"p0", "p1", "p2"}
    assert {r["point_id"] for r in layer_rows(spec, 2)} == {"p0", "p1"}   # p2 is beaten by p1 on both
    lines = title_lines(spec)
    assert lines[0] == "3 of 5 points drawn, 2 on the Pareto front of the placed points"
    assert "2 failed point(s) not drawn (the error column says why)" in lines


def test_unplaced_points_have_no_placed_peak_and_are_counted_not_drawn_on_it():
    spec = sweep_pareto(sweep_rows([(100, 500, False), (200, 800, True)])).to_dict()
    assert {r["point_id"] for r in layer_rows(spec, 0)} == {"p1"}
    assert ("1 compiled point(s) without a placed peak (did not place) not drawn; x='screen_peak_bytes' draws the "
            "screen's estimate") in " ".join(title_lines(spec))


def test_unplaced_points_are_crosses_kept_off_the_front():
    spec = sweep_pareto(sweep_rows([(100, 500, False), (200, 800, True)]), x="screen_peak_bytes").to_dict()
    assert {r["point_id"] for r in layer_rows(spec, 2)} == {"p1"}
    assert {r["point_id"]: r["fits"] for r in layer_rows(spec, 0)} == {"p0": "did not place", "p1": "placed"}
    shape = spec["layer"][0]["encoding"]["shape"]["scale"]
    assert shape == {"domain": ["placed", "did not place"], "range": ["circle", "cross"]}
    assert "1 point(s) did not place: crosses, kept off the front" in title_lines(spec)


def test_axes_say_what_each_number_is_and_the_width_is_fixed():
    spec = sweep_pareto(sweep_rows([(100, 900, True)]), y="lowered_cycles").to_dict()
    enc = spec["layer"][0]["encoding"]
    assert enc["x"]["title"] == "placed peak SRAM, bytes per tile"
    assert enc["y"]["title"] == "lowered estimate, cycles"
    default = sweep_pareto(sweep_rows([(100, 900, True)])).to_dict()["layer"][0]["encoding"]["y"]["title"]
    assert default == "simulated cycles, cropped as the hardware renderer crops"
    assert spec["width"] == WIDTH <= 640
    assert all(len(line) * 7 <= WIDTH for line in title_lines(spec))     # fit_title's wrap


def test_colour_by_a_numeric_grid_key_labels_the_searched_value():
    points = [(100, 900, True), (200, 800, True), (300, 700, True)]   # opt_row_block 18, 36, null
    spec = sweep_pareto(sweep_rows(points), color="opt_row_block").to_dict()
    color = spec["layer"][0]["encoding"]["color"]
    assert color["title"] == "opt_row_block" and color["type"] == "ordinal"
    assert color["scale"]["domain"] == ["18", "36", "searched"]      # by value, the search last; none blank
    assert {r["colour_value"] for r in layer_rows(spec, 0)} == {"18", "36", "searched"}


def test_colour_by_a_text_grid_key_uses_the_stable_palette():
    both = sweep_pareto(sweep_rows([(100, 900, True), (200, 800, True)]), color="opt_weight_class").to_dict()
    one = sweep_pareto(sweep_rows([(100, 900, True)], classes=("standard",)), color="opt_weight_class").to_dict()
    scale = both["layer"][0]["encoding"]["color"]["scale"]
    assert scale == color_scale(["interleaved", "standard"]).to_dict()
    colour = dict(zip(scale["domain"], scale["range"], strict=True))
    assert one["layer"][0]["encoding"]["color"]["scale"]["range"] == [colour["standard"]]   # same in every chart


def test_default_colour_is_the_first_grid_key_that_varies():
    spec = sweep_pareto(sweep_rows([(100, 900, True), (200, 800, True)], row_blocks=(24,))).to_dict()
    assert spec["layer"][0]["encoding"]["color"]["title"] == "opt_weight_class"


@pytest.mark.parametrize(("kwargs", "field", "match"), [
    ({"x": "peak_bytes"}, "x", r"x='peak_bytes' is not a numeric column of the sweep frame; use one of \["),
    ({"y": "workload"}, "y", "y='workload' is not a numeric column"),
    ({"color": "row_blok"}, "color", r"color='row_blok' is not a column of the sweep frame.*opt_row_block"),
    ({"color": "opt_row_blocks"}, "color", "color='opt_row_blocks' is not a column of the sweep frame to colour"),
])
def test_bad_column_names_raise_naming_the_field(kwargs, field, match):
    with pytest.raises(OptionError, match=match) as err:
        sweep_pareto(sweep_rows([(100, 900, True)]), **kwargs)
    assert err.value.field == field


def test_a_frame_that_is_not_a_sweep_is_refused():
    with pytest.raises(OptionError, match=r"frame lacks the sweep columns \['point_id', 'workload'"):
        sweep_pareto(pl.DataFrame({"status": ["ok"], "placed": [True]}))


def test_the_legend_lists_only_the_placement_classes_drawn() -> None:
    spec = sweep_pareto(sweep_rows([(100, 900, True), (200, 800, True)])).to_dict()
    shape = spec["layer"][0]["encoding"]["shape"]["scale"]
    assert shape == {"domain": ["placed"], "range": ["circle"]}
    assert spec["layer"][0]["encoding"]["x"]["scale"]["padding"] > 0   # edge points drawn whole
