"""03-profiles' labels: counts are integers wherever a chart shows them, and a timeline's title says what it draws."""

from __future__ import annotations

from toolkit.profile import barriers, crop, query, synthetic_profile, timeline_categories
from toolkit.viz import barrier_chart, phase_bars, timeline

PROFILE = synthetic_profile(8, 10, seed=1)


def _tooltips(spec: dict) -> dict[str, dict]:
    return {t["field"]: t for t in spec["encoding"]["tooltip"]}


def test_counts_in_tooltips_are_integers() -> None:
    """A tooltip showed "1472.0 tiles": integer columns carry an integer format (ids without separators)."""
    tips = _tooltips(phase_bars(query(crop(PROFILE), by="phase")).to_dict())
    assert tips["tiles"]["format"] == ",d" and tips["samples"]["format"] == ",d"
    assert tips["phase"]["format"] == "d" and "format" not in tips["wall_share"]
    tips = _tooltips(timeline(crop(PROFILE), tiles=4).to_dict())
    assert tips["tile"]["format"] == "d" and tips["duration_cycles"]["format"] == ",d"
    spec = barrier_chart(barriers(crop(PROFILE)).phases).to_dict()
    tips = _tooltips(spec["layer"][0])
    assert tips["latest_tile"]["format"] == "d" and tips["phase"]["format"] == "d"


def test_the_timeline_title_names_what_is_shown() -> None:
    spec = timeline(crop(PROFILE), tiles=range(2, 6), color="kernel").to_dict()
    assert spec["title"] == "40 samples of tiles 2..5, coloured by kernel, on cycles from the origin"
    assert spec["width"] == 720
    spec = timeline(crop(PROFILE), tiles=[0, 5]).to_dict()
    assert spec["title"].startswith("20 samples of 2 tiles, coloured by kind")
    cats = timeline_categories(PROFILE)
    assert "category pieces of tile 3" in timeline(cats, tiles=[3], color="category").to_dict()["title"]
