"""An ipu-stack memory profile beside our placement: the side-by-side chip maps and the SRAM explorer."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import toolkit
from toolkit.errors import OptionError
from toolkit.profile import compilation_memory_profile
from toolkit.viz import heatmaps_side_by_side
from toolkit.widgets import SramExplorer


@pytest.fixture(scope="module")
def profile(small: toolkit.Compilation, tmp_path_factory: pytest.TempPathFactory):
    return compilation_memory_profile(small, tmp_path_factory.mktemp("mp") / "small.json")


def test_the_synthetic_profile_is_labelled_and_holds_our_objects(small, profile) -> None:
    assert profile.synthetic and profile.label.startswith("synthetic stand-in for an ipu-stack memory profile v3")
    assert profile.tile_count == small.target.tiles
    # built from our objects: per tile its peak is our schedule's live bytes, below or at the placed peak
    ours = small.placement.occupancy.group_by("tile").agg(pl.col("live_bytes").max())
    theirs = profile.occupancy.group_by("tile").agg(pl.col("live_bytes").max().alias("estimate"))
    both = ours.join(theirs, on="tile")
    assert both.height == ours.height and (both["estimate"] <= both["live_bytes"]).all()
    assert (both["estimate"] > 0).any()


def test_side_by_side_maps_share_one_colour_scale(small, profile) -> None:
    spec = heatmaps_side_by_side({"ours": small.placement.occupancy, profile.label: profile.occupancy},
                                 small.target, color="headroom").to_dict()
    left, right = spec["hconcat"]
    assert left["encoding"]["color"]["scale"] == right["encoding"]["color"]["scale"]
    assert spec["resolve"]["scale"]["color"] == "shared"
    assert left["title"][0] == "ours" and "synthetic" in " ".join(right["title"])
    assert "params" not in left and "params" not in right   # no duplicate selection names
    with pytest.raises(OptionError, match="occupancies"):
        heatmaps_side_by_side({}, small.target)


def test_the_explorer_shows_the_profile_beside_our_placement(small, profile) -> None:
    ex = SramExplorer(small, memory_profile=profile)
    assert ex.compare_chart in ex.widget.children and ex.profile_chart in ex.widget.children
    tile = int(ex.tile.value)
    top = profile.occupancy.filter(pl.col("tile") == tile)["live_bytes"].max()
    assert f"peak {top:,} B at step" in ex.status.value and "before address placement" in ex.status.value
    spec = ex.profile_chart.chart.to_dict()
    assert f"tile {tile} in the synthetic" in " ".join(spec["title"]) if isinstance(spec["title"], list) \
        else f"tile {tile} in the synthetic" in spec["title"]
    plain = SramExplorer(small)
    assert plain.compare_chart not in plain.widget.children


def test_a_profile_of_other_tiles_is_refused(small, tmp_path: Path) -> None:
    from toolkit.profile.memory_profile import parse_memory_profile, synthetic_memory_profile
    other = parse_memory_profile(synthetic_memory_profile(small.schedule.objects.filter(pl.col("tile") < 4), 4))
    with pytest.raises(OptionError, match="memory_profile covers 4 tiles"):
        SramExplorer(small, memory_profile=other)
