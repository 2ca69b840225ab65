from __future__ import annotations

import dataclasses

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings

from toolkit.errors import InvalidIRError, ModelError
from toolkit.placement import place, verify_placement
from toolkit.placement.strategies import object_frames, objects_frame, synthetic_objects
from toolkit.target import KIB, Element, ipu21


def small_target():
    """64 KiB of standard region 0 (4 elements) below 256 KiB of interleaved region 1 (8 pairs): 320 KiB."""
    std = [Element(offset=0x70000 + i * 16 * KIB, size=16 * KIB, region=0, interleaved=False) for i in range(4)]
    pairs = [Element(offset=0x80000 + i * 32 * KIB, size=32 * KIB, region=1, interleaved=True) for i in range(8)]
    return dataclasses.replace(ipu21(), memory_start=0x70000, staging_base=0x70000, memory_end=0xC0000,
                               load_limit=0xC0000, memory_elements=tuple(std + pairs))


def addresses(p):
    return dict(zip(p.placement["object_id"].to_list(), p.placement["address"].to_list(), strict=True))


def test_alternating_class_peaks_fit_jointly():
    t = small_target()
    objs = objects_frame([
        {"size_bytes": 256 * KIB, "first": 0, "last": 0, "class": "interleaved", "regions": [1], "align": 16},
        {"size_bytes": 64 * KIB, "first": 0, "last": 0},
        {"size_bytes": 192 * KIB, "first": 1, "last": 1},
        {"size_bytes": 64 * KIB, "first": 1, "last": 1, "class": "interleaved", "regions": [1], "align": 16},
        {"size_bytes": 64 * KIB, "first": 1, "last": 1},
    ])
    # a fixed partition needs the sum of the class peaks: 256 KiB interleaved + 256 KiB standard
    peaks = objs.group_by("class", "first").agg(pl.col("size_bytes").sum()).group_by("class").agg(
        pl.col("size_bytes").max())
    assert peaks["size_bytes"].sum() == 512 * KIB
    p = place(objs, t)
    assert p.fits, p.failures
    verify_placement(objs, p.placement, t)
    a = addresses(p)
    assert a[0] == 0x80000 and a[3] == 0x80000       # interleaved first, low addresses
    assert a[2] >= 0x80000                            # standard storage reuses region 1 after the peak moved
    assert p.occupancy["live_bytes"].max() == 320 * KIB


@pytest.mark.parametrize(("regions", "stride"), [([0, 1], 16 * KIB), ([1], 32 * KIB)])
def test_repeat_stride_region0_and_forced_region1(regions, stride):
    t = ipu21()
    objs = objects_frame([
        {"size_bytes": 5000, "align": 8, "first": 0, "last": 3, "repeat_count": 3, "regions": regions,
         "separate_from": [1]},
        {"size_bytes": 3000, "first": 0, "last": 3},
        {"size_bytes": 5000, "align": 8, "first": 0, "last": 3, "repeat_count": 3, "regions": regions},
    ])
    p = place(objs, t)
    verify_placement(objs, p.placement, t)
    row = p.placement.filter(pl.col("object_id") == 0).row(0, named=True)
    assert row["stride_bytes"] == stride
    assert row["region"] == regions[0]
    assert row["address"] % stride == 0
    plain = p.placement.filter(pl.col("object_id") == 2).row(0, named=True)
    assert plain["stride_bytes"] == 5000


def test_auxiliary_avoids_ever_occupied_addresses():
    t = ipu21()
    objs = objects_frame([
        {"size_bytes": 1000, "first": 0, "last": 0},
        {"size_bytes": 3000, "first": 2, "last": 2},
        {"size_bytes": 500, "first": 5, "last": 5, "auxiliary": True},
    ])
    p = place(objs, t)
    verify_placement(objs, p.placement, t)
    a = addresses(p)
    assert a[0] == a[1] == t.memory_start             # the dead buffer's space is reused ...
    assert a[2] >= t.memory_start + 3000              # ... but never by the auxiliary one


def test_executable_reserves_whole_elements():
    t = ipu21()
    objs = objects_frame([
        {"size_bytes": 6000, "first": 0, "last": 9, "access": "executable", "kind": "code", "regions": [0]},
        {"size_bytes": 100, "first": 0, "last": 9},
    ])
    p = place(objs, t)
    verify_placement(objs, p.placement, t)
    a = addresses(p)
    assert a[0] == t.memory_start and a[1] == t.memory_start + 16 * KIB


def test_support_first_alias_and_group():
    t = ipu21()
    objs = objects_frame([
        {"size_bytes": 100, "first": 0, "last": 1},
        {"size_bytes": 64, "first": 3, "last": 5, "kind": "support"},
        {"size_bytes": 100, "first": 4, "last": 6, "alias_of": 0},
        {"size_bytes": 40, "first": 2, "last": 3, "group": 7},
        {"size_bytes": 24, "first": 2, "last": 2, "group": 7},
    ])
    p = place(objs, t)
    verify_placement(objs, p.placement, t)
    a = addresses(p)
    assert a[1] == t.memory_start                    # support reserved before everything
    assert a[2] == a[0]                              # alias at its root
    assert a[4] == a[3] + 40                         # group back to back


