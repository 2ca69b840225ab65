"""Where weights are kept when they are gathered before use rather than resident where they are read.

A gathered GEMM weight keeps each (inner, column) block once, cut by inner
rows into one piece per row partition, held by the tiles that read the next
block (ipu-stack's compact homes are a grid of their own, not the readers: its
documented fc1 gather, 7,048 cycles, moves about one whole 288 x 48 block to
every reader, MLP_LAYOUT_ALTERNATIVES.md); a gathered LayerNorm parameter keeps
balanced column pieces spread over the stream's home tiles. The schedule
routes the pieces into a whole block (or row) on every tile that reads it,
per repeat instance, from the iterated store.
"""

from __future__ import annotations

import numpy as np

from toolkit.layout.gemm import balanced_bounds, sub_bounds
from toolkit.layout.layout import Layout

#: narrowest piece (elements) of a gathered LayerNorm parameter: pieces are gathered by every home tile, so
#: fewer, larger pieces keep its receives few
STORE_PIECE_MIN = 64


def stream_store(width: int, homes: np.ndarray) -> Layout:
    """A gathered LayerNorm parameter ``[width]``: balanced column pieces of at least ``STORE_PIECE_MIN``,
    one per home tile, spread evenly over the home tiles."""
    pieces = max(1, min(len(homes), width // STORE_PIECE_MIN))
    g1 = np.array([0, 1])
    tiles = homes[(np.arange(pieces) * len(homes)) // pieces].reshape(1, 1, -1, 1)
    return Layout((1, 1, width), (g1, g1, balanced_bounds(width, pieces)), tiles)


def gathered_store(w_lay: Layout, inner_b: np.ndarray, spatial: np.ndarray) -> Layout:
    """Gathered weights: every (inner, column) block cut by inner rows into one piece per row partition, piece
    ``j`` of block ``b`` on row partition ``j``'s tile of block ``b + 1`` (blocks in (inner, column) order,
    cyclic): every tile holds one piece, and a block's readers receive all of it (with one block, the readers
    are the only tiles and keep their own pieces)."""
    shard, n_p, n_s = spatial.shape
    piece_b, j, s_of = sub_bounds(inner_b, shard)
    nxt = (s_of[:, None] * n_p + np.arange(n_p)[None, :] + 1) % (n_p * n_s)     # the next block's consumers
    tiles = spatial[j[:, None], nxt % n_p, nxt // n_p][None, :, :, None]     # (1, pieces, n_p, 1)
    return Layout(w_lay.shape, (w_lay.bounds[0], piece_b, w_lay.bounds[2]), tiles)


__all__ = ["STORE_PIECE_MIN", "gathered_store", "stream_store"]
