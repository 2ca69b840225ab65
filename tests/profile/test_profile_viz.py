"""Profile charts, tested as data through ``to_dict()``."""

from __future__ import annotations

import pytest

from toolkit.errors import OptionError
from toolkit.profile import Profile, compare, crop, query, synthetic_profile
from toolkit.viz.profile import compare_chart, phase_bars, timeline


def _values(spec: dict) -> list[dict]:
    return next(iter(spec["datasets"].values()))


def test_timeline_is_a_per_tile_gantt() -> None:
    p = synthetic_profile(6, 10, seed=1)
    spec = timeline(crop(p), tiles=3).to_dict()
    assert spec["mark"]["type"] == "bar"
    enc = spec["encoding"]
    assert (enc["x"]["field"], enc["x2"]["field"], enc["y"]["field"]) == (
        "start_offset_cycles", "end_offset_cycles", "tile")
    assert enc["color"]["field"] == "kind"
    rows = _values(spec)
    assert len(rows) == 30 and {r["tile"] for r in rows} == {0, 1, 2}
    spec = timeline(p, tiles=[4], color="kernel").to_dict()
    assert {r["tile"] for r in _values(spec)} == {4} and spec["encoding"]["color"]["field"] == "kernel"


def test_timeline_guards_size_and_columns() -> None:
    p = synthetic_profile(6, 10, seed=1)
    with pytest.raises(OptionError, match=r"timeline would draw 60 samples \(max_rows=50\); pass tiles="):
        timeline(crop(p), max_rows=50)
    with pytest.raises(OptionError, match=r"timeline needs columns \['start_offset_cycles', 'end_offset_cycles'\]"):
        timeline(p.samples)
    with pytest.raises(OptionError, match=r"color='mood' is not a sample column"):
        timeline(crop(p), color="mood")


def test_phase_bars_and_compare_chart() -> None:
    a, b = synthetic_profile(4, 13, seed=1), synthetic_profile(4, 13, seed=2)
    q = query(a, by="phase")
    spec = phase_bars(q).to_dict()
    assert spec["encoding"]["x"]["field"] == "span_cycles" and spec["encoding"]["y"]["title"] == "phase"
    # phases are shown with what they are, in the query's numeric order
    shown = [f"{p} {lab}" for p, lab in zip(q["phase"], q["label"], strict=True)]
    assert spec["encoding"]["y"]["sort"] == shown
    assert spec["title"] == "span cycles (first start to last end) per phase"
    assert phase_bars(query(a, by="kernel")).to_dict()["encoding"]["x"]["field"] == "busy_cycles"
    assert len(_values(spec)) == 5 and spec["width"] == 520
    spec = compare_chart(compare(a, b, by="phase", names=["base", "new"])).to_dict()
    rows = _values(spec)
    assert {r["profile"] for r in rows} == {"base", "new"} and len(rows) == 10
    assert {r["shown"] for r in rows} == set(shown)
    # many keys grow the chart down, never across: a fixed width with a bar per profile inside each row
    assert spec["encoding"]["yOffset"]["field"] == "profile" and spec["width"] == 520
    assert spec["title"] == "span cycles (first start to last end) per phase: base, new"   # what they are
    with pytest.raises(OptionError, match=r"metric='speed' is not a column of the query frame"):
        phase_bars(query(a, by="kernel"), metric="speed")


def test_categories_keep_their_colours_across_views_and_none_is_blank() -> None:
    from toolkit.profile import crop, synthetic_profile
    from toolkit.viz import timeline
    from toolkit.viz.palette import FIXED, color_of
    c = crop(synthetic_profile(tiles=6, samples_per_tile=20, seed=7))
    views = [timeline(c, tiles=t, color="kernel").to_dict() for t in (2, range(2, 6))]
    scales = [v["encoding"]["color"]["scale"] for v in views]
    for s in scales:
        assert "" not in s["domain"] and None not in s["domain"]
        known = [k for k in s["domain"] if k in FIXED]
        assert [r for k, r in zip(s["domain"], s["range"], strict=True) if k in FIXED] == [color_of(k) for k in known]
    maps = [dict(zip(s["domain"], s["range"], strict=True)) for s in scales]
    shared = maps[0].keys() & maps[1].keys()
    assert shared and all(maps[0][k] == maps[1][k] for k in shared)        # same category, same colour
    assert len(set(maps[0].values())) == len(maps[0])                       # distinct categories, distinct colours
    kinds = timeline(c, tiles=6, color="kind").to_dict()["encoding"]["color"]["scale"]
    assert dict(zip(kinds["domain"], kinds["range"], strict=True))["exchange"] == color_of("exchange")
    assert color_of("some_hardware_symbol") == color_of("some_hardware_symbol")   # hashed, stable


