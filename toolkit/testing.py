"""Hypothesis strategies for the toolkit's inputs, shipped with the package.

``graphs()`` draws small MLP, attention and encoder graphs (uneven shapes,
repeats); ``layout_params()`` draws layout choices, pinned or free. The
placement and profile strategies live beside their stages and are re-exported
here: ``object_frames`` (memory objects of one tile) and ``profiles``
(cycle profiles, counters that may wrap past 2^32). ``regular_unicast()`` and
``random_multicast()`` are plain seeded numpy generators of random exchange
patterns (``group, source, destination`` frames), shared by the exchange tests
and ``benchmarks/bench_exchange.py``: the same seed gives the same frame.

Hypothesis is a test dependency; importing this module without it fails.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import strategies as st

from toolkit.graph import Graph, attention_block, encoder_layer, mlp_block, repeat
from toolkit.layout.plans import LayoutParams
from toolkit.placement.strategies import object_frames
from toolkit.profile.strategies import profiles


@st.composite
def graphs(draw: st.DrawFn, max_tokens: int = 40, max_batch: int = 3, max_blocks: int = 3) -> Graph:
    """A small graph: an MLP, an attention block (separate or fused QKV) or an encoder layer, maybe repeated."""
    kind = draw(st.sampled_from(["mlp", "attention", "attention-fused", "encoder"]))
    heads = draw(st.sampled_from([1, 2, 4]))
    width = 16 * draw(st.integers(1, 4)) * heads
    tokens = draw(st.integers(1, max_tokens))
    batch = draw(st.integers(1, max_batch))
    hidden = draw(st.integers(1, 100))
    if kind == "mlp":
        g = mlp_block(tokens=tokens, width=width, hidden=hidden, batch=batch)
    elif kind == "encoder":
        g = encoder_layer(tokens=tokens, width=width, hidden=hidden, heads=heads, batch=batch)
    else:
        g = attention_block(tokens=tokens, width=width, heads=heads, batch=batch, fused_qkv=kind.endswith("fused"))
    blocks = draw(st.integers(1, max_blocks))
    return repeat(g, blocks) if blocks > 1 else g


def layout_params(max_row_block: int = 48) -> st.SearchStrategy[LayoutParams]:
    """Layout choices: row block, stream block, row shard, inner split, weight class."""
    return st.builds(
        LayoutParams,
        row_block=st.integers(1, max_row_block),
        stream_block=st.one_of(st.none(), st.integers(1, max_row_block)),
        row_shard=st.one_of(st.none(), st.integers(1, 8)),
        panel_groups=st.one_of(st.none(), st.integers(1, 4)),
        inner_split=st.integers(1, 4),
        weight_class=st.sampled_from(["interleaved", "standard"]),
    )


def regular_unicast(tiles: int, k: int, seed: int) -> pl.DataFrame:
    """Union of k random permutations of the tiles, self loops dropped: one unicast group per edge.

    Every tile sends and receives at most ``k`` groups; group ids are ``0..n-1``.
    """
    rng = np.random.default_rng(seed)
    src, dst = [], []
    for _ in range(k):  # one permutation per round: k numpy calls
        perm = rng.permutation(tiles)
        keep = perm != np.arange(tiles)
        src.append(np.arange(tiles)[keep])
        dst.append(perm[keep])
    s = np.concatenate(src)
    return pl.DataFrame({"group": np.arange(len(s)), "source": s, "destination": np.concatenate(dst)})


def random_multicast(tiles: int, groups: int, max_fanout: int, seed: int) -> pl.DataFrame:
    """``groups`` multicast groups from random sources, each to 1..``max_fanout`` distinct other tiles.

    One row per (group, destination); a destination is never the group's source.
    """
    rng = np.random.default_rng(seed)
    src = rng.integers(0, tiles, size=groups)
    fan = rng.integers(1, max_fanout + 1, size=groups)
    gid = np.repeat(np.arange(groups), fan)
    # distinct destinations per group, none equal to the source: source + distinct nonzero shifts
    shift = np.concatenate([rng.choice(np.arange(1, tiles), size=f, replace=False) for f in fan])
    dst = (src[gid] + shift) % tiles
    return pl.DataFrame({"group": gid, "source": src[gid], "destination": dst})


__all__ = ["graphs", "layout_params", "object_frames", "profiles", "random_multicast", "regular_unicast"]
