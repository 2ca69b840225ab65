"""The SRAM views drawn one above the other agree: one event axis, always-live objects marked."""

from __future__ import annotations

import polars as pl


def test_the_memory_map_and_the_line_chart_share_one_event_axis(small):
    """The map under the SRAM explorer and the line chart under it span the same events (they were 0-18 and
    0-16), and the largest-objects bars mark the always-live ones."""
    from toolkit.viz import memory_map, occupancy_over_time, peak_breakdown
    from toolkit.viz.memory import event_count
    objects = pl.concat([small.schedule.objects, small.package.objects], how="vertical_relaxed")
    occ, tile = small.placement.occupancy, int(small.placement.occupancy["tile"][0])
    events = event_count(objects, occ)
    assert events == max(int(objects["last"].max()), int(occ["event"].max())) + 1
    m = memory_map(objects, small.placement.placement, small.target, tile, occupancy=occ, events=events).to_dict()
    line = occupancy_over_time(occ, [tile], target=small.target, events=events).to_dict()
    assert m["layer"][0]["encoding"]["x"]["scale"]["domain"] == [0, events]
    assert line["layer"][0]["encoding"]["x"]["scale"]["domain"] == [0, events]
    spec = peak_breakdown(objects, small.placement.placement, occ, small.target, tile).to_dict()
    big = spec["hconcat"][1]
    rows = spec["datasets"][big["data"]["name"]]
    always = [r for r in rows if r["lifetime"] == "always live"]
    assert always and all(r["shown"].endswith(" [always live]") for r in always)
    assert big["title"].endswith(f"({len(always)} always live)")
