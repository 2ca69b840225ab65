"""Hypothesis strategies for exchange tests: random transfer and group sets."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import polars as pl
from hypothesis import strategies as st


@st.composite
def transfer_sets(draw: st.DrawFn, *, max_tiles: int = 24, max_transfers: int = 30, multicast: bool = True,
                  max_bytes: int = 3000) -> pl.DataFrame:
    """A TRANSFERS_SCHEMA-like frame: phases, sources, 1..4 destinations, sizes up to ``max_bytes``."""
    tiles = draw(st.integers(2, max_tiles))
    n = draw(st.integers(1, max_transfers))
    rows: dict[str, list] = {k: [] for k in ("transfer_id", "phase", "source", "destination", "size_bytes",
                                            "staging_object", "src_offset", "dst_offset")}
    for tid in range(n):
        src = draw(st.integers(0, tiles - 1))
        others = [x for x in range(tiles) if x != src]
        fan = draw(st.integers(1, min(4, len(others)))) if multicast else 1
        dests = draw(st.lists(st.sampled_from(others), min_size=fan, max_size=fan, unique=True))
        size = draw(st.integers(1, max_bytes))
        phase = draw(st.integers(0, 2))
        direct = draw(st.booleans().map(lambda b: b and draw(st.booleans())))
        src_off = draw(st.integers(0, 64)) * 4
        for d in dests:
            rows["transfer_id"].append(tid * 3 + 1)
            rows["phase"].append(phase)
            rows["source"].append(src)
            rows["destination"].append(d)
            rows["size_bytes"].append(size)
            rows["staging_object"].append(None if direct else 1000 + d)
            rows["src_offset"].append(src_off)
            rows["dst_offset"].append(draw(st.integers(0, 16)) * 4)
    return pl.DataFrame(rows, schema={"transfer_id": pl.Int64, "phase": pl.Int32, "source": pl.Int32,
                                      "destination": pl.Int32, "size_bytes": pl.Int64, "staging_object": pl.Int64,
                                      "src_offset": pl.Int64, "dst_offset": pl.Int64})


@st.composite
def group_sets(draw: st.DrawFn, *, max_tiles: int = 12, max_groups: int = 40, max_fanout: int = 4) -> pl.DataFrame:
    """A ``group, source, destination`` frame (multicast when max_fanout > 1); group ids sparse and shuffled."""
    tiles = draw(st.integers(2, max_tiles))
    n = draw(st.integers(1, max_groups))
    ids = draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n, unique=True))
    g, s, d = [], [], []
    for gid in ids:
        src = draw(st.integers(0, tiles - 1))
        others = [x for x in range(tiles) if x != src]
        fan = draw(st.integers(1, min(max_fanout, len(others))))
        for dest in draw(st.lists(st.sampled_from(others), min_size=fan, max_size=fan, unique=True)):
            g.append(gid)
            s.append(src)
            d.append(dest)
    return pl.DataFrame({"group": g, "source": s, "destination": d})


def conflict_graph(groups: pl.DataFrame) -> tuple[nx.Graph, np.ndarray]:
    """networkx conflict graph built independently of the toolkit (lane cliques with dicts).

    Nodes are dense group indices in ascending group-id order (the order that makes
    networkx's DSATUR tie-breaking comparable); also returns the sorted group ids.
    """
    uniq = np.unique(groups["group"].to_numpy())
    index = {int(g): i for i, g in enumerate(uniq)}
    lanes: dict[tuple[str, int], set[int]] = {}
    for g, s, d in groups.select("group", "source", "destination").iter_rows():
        lanes.setdefault(("send", s), set()).add(index[g])
        lanes.setdefault(("receive", d), set()).add(index[g])
    graph = nx.Graph()
    graph.add_nodes_from(range(len(uniq)))
    for members in lanes.values():
        graph.add_edges_from(itertools.combinations(sorted(members), 2))
    return graph, uniq