def test_proven_failure_when_live_bytes_exceed_memory():
    t = ipu21()
    objs = objects_frame([{"size_bytes": 400 * KIB, "first": 0, "last": 3},
                          {"size_bytes": 400 * KIB, "first": 2, "last": 5}])
    p = place(objs, t)
    assert not p.fits
    row = p.failures.row(0, named=True)
    assert row["proven"] and row["event"] == 2 and row["live_bytes"] == 800 * KIB
    assert row["capacity_bytes"] == t.load_limit - t.memory_start
    assert sorted(row["largest_objects"]) == [0, 1]
    assert "above the" in row["reason"]


def test_proven_failure_by_interleaved_capacity():
    t = ipu21()
    objs = objects_frame([
        {"size_bytes": 220 * KIB, "first": 0, "last": 0, "class": "interleaved", "regions": [1], "align": 16},
        {"size_bytes": 220 * KIB, "first": 0, "last": 0, "class": "interleaved", "regions": [1], "align": 16},
    ])
    p = place(objs, t)
    row = p.failures.row(0, named=True)
    assert row["proven"] and "interleaved" in row["reason"]


def test_identical_tiles_placed_once():
    t = ipu21()
    objs = synthetic_objects(t, signatures=3, objects=(20, 40), seed=1)
    p = place(objs, t)
    assert p.distinct_tiles == 3
    assert p.fits
    verify_placement(objs, p.placement, t)
    assert p.placement.height == objs.height
    assert p.occupancy["tile"].n_unique() == t.tiles


def test_bad_objects_name_field_and_value():
    objs = objects_frame([{"size_bytes": -5, "first": 0, "last": 0}])
    with pytest.raises(ModelError, match=r"object 0 .*size_bytes=-5 is negative"):
        place(objs, ipu21())
    objs = objects_frame([{"size_bytes": 5, "first": 0, "last": 0, "align": 3}])
    with pytest.raises(ModelError, match=r"align=3 must be a positive power of two"):
        place(objs, ipu21())
    objs = objects_frame([{"size_bytes": 5, "first": 0, "last": 0, "class": "interleaved", "regions": [0]}])
    with pytest.raises(ModelError, match=r"interleaved but its regions allow none of regions \[1\]"):
        place(objs, ipu21())
    objs = objects_frame([{"size_bytes": 5, "first": 0, "last": 0, "alias_of": 9}])
    with pytest.raises(ModelError, match=r"alias_of=9 is not an object id"):
        place(objs, ipu21())


def test_verify_catches_overlap():
    t = ipu21()
    objs = objects_frame([{"size_bytes": 100, "first": 0, "last": 1}, {"size_bytes": 100, "first": 1, "last": 2}])
    p = place(objs, t)
    bad = p.placement.with_columns(pl.lit(t.memory_start, dtype=pl.Int64).alias("address"))
    with pytest.raises(InvalidIRError, match="share bytes while both live"):
        verify_placement(objs, bad, t)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(object_frames())
def test_random_mixed_class_lifetimes_never_overlap(objs):
    t = ipu21()
    p = place(objs, t)
    verify_placement(objs, p.placement, t, allow_missing=not p.fits)
    if not p.fits:
        assert p.failures.height == 1


@pytest.mark.parametrize(
    ("rows", "obj", "address", "message"),
    [
        ([{"size_bytes": 100, "first": 0, "last": 1, "separate_from": [1]}, {"size_bytes": 100, "first": 0, "last": 1}],
         1, 0x4C000 + 200, "bank-separated objects share a memory element"),
        ([{"size_bytes": 100, "first": 0, "last": 0}, {"size_bytes": 100, "first": 3, "last": 3, "auxiliary": True}],
         1, 0x4C000 + 40, "auxiliary object uses bytes"),
        ([{"size_bytes": 6000, "first": 0, "last": 9, "access": "executable", "regions": [0]},
          {"size_bytes": 100, "first": 0, "last": 9}], 1, 0x4C000 + 8192, "instruction element"),
        ([{"size_bytes": 100, "first": 0, "last": 9, "align": 16}], 0, 0x4C000 + 8, "not a multiple of align"),
        ([{"size_bytes": 100, "first": 0, "last": 9, "class": "interleaved", "regions": [1], "align": 16}], 0,
         0x4C000, "region column disagrees|not among the object's allowed regions|interleaved object outside"),
    ],
)
def test_verify_catches_rule_breaks(rows, obj, address, message):
    t = ipu21()
    objs = objects_frame(rows)
    p = place(objs, t)
    verify_placement(objs, p.placement, t)
    bad = p.placement.with_columns(pl.when(pl.col("object_id") == obj).then(address).otherwise(pl.col("address"))
                                   .alias("address"))
    with pytest.raises(InvalidIRError, match=message):
        verify_placement(objs, bad, t)


def test_no_objects_places_nothing():
    p = place(objects_frame([]), ipu21())
    assert p.fits and p.placement.height == 0 and p.distinct_tiles == 0


