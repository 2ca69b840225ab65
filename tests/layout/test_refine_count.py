"""The compiled route counter of the beam refinement against the materialised ``route``."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.layout.layout import Layout, route
from toolkit.layout.refine import _count

TILES = 6


def _reference(src, need, waves, nbytes):
    """Counters from the materialised pieces: per (wave, tile) send/recv bytes, fragments, sends, copies, copy bytes."""
    n_w = int(waves.max()) + 1
    keys = ("send", "recv", "frags", "sends", "copies", "copy_bytes")
    out = {k: np.zeros((n_w, TILES), dtype=np.int64) for k in keys}
    p = route(src, need)
    cells = need.cells.ravel()[p["dst_chunk"] * need.replicas + p["replica"]]
    sent = set()
    for i in range(len(cells)):
        if p["dst_tile"][i] < 0 or cells[i] < 0:
            continue
        w, s, d = waves[cells[i]], p["src_tile"][i], p["dst_tile"][i]
        size = int((p["g1"][i] - p["g0"][i]) * (p["r1"][i] - p["r0"][i]) * (p["c1"][i] - p["c0"][i]) * nbytes)
        if s == d:
            out["copies"][w, d] += 1
            out["copy_bytes"][w, d] += size
            continue
        out["recv"][w, d] += size
        out["frags"][w, d] += 1
        piece = (p["src_chunk"][i], p["dst_chunk"][i])
        if piece not in sent:   # a multicast leaves its source once
            sent.add(piece)
            out["send"][w, s] += size
            out["sends"][w, s] += 1
    return out


@st.composite
def _bounds(draw, extent):
    inner = draw(st.sets(st.integers(1, extent - 1), max_size=3)) if extent > 1 else set()
    return np.array(sorted({0, extent, *inner}), dtype=np.int64)


@st.composite
def _case(draw):
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 9)), draw(st.integers(1, 9)))
    sb = tuple(draw(_bounds(e)) for e in shape)
    nb = tuple(draw(_bounds(e)) for e in shape)
    s_counts = tuple(len(b) - 1 for b in sb)
    n_counts = tuple(len(b) - 1 for b in nb)
    reps = draw(st.integers(1, 3))
    src_tiles = np.array(draw(st.lists(st.integers(0, TILES - 1), min_size=int(np.prod(s_counts)),
                                       max_size=int(np.prod(s_counts)))), dtype=np.int32)
    n_slots = int(np.prod(n_counts)) * reps
    need_tiles = np.array(draw(st.lists(st.integers(-1, TILES - 1), min_size=n_slots, max_size=n_slots)),
                          dtype=np.int32)
    n_cells = draw(st.integers(1, 5))
    cells = np.array(draw(st.lists(st.integers(-1, n_cells - 1), min_size=n_slots, max_size=n_slots)))
    waves = np.array(draw(st.lists(st.integers(0, 2), min_size=n_cells, max_size=n_cells)), dtype=np.int64)
    src = Layout(shape, sb, src_tiles.reshape(*s_counts, 1))
    need = Layout(shape, nb, need_tiles.reshape(*n_counts, reps), cells.reshape(*n_counts, reps))
    return src, need, waves, draw(st.sampled_from([1, 2, 4]))


@settings(max_examples=150, deadline=None)
@given(_case())
def test_count_matches_materialised_route(case):
    src, need, waves, nbytes = case
    want = _reference(src, need, waves, nbytes)
    n_w = int(waves.max()) + 1
    got = {k: np.zeros((n_w, TILES), dtype=np.int64) for k in want}
    _count(src, need, waves, nbytes, TILES, got["send"], got["recv"], got["frags"], got["sends"], got["copies"],
           got["copy_bytes"])
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
