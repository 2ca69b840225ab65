from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.errors import OptionError
from toolkit.tables import FAILURES_SCHEMA, OBJECTS_SCHEMA, OCCUPANCY_SCHEMA, PLACEMENT_SCHEMA, frame
from toolkit.target import ipu21
from toolkit.viz import memory as vm
from toolkit.viz import occupancy as vo

KINDS = np.array(["weight", "activation", "staging", "code", "exchange_rows", "run_table"])
TARGET = ipu21()
SMALL = TARGET.replace(tiles=92)  # two rows of the 46-column chip grid


def synthetic_placement(tiles: int, seed: int, *, per_tile: int = 12, events: int = 10):
    """(objects, placement, occupancy) for ``tiles`` tiles with ``per_tile`` objects each.

    Objects are bump-allocated from the bottom of memory (never overlapping), with
    random lifetimes; object 0 of every tile is a 3-instance iterated weight with a
    16 KiB stride and object 1 an alias of object 2. Occupancy counts each root's span.
    """
    rng = np.random.default_rng(seed)
    n = tiles * per_tile
    tile = np.repeat(np.arange(tiles), per_tile)
    slot = np.tile(np.arange(per_tile), tiles)
    size = rng.integers(1, 64, n) * 64
    first = rng.integers(0, events, n)
    last = np.minimum(first + rng.integers(0, 4, n), events - 1)
    repeat = np.where(slot == 0, 3, 1)
    stride = np.where(slot == 0, 16 * 1024, 0)
    size = np.where(slot == 0, 4096, size)
    alias = np.where(slot == 1, np.arange(n) + 1, -1)
    first = np.where(slot == 1, first[np.minimum(np.arange(n) + 1, n - 1)], first)
    last = np.where(slot == 1, last[np.minimum(np.arange(n) + 1, n - 1)], last)
    span = np.where(repeat > 1, repeat * stride, size)
    span_for_address = np.where(slot == 1, 0, span)  # the alias shares its root's storage
    csum = np.cumsum(span_for_address.reshape(tiles, per_tile), axis=1).reshape(-1)
    address = TARGET.memory_start + csum - span_for_address
    address = np.where(slot == 1, np.roll(address, -1), address)
    klass = np.where(slot % 3 == 0, "interleaved", "standard")
    objects = frame(
        {
            "object_id": np.arange(n), "tile": tile, "kind": KINDS[slot % len(KINDS)],
            "name": [f"t{t}.obj{s}" for t, s in zip(tile, slot, strict=True)], "tensor_id": None,
            "size_bytes": size, "align": 16, "first": first, "last": last,
            "access": np.where(KINDS[slot % len(KINDS)] == "code", "executable", "data"), "class": klass,
            "regions": [[0, 1]] * n, "group": None, "alias_of": pl.Series(alias).replace(-1, None),
            "repeat_count": repeat, "separate_from": [[]] * n, "auxiliary": False,
        },
        OBJECTS_SCHEMA, what="synthetic objects",
    )
    placement = frame(
        {"object_id": np.arange(n), "tile": tile, "address": address, "stride_bytes": stride,
         "region": np.where(address >= 0x80000, 1, 0), "first_element": 0, "last_element": 0},
        PLACEMENT_SCHEMA, what="synthetic placement",
    )
    live = np.zeros((tiles, events + 1), dtype=np.int64)
    counted = np.where(slot == 1, 0, span)
    np.add.at(live, (tile, first), counted)
    np.add.at(live, (tile, last + 1), -counted)
    live = np.cumsum(live, axis=1)[:, :events]
    occupancy = frame(
        {"tile": np.repeat(np.arange(tiles), events), "event": np.tile(np.arange(events), tiles),
         "live_bytes": live.reshape(-1), "standard_bytes": 0, "interleaved_bytes": live.reshape(-1) // 2,
         "region0_bytes": live.reshape(-1), "region1_bytes": 0,
         "free_bytes": TARGET.memory_bytes - live.reshape(-1), "largest_free_bytes": 0},
        OCCUPANCY_SCHEMA, what="synthetic occupancy",
    )
    return objects, placement, occupancy