@pytest.mark.slow
def test_search_places_tile_where_greedy_orders_fail(shared_dir):
    # MiniMalloc instance J at half size on a 512 KiB tile: the greedy orders fail, the exact search fits
    std = [Element(offset=0x70000 + i * 16 * KIB, size=16 * KIB, region=0, interleaved=False) for i in range(4)]
    pairs = [Element(offset=0x80000 + i * 32 * KIB, size=32 * KIB, region=1, interleaved=True) for i in range(14)]
    t = dataclasses.replace(ipu21(), memory_start=0x70000, staging_base=0x70000, memory_end=0xF0000, load_limit=0xF0000,
                            memory_elements=tuple(std + pairs))
    d = pl.read_csv(shared_dir / "bench/placement/minimalloc/J.1048576.csv")
    objs = objects_frame([{"size_bytes": s // 2, "first": lo, "last": up - 1, "align": 16}
                          for lo, up, s in d.select("lower", "upper", "size").iter_rows()])
    from toolkit.placement import PlacementOptions

    # the node budget decides (not the clock): this tile needs about 200,000 nodes, past the 50,000 default
    assert not place(objs, t, PlacementOptions(search_seconds=60)).fits
    p = place(objs, t, PlacementOptions(search_seconds=60, search_nodes=1_000_000))
    assert p.fits, p.failures
    verify_placement(objs, p.placement, t)


@pytest.mark.slow
@pytest.mark.parametrize("code_bytes", [[6000, 3000], [20_000]])
def test_search_places_data_around_pinned_code(shared_dir, code_bytes):
    # the same tile with code on it (as every pipeline tile has): the executable objects take whole instruction
    # elements at the start of region 0 and the exact search places the data around them
    std = [Element(offset=0x70000 + i * 16 * KIB, size=16 * KIB, region=0, interleaved=False) for i in range(4)]
    pairs = [Element(offset=0x80000 + i * 32 * KIB, size=32 * KIB, region=1, interleaved=True) for i in range(14)]
    t = dataclasses.replace(ipu21(), memory_start=0x70000, staging_base=0x70000, memory_end=0xF0000, load_limit=0xF0000,
                            memory_elements=tuple(std + pairs))
    d = pl.read_csv(shared_dir / "bench/placement/minimalloc/J.1048576.csv")
    end = int(d["upper"].max())
    code = [{"kind": "code", "access": "executable", "regions": [0], "size_bytes": b, "first": 0, "last": end - 1,
             "align": 8} for b in code_bytes]
    scale = 0.45
    objs = objects_frame(code + [{"size_bytes": int(s * scale) // 16 * 16, "first": lo, "last": up - 1, "align": 16}
                                 for lo, up, s in d.select("lower", "upper", "size").iter_rows()])
    from toolkit.placement import PlacementOptions

    greedy_only = place(objs, t, PlacementOptions(search_seconds=1e-6))
    assert not greedy_only.fits                      # the greedy orders alone do not fit this tile
    p = place(objs, t, PlacementOptions(search_seconds=60))
    assert p.fits, p.failures
    verify_placement(objs, p.placement, t)
    got = p.placement.join(objs.select("object_id", "access"), on="object_id")
    code_at = got.filter(pl.col("access") == "executable")["address"].sort().to_list()
    assert code_at[0] == 0x70000                     # packed from the start of the code region


@pytest.mark.parametrize("field", ["search_seconds", "search_budget_seconds"])
def test_bad_placement_options_name_the_field(field):
    from toolkit.errors import OptionError
    from toolkit.placement import PlacementOptions

    with pytest.raises(OptionError, match=f"{field}=0 must be positive seconds"):
        PlacementOptions(**{field: 0})


@pytest.mark.parametrize("field", ["search_nodes", "search_budget_nodes"])
def test_bad_node_budgets_name_the_field(field):
    from toolkit.errors import OptionError
    from toolkit.placement import PlacementOptions

    with pytest.raises(OptionError, match=f"{field}=0 must be a positive number of search nodes"):
        PlacementOptions(**{field: 0})


def test_search_node_budget_bounds_the_exact_search():
    # the search stops at its node budget, never past it, and the same input with the same budget gets the same
    # answer whatever the clock says (the placement verdict does not depend on the machine's load)
    from toolkit.placement._arena_search import _search
    from toolkit.placement.arena import _sections

    rng = np.random.default_rng(3)
    lo = rng.integers(0, 40, 60)
    up = lo + rng.integers(1, 20, 60)
    size = rng.integers(1, 9, 60)
    sl, su, sections = _sections(lo, up)
    peak = max(int(size[(lo <= t) & (up > t)].sum()) for t in range(int(up.max())))
    for budget in (1, 7, 300):
        runs = [_search(lo, up, sl, su, size, sections, peak, deadline=float("inf"), max_nodes=budget)
                for _ in range(2)]
        (f1, e1, n1, r1), (f2, e2, n2, r2) = runs
        assert n1 <= budget and (n1, r1, e1) == (n2, r2, e2)
        assert (f1 is None) == (f2 is None) and (f1 is None or np.array_equal(f1, f2))
