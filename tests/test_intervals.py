from __future__ import annotations

import numpy as np
import pytest

from toolkit.intervals import overlapping_pairs


def brute(tile, start, end):
    n = len(tile)
    return {(i, j) if (start[i], i) < (start[j], j) else (j, i) for i in range(n) for j in range(i + 1, n)
            if tile[i] == tile[j] and max(start[i], start[j]) < min(end[i], end[j])}


@pytest.mark.parametrize("scale", [1, 2**56])   # 2**56: keys too wide to pack, the merge path
def test_overlapping_pairs_match_brute_force(scale):
    rng = np.random.default_rng(1)
    for _ in range(50):
        n = int(rng.integers(0, 60))
        tile = rng.integers(0, 4, n)
        start = rng.integers(0, 50, n) * scale
        end = start + rng.integers(1, 20, n) * scale
        i, j = overlapping_pairs(tile, start, end)
        got = {(a, b) if (start[a], a) < (start[b], b) else (b, a) for a, b in zip(i.tolist(), j.tolist(), strict=True)}
        assert got == brute(tile, start, end) and len(got) == len(i)


def test_no_ranges_no_pairs():
    i, j = overlapping_pairs(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert len(i) == len(j) == 0