def dataset(spec: dict[str, Any], root: dict[str, Any]) -> list[dict[str, Any]]:
    return root["datasets"][spec["data"]["name"]]


@pytest.fixture(scope="module")
def synthetic():
    return synthetic_placement(8, seed=3)


# -- occupancy heat map -------------------------------------------------------------
def test_heatmap_spec(synthetic) -> None:
    _, _, occ = synthetic
    spec = vm.occupancy_heatmap(occ, TARGET).to_dict()
    assert spec["mark"]["type"] == "rect"
    enc = spec["encoding"]
    assert (enc["x"]["field"], enc["y"]["field"], enc["color"]["field"]) == ("column", "row", "fraction")
    assert {t["field"] for t in enc["tooltip"]} == {"tile", "peak_bytes", "percent", "peak_event", "headroom_bytes",
                                                 "largest_free_at_peak_bytes", "min_largest_free_bytes",
                                                 "row", "column"}
    assert spec["width"] == 46 * 12 and spec["height"] == 32 * 12
    assert spec["params"][0]["name"] == "picked_tile"
    rows = dataset(spec, spec)
    assert len(rows) == 1472
    assert {(r["row"], r["column"]) for r in rows} == {(t // 46, t % 46) for t in range(1472)}


def test_largest_free_span(synthetic) -> None:
    """Fragmentation per tile: the free span at the peak event and the smallest over all events."""
    _, _, occ = synthetic
    occ = occ.with_columns((pl.col("free_bytes") // (pl.col("event") + 2)).alias("largest_free_bytes"))
    peaks = vm.tile_peaks(occ, TARGET).filter(pl.col("tile") < 8).sort("tile")
    per_tile = occ.group_by("tile").agg(pl.col("largest_free_bytes").min()).sort("tile")
    assert peaks["min_largest_free_bytes"].to_list() == per_tile["largest_free_bytes"].to_list()
    at_peak = peaks.join(occ, left_on=["tile", "peak_event"], right_on=["tile", "event"]).sort("tile")
    assert at_peak["largest_free_at_peak_bytes"].to_list() == at_peak["largest_free_bytes"].to_list()
    spec = vm.occupancy_heatmap(occ, TARGET, color="largest_free").to_dict()
    assert spec["encoding"]["color"]["field"] == "min_largest_free_bytes"
    low, high = spec["encoding"]["color"]["scale"]["domain"]
    # over the tiles that hold objects (idle tiles have a null span), clipped to percentiles
    assert [low, high] == vm.robust_domain(vm.tile_peaks(occ, TARGET)["min_largest_free_bytes"])
    assert "percentile" in " ".join(spec["encoding"]["color"]["title"])
    assert "fragmentation" in spec["title"]
    no_span = vm.tile_peaks(occ.drop("largest_free_bytes"), TARGET)
    assert no_span["min_largest_free_bytes"].null_count() == TARGET.tiles


def test_heatmap_values(synthetic) -> None:
    _, _, occ = synthetic
    peaks = vm.tile_peaks(occ, TARGET)
    assert list(peaks.schema) == list(vm.TILE_PEAKS_SCHEMA)
    expected = occ.group_by("tile").agg(pl.col("live_bytes").max()).sort("tile")
    got = peaks.filter(pl.col("tile") < 8)
    assert got["peak_bytes"].to_list() == expected["live_bytes"].to_list()
    assert np.allclose(got["fraction"].to_numpy(), expected["live_bytes"].to_numpy() / TARGET.memory_bytes)
    # the event of the peak is the earliest event at the maximum
    at_peak = occ.join(got.select("tile", "peak_bytes"), on="tile").filter(pl.col("live_bytes") == pl.col("peak_bytes"))
    first = at_peak.group_by("tile").agg(pl.col("event").min()).sort("tile")
    assert got["peak_event"].to_list() == first["event"].to_list()
    idle = peaks.filter(pl.col("tile") >= 8)
    assert idle["peak_bytes"].sum() == 0 and idle["peak_event"].null_count() == idle.height


def test_heatmap_value_columns_and_small_target(synthetic) -> None:
    _, _, occ = synthetic
    spec = vm.occupancy_heatmap(occ.filter(pl.col("tile") < 92), SMALL, value="interleaved_bytes").to_dict()
    rows = dataset(spec, spec)
    assert len(rows) == 92 and spec["height"] == 2 * 12
    assert {r["capacity_bytes"] for r in rows} == {13 * 32 * 1024}
    peak = vm.tile_peaks(occ, TARGET, value="peak_live_bytes")  # the "peak_" prefix is accepted
    assert peak["capacity_bytes"][0] == TARGET.memory_bytes
    assert vm.tile_peaks(occ, TARGET, value="region0_bytes")["capacity_bytes"][0] == 13 * 16 * 1024


def test_heatmap_errors(synthetic) -> None:
    _, _, occ = synthetic
    with pytest.raises(OptionError, match=r"value='bytes' is not an occupancy byte column; use one of"):
        vm.occupancy_heatmap(occ, TARGET, value="bytes")
    with pytest.raises(OptionError, match=r"would embed 1,472 rows, above max_rows=1,000"):
        vm.occupancy_heatmap(occ, TARGET, max_rows=1000)
    with pytest.raises(OptionError, match=r"max_rows=0 must be a positive integer"):
        vm.occupancy_heatmap(occ, TARGET, max_rows=0)
    with pytest.raises(OptionError, match=r"occupancy has 40 rows with tile outside 0\.\.91 \(first: 92\)"):
        vm.occupancy_heatmap(occ.filter(pl.col("tile") < 8).with_columns(pl.col("tile") + 88), SMALL)
    with pytest.raises(OptionError, match=r"occupancy lacks columns \['live_bytes'\]"):
        vm.occupancy_heatmap(occ.drop("live_bytes"), TARGET)
    with pytest.raises(OptionError, match=r"occupancy must be a polars DataFrame, got dict"):
        vm.occupancy_heatmap({"tile": [0]}, TARGET)  # type: ignore[arg-type]


def test_heatmap_marks_failed_tiles(synthetic) -> None:
    _, _, occ = synthetic
    failures = frame(
        {"tile": [4, 4, 7], "event": [6, 2, 1], "live_bytes": [700_000, 650_000, 640_000],
         "capacity_bytes": TARGET.memory_bytes, "largest_objects": [[1], [2], [3]], "proven": [True, True, False],
         "reason": ["late", "capacity: lower bound 650000 B > 638976 B", "not proven"]},
        FAILURES_SCHEMA,
    )
    spec = vm.occupancy_heatmap(occ, TARGET, failures=failures).to_dict()
    assert spec["encoding"]["stroke"]["condition"]["test"] == "datum.failures > 0"
    assert {"failures", "failure_event", "reason"} <= {t["field"] for t in spec["encoding"]["tooltip"]}
    rows = {r["tile"]: r for r in dataset(spec, spec)}
    assert len(rows) == 1472
    assert (rows[4]["failures"], rows[4]["failure_event"], rows[4]["reason"]) == (
        2, 2, "capacity: lower bound 650000 B > 638976 B")
    assert rows[7]["reason"] == "not proven" and rows[0]["failures"] == 0 and rows[0]["reason"] is None
    with pytest.raises(OptionError, match=r"failures has 1 rows with tile outside 0\.\.1471 \(first: 5000\)"):
        vm.occupancy_heatmap(occ, TARGET, failures=failures.with_columns(pl.lit(5000).alias("tile")).head(1))


def test_heatmap_accepts_lazy_and_wider_dtypes(synthetic) -> None:
    _, _, occ = synthetic
    lazy = occ.with_columns(pl.col("tile").cast(pl.Int64), pl.col("event").cast(pl.Int64)).lazy()
    assert vm.tile_peaks(lazy, TARGET).equals(vm.tile_peaks(occ, TARGET))


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), tiles=st.integers(1, 92))
def test_heatmap_covers_every_tile_once(seed: int, tiles: int) -> None:
    _, _, occ = synthetic_placement(tiles, seed, per_tile=4, events=5)
    peaks = vm.tile_peaks(occ, SMALL)
    assert peaks["tile"].to_list() == list(range(92))
    assert (peaks["fraction"] * SMALL.memory_bytes - peaks["peak_bytes"]).abs().max() < 1e-6
    assert peaks["peak_bytes"].sum() == occ.group_by("tile").agg(pl.col("live_bytes").max())["live_bytes"].sum()


# -- memory map -----------------------------------------------------------------------
def test_memory_map_layers(synthetic) -> None:
    objects, placement, _ = synthetic
    spec = vm.memory_map(objects, placement, TARGET, 3).to_dict()
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert marks == ["rect", "rule", "rule", "text", "rule"]
    rects = spec["layer"][0]
    enc = rects["encoding"]
    assert (enc["x"]["field"], enc["x2"]["field"], enc["y"]["field"], enc["y2"]["field"]) == (
        "first", "end_event", "address", "end_address")
    assert enc["y"]["axis"]["format"] == "#x"
    assert {0x4C000, 0x80000, 0xE8000} <= set(enc["y"]["axis"]["values"])
    assert enc["y"]["scale"]["domain"] == [TARGET.memory_start, TARGET.memory_end]
    assert enc["color"]["field"] == "kind"
    tips = {t["field"]: t for t in enc["tooltip"]}
    assert {"name", "kind", "size_bytes", "address", "first", "last"} <= set(tips)
    assert tips["address"]["format"] == "#x"
    rows = dataset(rects, spec)
    assert len(rows) == 12 and {r["tile"] for r in rows} == {3}
    assert len(dataset(spec["layer"][1], spec)) == 26 - 2       # element boundaries inside regions
    regions = dataset(spec["layer"][2], spec)
    assert [r["offset"] for r in regions] == [0x4C000, 0x80000]
    assert [r["label"] for r in regions] == ["region 0 (standard)", "region 1 (interleaved)"]
    assert dataset(spec["layer"][4], spec)[0]["offset"] == TARGET.load_limit


def test_memory_map_spans_and_lifetimes(synthetic) -> None:
    objects, placement, _ = synthetic
    spec = vm.memory_map(objects, placement, TARGET, 0, color="class").to_dict()
    assert spec["layer"][0]["encoding"]["color"]["field"] == "class"
    rows = {r["name"]: r for r in dataset(spec["layer"][0], spec)}
    rep = rows["t0.obj0"]
    assert rep["repeat_count"] == 3 and rep["span_bytes"] == 3 * 16 * 1024
    assert rep["end_address"] - rep["address"] == 3 * 16 * 1024
    for r in rows.values():
        assert r["end_event"] == r["last"] + 1
        if r["repeat_count"] == 1:
            assert r["end_address"] - r["address"] == r["size_bytes"]


def test_memory_map_peak_rule_and_unplaced(synthetic) -> None:
    objects, placement, occ = synthetic
    unplaced = placement.with_columns(
        pl.when(pl.col("object_id") == 5).then(None).otherwise(pl.col("address")).alias("address"))
    spec = vm.memory_map(objects, unplaced, TARGET, 0, occupancy=occ).to_dict()
    assert len(spec["layer"]) == 6
    rule = spec["layer"][5]
    assert rule["mark"]["type"] == "rule" and rule["encoding"]["x"]["field"] == "middle"
    occ0 = occ.filter(pl.col("tile") == 0).sort(["live_bytes", "event"], descending=[True, False])
    assert dataset(rule, spec)[0]["event"] == occ0["event"][0]
    assert f"peak {occ0['live_bytes'][0]:,} B at event {occ0['event'][0]}" in spec["title"]
    assert [r["object_id"] for r in dataset(spec["layer"][0], spec)].count(5) == 0
    assert len(dataset(spec["layer"][0], spec)) == 11
    # a tile without occupancy rows just has no peak rule
    assert len(vm.memory_map(objects, placement, TARGET, 100, occupancy=occ).to_dict()["layer"]) == 5


def test_memory_map_empty_tile_and_errors(synthetic) -> None:
    objects, placement, _ = synthetic
    spec = vm.memory_map(objects, placement, TARGET, 1000).to_dict()
    assert dataset(spec["layer"][0], spec) == []
    with pytest.raises(OptionError, match=r"tile=1472 is not a tile of ipu21 \(0\.\.1471\)"):
        vm.memory_map(objects, placement, TARGET, 1472)
    with pytest.raises(OptionError, match=r"tile='3' is not a tile"):
        vm.memory_map(objects, placement, TARGET, "3")  # type: ignore[arg-type]
    with pytest.raises(OptionError, match=r"color='size' is not a memory-map colouring"):
        vm.memory_map(objects, placement, TARGET, 0, color="size")
    with pytest.raises(OptionError, match=r"memory_map of tile 0 has 12 placed objects: .* max_rows=5"):
        vm.memory_map(objects, placement, TARGET, 0, max_rows=5)
    with pytest.raises(OptionError, match=r"placement lacks columns \['address'\]"):
        vm.memory_map(objects, placement.drop("address"), TARGET, 0)


# -- peak breakdown ---------------------------------------------------------------------
def test_peak_breakdown(synthetic) -> None:
    objects, placement, occ = synthetic
    tile = 2
    spec = vm.peak_breakdown(objects, placement, occ, TARGET, tile, top=4).to_dict()
    bars, big = spec["hconcat"]
    assert bars["mark"]["type"] == "bar" and big["mark"]["type"] == "bar"
    assert bars["encoding"]["y"]["field"] == "kind" and bars["encoding"]["color"]["field"] == "class"
    assert big["encoding"]["color"]["field"] == "class"      # one shared class legend
    occ_t = occ.filter(pl.col("tile") == tile).sort(["live_bytes", "event"], descending=[True, False])
    event, live_bytes = occ_t["event"][0], occ_t["live_bytes"][0]
    title = spec["title"] if isinstance(spec["title"], str) else " ".join(spec["title"])
    assert f"peaks at event {event}: {live_bytes:,} B live" in title
    groups = dataset(bars, spec)
    assert sum(g["bytes"] for g in groups) == live_bytes        # aliases are not double counted
    largest = dataset(big, spec)
    assert len(largest) <= 4
    assert [r["span_bytes"] for r in largest] == sorted((r["span_bytes"] for r in largest), reverse=True)
    assert all(r["first"] <= event <= r["last"] and r["tile"] == tile for r in largest)
    assert all(r["alias_of"] is None for r in largest)


def test_peak_breakdown_by_class_and_errors(synthetic) -> None:
    objects, placement, occ = synthetic
    spec = vm.peak_breakdown(objects, placement, occ, TARGET, 0, by="class").to_dict()
    assert spec["hconcat"][0]["encoding"]["y"]["field"] == "class"
    with pytest.raises(OptionError, match=r"tile=9 has no occupancy rows"):
        vm.peak_breakdown(objects, placement, occ, TARGET, 9)
    with pytest.raises(OptionError,
                       match=r"by='name' is not a breakdown; use one of \['kind', 'class', 'access', 'lifetime'\]"):
        vm.peak_breakdown(objects, placement, occ, TARGET, 0, by="name")
    with pytest.raises(OptionError, match=r"top=0 must be a positive number"):
        vm.peak_breakdown(objects, placement, occ, TARGET, 0, top=0)


# -- over time --------------------------------------------------------------------------
def test_occupancy_over_time(synthetic) -> None:
    _, _, occ = synthetic
    spec = vo.occupancy_over_time(occ).to_dict()
    lines, note = spec["layer"]   # the capacity, many times these bytes, is stated, not drawn
    assert note["mark"]["type"] == "text" and "above this scale" in dataset(note, spec)[0]["label"]
    assert f"(capacity {TARGET.memory_bytes:,} B, off this scale)" in spec["title"]
    assert (lines["encoding"]["x"]["field"], lines["encoding"]["y"]["field"]) == ("middle", "bytes")
    rows = dataset(lines, spec)
    assert len(rows) == 2 * 10
    top = {r["event"]: r["bytes"] for r in rows if r["stat"] == "max"}
    expected = occ.group_by("event").agg(pl.col("live_bytes").max())
    assert top == dict(zip(expected["event"].to_list(), expected["live_bytes"].to_list(), strict=True))
    # the value axis is the data's, not 0..capacity
    assert lines["encoding"]["y"]["scale"]["domain"] == [0, int(max(r["bytes"] for r in rows) * 1.05)]
    near = occ.with_columns(pl.col("live_bytes") * 0 + TARGET.memory_bytes // 2 + pl.col("event"))
    spec = vo.occupancy_over_time(near).to_dict()
    lines, rule, label = spec["layer"]
    assert lines["mark"]["type"] == "line" and rule["mark"]["type"] == "rule" and label["mark"]["type"] == "text"
    assert dataset(rule, spec)[0]["bytes"] == TARGET.memory_bytes
    assert lines["encoding"]["y"]["scale"]["domain"] == [0, int(TARGET.memory_bytes * 1.05)]


def test_an_interleaved_chart_of_small_values_spans_its_values_not_the_region() -> None:
    """02-sram drew values under 40 kB on a 0..450 kB axis (the interleaved region's capacity): flat lines."""
    occ = pl.DataFrame({"tile": [0] * 4, "event": [0, 1, 2, 3],
                        "interleaved_bytes": [10_000, 38_000, 20_000, 0]})
    spec = vo.occupancy_over_time(occ, [0], target=TARGET, value="interleaved_bytes").to_dict()
    high = spec["layer"][0]["encoding"]["y"]["scale"]["domain"][1]
    assert 38_000 <= high < 45_000 and "rule" not in str(spec["layer"]) and "off this scale" in spec["title"]


def test_occupancy_over_time_tiles_and_errors(synthetic) -> None:
    _, _, occ = synthetic
    spec = vo.occupancy_over_time(occ, tiles=[1, 2], target=SMALL, value="region1_bytes").to_dict()
    rows = dataset(spec["layer"][0], spec)
    assert {r["tiles"] for r in rows} == {2}
    assert f"(capacity {13 * 32 * 1024:,} B, off this scale)" in spec["title"]
    with pytest.raises(OptionError, match=r"tiles=\[\] selects nothing"):
        vo.occupancy_over_time(occ, tiles=[])
    with pytest.raises(OptionError, match=r"tiles contains 1 tiles with no occupancy rows \(first: 50\)"):
        vo.occupancy_over_time(occ, tiles=[1, 50])
    with pytest.raises(OptionError, match=r"occupancy_over_time has two rows per event.*max_rows=3"):
        vo.occupancy_over_time(occ, max_rows=3)


def test_the_peak_splits_always_live_from_transient(synthetic) -> None:
    objects, placement, occ = synthetic
    spec = vm.peak_breakdown(objects, placement, occ, TARGET, 0, by="lifetime").to_dict()
    bars = spec["hconcat"][0]
    rows = spec["datasets"][bars["data"]["name"]]
    assert {r["lifetime"] for r in rows} <= {"always live", "transient"} and rows
    assert bars["encoding"]["y"]["field"] == "lifetime"


def test_the_headroom_heat_map_separates_near_equal_tiles_and_labels_the_grid(synthetic) -> None:
    _, _, occ = synthetic
    spec = vm.occupancy_heatmap(occ, SMALL, color="headroom").to_dict()
    enc = spec["encoding"]
    rows = spec["datasets"][spec["data"]["name"]]
    free = [r["headroom_bytes"] for r in rows]
    assert enc["color"]["field"] == "headroom_bytes"
    assert enc["color"]["scale"]["domain"] == vm.robust_domain(pl.Series(free))
    low, high = enc["color"]["scale"]["domain"]
    assert min(free) <= low < high <= max(free) and enc["color"]["scale"]["clamp"] is True
    assert enc["x"]["title"] == "chip column" and enc["y"]["title"] == "chip row"
    with pytest.raises(OptionError, match=r"color='bytes' must be 'fraction'"):
        vm.occupancy_heatmap(occ, SMALL, color="bytes")


def test_one_tile_over_time_names_its_lines_and_lines_up_with_the_others(synthetic) -> None:
    """One tile: no max/mean legend, one line per value named by what it holds (class vs region), whole-event
    ticks, and the same event range as the all-tiles chart."""
    _, _, occ = synthetic
    full = vo.occupancy_over_time(occ).to_dict()
    spec = vo.occupancy_over_time(occ, [1], target=SMALL, values=["interleaved_bytes", "region1_bytes"]).to_dict()
    lines = spec["layer"][0]
    assert lines["encoding"]["color"]["title"] == "tile 1"
    assert {r["series"] for r in dataset(lines, spec)} == {"interleaved class", "region 1 (interleaved elements)"}
    assert "tile 1" in spec["title"] and "max" not in spec["title"]
    x = lines["encoding"]["x"]
    assert x["axis"]["tickMinStep"] == 1 and x["axis"]["format"] == "d"
    assert x["scale"]["domain"] == full["layer"][0]["encoding"]["x"]["scale"]["domain"]


def test_charts_serialize(synthetic) -> None:
    objects, placement, occ = synthetic
    for chart in (
        vm.occupancy_heatmap(occ, SMALL), vm.memory_map(objects, placement, TARGET, 0),
        vm.peak_breakdown(objects, placement, occ, TARGET, 0), vo.occupancy_over_time(occ),
    ):
        assert chart.to_json().startswith("{")



def test_one_near_empty_row_does_not_flatten_the_headroom_colours() -> None:
    """02-sram's headroom map was one flat colour: a near-empty row stretched the scale. The colour domain is
    the 5th..95th percentile of the tiles' free bytes, clamped, and the legend says so."""
    tiles = np.arange(TARGET.tiles)
    live = np.where(tiles < TARGET.grid_columns, 1_000, 600_000 + (tiles % 97) * 100)   # row 0 nearly empty
    occ = pl.DataFrame({"tile": tiles, "event": 0, "live_bytes": live})
    spec = vm.occupancy_heatmap(occ, TARGET, color="headroom").to_dict()
    color = spec["encoding"]["color"]
    low, high = color["scale"]["domain"]
    busy = TARGET.memory_bytes - live[TARGET.grid_columns:]
    assert low >= busy.min() and high <= busy.max() and high - low >= 0.9 * (busy.max() - busy.min())
    assert color["scale"]["clamp"] is True
    assert color["title"] == ["free bytes at peak (B)", "colour clipped to the 5th-95th percentile"]
    tips = {t["field"]: t.get("title") for t in spec["encoding"]["tooltip"]}
    assert tips["headroom_bytes"] == "free bytes at the peak (B)"


def test_the_region_legend_names_the_regions(synthetic) -> None:
    objects, placement, _ = synthetic
    spec = vm.memory_map(objects, placement, TARGET, 0, color="region").to_dict()
    rects = spec["layer"][0]
    assert {r["region"] for r in dataset(rects, spec)} <= {"region 0 (standard)", "region 1 (interleaved)"}
    assert set(rects["encoding"]["color"]["scale"]["domain"]) >= {r["region"] for r in dataset(rects, spec)}
