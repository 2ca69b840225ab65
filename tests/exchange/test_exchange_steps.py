from __future__ import annotations

import networkx as nx
import numpy as np
import polars as pl
import pytest
from exchange_strategies import conflict_graph, group_sets
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.errors import ModelError
from toolkit.exchange import assign_steps, step_lower_bound
from toolkit.exchange.dsatur import _dsatur, conflict_csr
from toolkit.testing import regular_unicast


def assert_valid(out: pl.DataFrame) -> None:
    assert out["step"].dtype == pl.Int32
    assert (out.group_by("group").agg(pl.col("step").n_unique())["step"] == 1).all()
    sends = out.unique(["group"]).group_by("source", "step").len()
    assert sends["len"].max() == 1, "a tile sends twice in a step"
    receives = out.group_by("destination", "step").len()
    assert receives["len"].max() == 1, "a tile receives twice in a step"


def steps_used(out: pl.DataFrame) -> int:
    return int(out["step"].max()) + 1


# -- golden -----------------------------------------------------------------
def test_two_groups_from_one_source_take_two_steps() -> None:
    g = pl.DataFrame({"group": [5, 9], "source": [0, 0], "destination": [1, 2]})
    out = assign_steps(g)
    assert sorted(out["step"].to_list()) == [0, 1]
    assert step_lower_bound(g) == 2


def test_swap_pattern_takes_one_step() -> None:
    g = pl.DataFrame({"group": [0, 1], "source": [0, 1], "destination": [1, 0]})
    assert assign_steps(g)["step"].to_list() == [0, 0]


def test_multicast_rows_share_a_step_and_extra_columns_pass_through() -> None:
    g = pl.DataFrame({"group": [0, 0, 0, 1, 2], "source": [0, 0, 0, 1, 3], "destination": [1, 2, 3, 2, 0],
                      "note": ["a", "b", "c", "d", "e"]})
    out = assign_steps(g)
    assert out.columns == ["group", "source", "destination", "note", "step"]
    assert_valid(out)
    assert steps_used(out) == 2 == step_lower_bound(g)


def test_list_destinations_are_one_row_per_group() -> None:
    g = pl.DataFrame({"group": [0, 1], "source": [0, 1], "destination": [[1, 2], [2]]})
    out = assign_steps(g)
    assert out.height == 2
    assert out["step"][0] != out["step"][1]


def test_empty_frame() -> None:
    g = pl.DataFrame({"group": [], "source": [], "destination": []}, schema={c: pl.Int64 for c in
                                                                           ("group", "source", "destination")})
    assert assign_steps(g).height == 0
    assert step_lower_bound(g) == 0


def test_loopback_allowed_when_asked() -> None:
    g = pl.DataFrame({"group": [0, 1], "source": [0, 0], "destination": [0, 1]})
    out = assign_steps(g, loopback=True)
    assert_valid(out)
    assert steps_used(out) == 2


# -- properties -------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(group_sets(max_fanout=1, max_tiles=10, max_groups=60))
def test_unicast_is_exactly_the_bound(g: pl.DataFrame) -> None:
    out = assign_steps(g)
    assert_valid(out)
    assert steps_used(out) == step_lower_bound(g)


@settings(max_examples=60, deadline=None)
@given(group_sets(max_fanout=4))
def test_multicast_never_worse_than_networkx_dsatur(g: pl.DataFrame) -> None:
    out = assign_steps(g)
    assert_valid(out)
    graph, _ = conflict_graph(g)
    nx_steps = max(nx.greedy_color(graph, strategy="DSATUR").values()) + 1
    assert step_lower_bound(g) <= steps_used(out) <= nx_steps


@settings(max_examples=40, deadline=None)
@given(group_sets(max_fanout=3, max_groups=25))
def test_heap_dsatur_is_networkx_dsatur(g: pl.DataFrame) -> None:
    graph, uniq = conflict_graph(g)
    gid = np.searchsorted(uniq, g["group"].to_numpy())
    src = np.zeros(len(uniq), dtype=np.int64)
    src[gid] = g["source"].to_numpy()
    indptr, nbr = conflict_csr(gid, src, g["destination"].to_numpy().astype(np.int64))
    adj = [nbr[indptr[i]:indptr[i + 1]].tolist() for i in range(len(uniq))]
    ours = _dsatur(adj, np.diff(indptr).tolist())
    theirs = nx.greedy_color(graph, strategy="DSATUR")
    assert ours == [theirs[i] for i in range(len(uniq))]


@pytest.mark.parametrize("k", [3, 8])
def test_regular_unicast_on_all_tiles_meets_the_bound(k: int) -> None:
    g = regular_unicast(1472, k, seed=k)
    out = assign_steps(g)
    assert_valid(out)
    assert steps_used(out) == step_lower_bound(g) == k


@given(st.integers(1, 6), st.integers(0, 10))
@settings(max_examples=15, deadline=None)
def test_dense_multigraph_unicast(k: int, seed: int) -> None:
    # many parallel groups between few tiles: stresses the alternating-path recolouring
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 4, size=40 * k)
    dst = (src + rng.integers(1, 4, size=len(src))) % 4
    g = pl.DataFrame({"group": np.arange(len(src)), "source": src, "destination": dst})
    out = assign_steps(g)
    assert_valid(out)
    assert steps_used(out) == step_lower_bound(g)


# -- bad input --------------------------------------------------------------
@pytest.mark.parametrize(("frame", "match"), [
    ({"group": [0], "source": [0]}, r"missing column\(s\) \['destination'\]"),
    ({"group": [0], "source": [-1], "destination": [2]}, r"source=-1 in group 0 is negative"),
    ({"group": [0], "source": [1], "destination": [-3]}, r"destination=-3 in group 0 is negative"),
    ({"group": [4], "source": [1], "destination": [1]}, r"group 4 sends from tile 1 to itself .*loopback"),
    ({"group": [0, 7], "source": [1, 2], "destination": [2, None]}, r"group 7 has no destination \(empty group\)"),
    ({"group": [0, 1], "source": [1, 2], "destination": [[2], []]}, r"group 1 has no destination"),
    ({"group": [0, None], "source": [1, 2], "destination": [2, 3]}, r"column 'group' is null in row 1"),
    ({"group": [0, 0], "source": [1, 2], "destination": [2, 3]}, r"group 0 has several sources"),
    ({"group": [3, 3], "source": [1, 1], "destination": [2, 2]}, r"group 3 lists destination 2 twice"),
    ({"group": [0], "source": [1.5], "destination": [2]}, r"column 'source' must hold integers"),
])
def test_bad_groups(frame: dict, match: str) -> None:
    with pytest.raises(ModelError, match=match):
        assign_steps(pl.DataFrame(frame))


def test_not_a_frame() -> None:
    with pytest.raises(ModelError, match="groups must be a polars DataFrame"):
        assign_steps({"group": [0]})  # type: ignore[arg-type]
