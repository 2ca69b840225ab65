"""Cropping: golden cases, wrap past 2**32, and the never-lengthens property."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import example, given, settings
from hypothesis import strategies as st

from toolkit import tables
from toolkit.profile import Profile, crop, synthetic_profile
from toolkit.profile.model import WRAP
from toolkit.profile.strategies import profiles


def _profile(rows: list[tuple[int, int, int, int]], shift: int = 0) -> Profile:
    """rows: (tile, sample, start, end) in unwrapped cycles; counters stored as (value + shift) mod 2**32."""
    t, s, a, b = (np.array(c, np.int64) for c in zip(*rows, strict=True))
    samples = tables.frame({
        "tile": t, "sample": s, "local_index": s, "phase": s, "epoch": 0, "operation": "op", "kind": "compute",
        "kernel": "k", "start_cycle": (a + shift) % WRAP, "end_cycle": (b + shift) % WRAP,
        "exchange_event_cycles": 0,
    }, tables.SAMPLES_SCHEMA)
    return Profile(samples=samples)


GOLDEN = [(0, 0, 100, 200), (0, 1, 200, 500), (1, 0, 150, 300), (1, 1, 300, 450)]


def test_crop_golden() -> None:
    c = crop(_profile(GOLDEN))
    assert (c.origin_cycle, c.cropped_cycles, c.tiles) == (150, 350, 2)
    assert c.samples["start_offset_cycles"].to_list() == [0, 50, 0, 150]
    assert c.samples["duration_cycles"].to_list() == [50, 300, 150, 150]
    s = crop(_profile(GOLDEN), shared_clock=True)
    assert (s.origin_cycle, s.cropped_cycles) == (100, 400)
    assert s.samples["start_offset_cycles"].to_list() == [0, 100, 50, 200]


def test_samples_wholly_before_the_origin_get_zero_length() -> None:
    c = crop(_profile([(0, 0, 0, 50), (0, 1, 50, 300), (1, 0, 100, 250)]))
    assert c.samples["duration_cycles"].to_list() == [0, 200, 150]
    assert c.cropped_cycles == 200


def test_counters_straddling_the_wrap_crop_correctly() -> None:
    want = crop(_profile(GOLDEN))
    for shift in (WRAP - 120, WRAP - 160, WRAP - 420, WRAP - 1):
        got = crop(_profile(GOLDEN, shift=shift))
        assert got.cropped_cycles == want.cropped_cycles == 350
        assert got.origin_cycle == (150 + shift) % WRAP
        assert got.samples["start_offset_cycles"].equals(want.samples["start_offset_cycles"])
        assert got.samples["end_offset_cycles"].equals(want.samples["end_offset_cycles"])


def test_tiles_on_both_sides_of_the_wrap() -> None:
    # tile 0 starts before the wrap, tile 1 after it: origin is tile 1's (small) counter
    p = _profile(GOLDEN, shift=WRAP - 125)
    assert p.samples["start_cycle"].to_list()[0] > p.samples["start_cycle"].to_list()[2]
    c = crop(p)
    assert (c.origin_cycle, c.cropped_cycles) == (25, 350)


def test_big_synthetic_profile_wrapping() -> None:
    a = crop(synthetic_profile(16, 40, seed=5, base_cycle=1_000))
    b = crop(synthetic_profile(16, 40, seed=5, base_cycle=WRAP - 30_000))
    assert a.cropped_cycles == b.cropped_cycles
    assert a.samples["duration_cycles"].equals(b.samples["duration_cycles"])


@settings(max_examples=60, deadline=None)
@given(profiles(), st.integers(0, WRAP - 1))
@example(_profile(GOLDEN, shift=WRAP - 160), 77)
def test_cropping_never_lengthens_and_is_shift_invariant(p: Profile, shift: int) -> None:
    c, shared = crop(p), crop(p, shared_clock=True)
    assert 0 <= c.cropped_cycles <= shared.cropped_cycles
    raw = (p.samples["end_cycle"] - p.samples["start_cycle"]) % WRAP
    assert (c.samples["duration_cycles"] <= raw).all()
    assert (c.samples["duration_cycles"] >= 0).all()
    assert shared.samples["duration_cycles"].equals(raw.rename("duration_cycles"))
    moved = Profile(samples=p.samples.with_columns((pl.col("start_cycle", "end_cycle") + shift) % WRAP))
    m = crop(moved)
    assert m.cropped_cycles == c.cropped_cycles
    assert m.samples["start_offset_cycles"].equals(c.samples["start_offset_cycles"])