def test_the_barrier_view_labels_phases_and_never_sums_spreads() -> None:
    import toolkit
    from toolkit.profile import barriers, crop
    from toolkit.viz import barrier_chart
    c = toolkit.compile("mlp-small-repeat")
    b = barriers(crop(c.profile)).phases
    assert b["label"].null_count() == 0 and b["label"].str.contains("mlp.fc1").any()
    assert (b["after_last_arrival_cycles"] >= 0).all()
    assert (b["last_arrival_offset_cycles"] >= b["first_arrival_offset_cycles"]).all()
    assert (b["last_arrival_offset_cycles"] + b["after_last_arrival_cycles"] == b["exit_offset_cycles"]).all()
    spec = barrier_chart(b.head(12)).to_dict()
    bars = spec["layer"]
    rows = spec["datasets"][bars[0]["data"]["name"]] if "data" in bars[0] else spec["datasets"][spec["data"]["name"]]
    assert len(rows) == 12   # one row per phase: spreads drawn per phase, never summed
    assert bars[0]["encoding"]["y"]["sort"][0].startswith("0 ")


def test_the_renderers_categories_cut_exchange_samples_and_cover_every_cycle() -> None:
    """Every exchange sample is cut into send / receive / send+receive / partner busy / exchange idle by its
    activities; the pieces cover exactly the cropped samples, and hardware-format round trips agree."""
    import polars as pl

    from toolkit.profile import CATEGORIES, category_cycles, crop, synthetic_profile, timeline_categories
    from toolkit.viz import timeline
    from toolkit.viz.palette import FIXED
    p = synthetic_profile(tiles=6, samples_per_tile=30, seed=5)
    t = timeline_categories(p, gaps=False)
    assert set(t["category"]) <= set(CATEGORIES) and {"compute", "exchange idle"} & set(t["category"])
    assert t["duration_cycles"].sum() == crop(p).samples["duration_cycles"].sum()
    # with the gaps (the default) every tile's pieces cover the wall clock: shares are of all tile-cycles
    whole = timeline_categories(p)
    c = crop(p)
    assert whole["duration_cycles"].sum() == c.tiles * c.cropped_cycles
    assert whole.filter(pl.col("category") == "idle").height > t.filter(pl.col("category") == "idle").height
    assert (t["duration_cycles"] >= 0).all()
    per = t.group_by("tile", "sample").agg(pl.col("duration_cycles").sum())
    want = crop(p).samples.select("tile", "sample", "duration_cycles")
    assert per.join(want, on=["tile", "sample"]).filter(pl.col("duration_cycles") != pl.col("duration_cycles_right")
                                                        ).height == 0
    shares = category_cycles(t)
    assert abs(shares["share"].sum() - 1.0) < 1e-9
    scale = timeline(t, tiles=3, color="category").to_dict()["encoding"]["color"]["scale"]
    assert all(FIXED[k] == v for k, v in zip(scale["domain"], scale["range"], strict=True))


def test_a_simulated_stand_in_is_never_called_measured() -> None:
    from toolkit.profile import residuals
    from toolkit.viz import residual_chart
    p = synthetic_profile(4, 13, seed=1)
    hw = Profile(samples=p.samples, activities=p.activities, clock_hz=p.clock_hz, source="hardware")
    stand_in = Profile(samples=p.samples, activities=p.activities, clock_hz=p.clock_hz, source="simulated")
    spec = residual_chart(residuals(hw, stand_in)).to_dict()
    assert spec["layer"][1]["encoding"]["x"]["title"] == "simulated stand-in cycles"
    assert spec["title"].startswith("predicted against simulated stand-in")
    spec = residual_chart(residuals(stand_in, hw)).to_dict()
    assert spec["layer"][1]["encoding"]["x"]["title"] == "measured cycles"


def test_residual_points_are_drawn_inside_the_plot() -> None:
    """The smallest and largest groups sat on the plot's corners, half cut; the scale now has room."""
    from toolkit.profile import residuals
    from toolkit.viz import residual_chart
    p = synthetic_profile(4, 13, seed=1)
    res = residuals(p, p)
    spec = residual_chart(res).to_dict()
    lo, hi = spec["layer"][1]["encoding"]["x"]["scale"]["domain"]
    values = [v for v in res.frame["measured_cycles"].to_list() if v]
    assert lo < min(values) and hi > max(values)
