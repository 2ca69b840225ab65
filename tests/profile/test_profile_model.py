"""The profile data model: frames given as LazyFrames are collected once, on first read."""

from __future__ import annotations

import dataclasses
import pickle

import polars as pl
import pytest
from hypothesis import given, settings

from toolkit import tables
from toolkit.profile import Profile, crop, query, synthetic_profile
from toolkit.profile.strategies import profiles


def _lazy(p: Profile) -> Profile:
    """The same profile with every frame given as a LazyFrame (behind a no-op step, so nothing is shared)."""
    return Profile(**{n: getattr(p, n).lazy().select(pl.all()) for n in ("samples", "activities", "metadata")},
                   clock_hz=p.clock_hz, schema_version=p.schema_version, source=p.source)


def test_lazy_frames_are_collected_once_on_read() -> None:
    p = _lazy(synthetic_profile(4, 6, seed=1))
    assert not any(p.collected(n) for n in ("samples", "activities", "metadata"))
    assert "samples=<lazy>" in repr(p)            # showing a profile expands nothing
    assert p.tiles == 4 and not p.collected("samples")
    first = p.samples
    assert isinstance(first, pl.DataFrame) and p.collected("samples") and p.samples is first
    assert not p.collected("activities")
    assert p.lazy("samples").collect().equals(first)


def test_lazy_profile_reads_like_the_eager_one() -> None:
    eager = synthetic_profile(3, 8, seed=4)
    lazy = _lazy(eager)
    a, b = crop(eager), crop(lazy)
    assert (a.origin_cycle, a.cropped_cycles, a.tiles) == (b.origin_cycle, b.cropped_cycles, b.tiles)
    assert not lazy.collected("samples")          # the crop read only the counter columns
    assert "samples=<lazy>" in repr(b)
    assert b.samples.equals(a.samples)
    assert query(lazy, by="tile").equals(query(eager, by="tile"))
    for name in ("samples", "activities", "metadata"):
        assert getattr(lazy, name).equals(getattr(eager, name)), name


def test_lazy_profile_pickles_and_replaces() -> None:
    eager = synthetic_profile(2, 5, seed=2)
    back = pickle.loads(pickle.dumps(_lazy(eager)))
    assert back.activities.equals(eager.activities)
    moved = dataclasses.replace(_lazy(eager), clock_hz=1.0e9)
    assert moved.clock_hz == 1.0e9 and moved.samples.equals(eager.samples)
    with pytest.raises(dataclasses.FrozenInstanceError):
        eager.samples = eager.samples  # type: ignore[misc]


def test_frames_must_be_polars_frames() -> None:
    with pytest.raises(TypeError, match=r"Profile.samples must be a polars DataFrame or LazyFrame, not dict"):
        Profile(samples={"tile": [0]})  # type: ignore[arg-type]
    with pytest.raises(KeyError, match=r"profile frame 'steps' does not exist; use one of"):
        Profile(samples=tables.empty(tables.SAMPLES_SCHEMA)).lazy("steps")


@settings(max_examples=25, deadline=None)
@given(profiles())
def test_crop_of_a_lazy_profile_equals_the_eager_crop(p: Profile) -> None:
    for shared in (False, True):
        a, b = crop(p, shared_clock=shared), crop(_lazy(p), shared_clock=shared)
        assert (a.origin_cycle, a.cropped_cycles, a.tiles) == (b.origin_cycle, b.cropped_cycles, b.tiles)
        assert b.samples.equals(a.samples)
