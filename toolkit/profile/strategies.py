"""Hypothesis strategies for profiles (shipped in the package, like polars' own), and the synthetic generator."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import strategies as st

from toolkit import tables
from toolkit.profile.model import WRAP, Profile
from toolkit.profile.synthetic import synthetic_profile

__all__ = ["profiles", "synthetic_profile"]


@st.composite
def profiles(draw: st.DrawFn, max_tiles: int = 6, max_samples: int = 8, wrap: bool = True) -> Profile:
    """Small random profiles: per tile a first sample, then samples separated by random gaps.

    Tiles start within a few thousand cycles of each other. With ``wrap`` the
    base counter is drawn near 2**32, so counters often straddle the wrap.
    Samples may overlap the next one's start (hardware does not promise
    otherwise); every sample has a wrap-aware duration below 2**31.
    """
    n_tiles = draw(st.integers(1, max_tiles))
    base = draw(st.integers(WRAP - 40_000, WRAP + 40_000) if wrap else st.integers(0, WRAP - 1))
    counts = draw(st.lists(st.integers(1, max_samples), min_size=n_tiles, max_size=n_tiles))
    total = sum(counts)
    offsets = draw(st.lists(st.integers(0, 6_000), min_size=n_tiles, max_size=n_tiles))
    gaps = np.array(draw(st.lists(st.integers(0, 800), min_size=total, max_size=total)), np.int64)
    durs = np.array(draw(st.lists(st.integers(0, 5_000), min_size=total, max_size=total)), np.int64)
    kinds = draw(st.lists(st.sampled_from(tables.SAMPLE_KINDS), min_size=total, max_size=total))
    tiles = np.array(draw(st.permutations(range(max(n_tiles, 1) * 3)))[:n_tiles], np.int64)
    tiles.sort()
    counts_a = np.array(counts)
    owner = np.repeat(np.arange(n_tiles), counts_a)
    begin = np.cumsum(counts_a) - counts_a
    within = np.arange(total) - begin[owner]
    step = gaps + durs
    cum = np.cumsum(step) - step  # exclusive running sum over all samples
    rel = cum - cum[begin][owner] + gaps - gaps[begin][owner]
    start = base + np.array(offsets)[owner] + rel
    phase = within // 2
    samples = tables.frame({
        "tile": tiles[owner], "sample": within, "local_index": within, "phase": phase, "epoch": 0,
        "operation": pl.Series([f"op{p % 3}" for p in phase.tolist()], dtype=pl.String),
        "kind": pl.Series(kinds, dtype=pl.String), "kernel": pl.Series([f"k{p % 2}" for p in phase.tolist()]),
        "start_cycle": start % WRAP, "end_cycle": (start + durs) % WRAP, "exchange_event_cycles": 0,
    }, tables.SAMPLES_SCHEMA, what="samples")
    return Profile(samples=samples, clock_hz=draw(st.sampled_from([1.5e9, 1.33e9])), source="simulated")
