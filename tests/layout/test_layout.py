import numpy as np
import pytest

from toolkit.errors import InvalidIRError
from toolkit.layout.layout import Layout, block_bounds, even_bounds, homes, route, segmented_bounds, spread


def _layout(rows_b, cols_b, tiles, shape=None):
    shape = shape or (1, int(rows_b[-1]), int(cols_b[-1]))
    t = np.asarray(tiles, dtype=np.int32).reshape(1, len(rows_b) - 1, len(cols_b) - 1, -1)
    return Layout(shape, (np.array([0, 1]), np.asarray(rows_b), np.asarray(cols_b)), t)


def test_bounds_helpers():
    assert block_bounds(729, 36).tolist()[-3:] == [684, 720, 729]
    assert even_bounds(10, 3).tolist() == [0, 3, 7, 10]
    assert segmented_bounds(2, 5, 2).tolist() == [0, 2, 4, 5, 7, 9, 10]
    assert spread(4, 8).tolist() == [0, 1, 2, 3]
    assert homes(3, 8).tolist() == [5, 6, 7]
    assert spread(8, 4).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_route_2x2_transpose_of_blocks():
    # rows split on two tiles -> columns split on two tiles: four quarter pieces
    src = _layout([0, 2, 4], [0, 4], [0, 1])
    dst = _layout([0, 4], [0, 2, 4], [2, 3])
    p = route(src, dst)
    assert len(p["src_tile"]) == 4
    got = sorted(zip(p["src_tile"].tolist(), p["dst_tile"].tolist(), p["r0"].tolist(), p["c0"].tolist(),
                     strict=True))
    assert got == [(0, 2, 0, 0), (0, 3, 0, 2), (1, 2, 2, 0), (1, 3, 2, 2)]
    sizes = (p["r1"] - p["r0"]) * (p["c1"] - p["c0"])
    assert sizes.sum() == 16


def test_route_replicas_are_multicast_destinations():
    src = _layout([0, 3], [0, 5], [7])
    dst = _layout([0, 3], [0, 5], [1, 2, 3])
    p = route(src, dst)
    assert p["dst_tile"].tolist() == [1, 2, 3]
    assert set(p["src_chunk"].tolist()) == {0}


def test_bad_bounds_are_invalid_ir():
    with pytest.raises(InvalidIRError, match="must rise strictly from 0 to 4"):
        _layout([0, 2, 2, 4], [0, 4], [0, 1, 2])
