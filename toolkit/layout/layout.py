"""The first-class ``Layout`` type and routing between layouts.

Every tensor is viewed as ``[groups, rows, cols]`` (2-D tensors have one
group). A layout partitions each dimension into chunks (arbitrary boundaries,
so uneven shapes such as 729 rows or 4304 columns split without padding) and
maps every chunk to a tile, optionally replicated on several tiles (an operand
that several tiles need). A kernel operand's *need* is itself a layout: the
contiguous panel each tile must hold when the kernel runs. ``route`` computes,
in bulk, the rectangular pieces that move from a producer layout to a need.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from toolkit.errors import InvalidIRError


@dataclass(frozen=True, slots=True, eq=False)
class Layout:
    """Chunks of a ``[groups, rows, cols]`` tensor and the tiles holding them.

    ``bounds[d]`` are the chunk boundaries of dimension ``d`` (first 0, last the
    extent, strictly increasing). ``tiles`` has shape ``(nG, nR, nC, replicas)``.
    """

    shape: tuple[int, int, int]
    bounds: tuple[np.ndarray, np.ndarray, np.ndarray]
    tiles: np.ndarray
    cells: np.ndarray | None = None  # work cell using each (chunk, replica) slot, same shape as tiles

    def same_as(self, other: Layout) -> bool:
        """Same chunks on the same tiles (an operand can be read in place)."""
        return (self.shape == other.shape and self.tiles.shape == other.tiles.shape
                and all(np.array_equal(a, b) for a, b in zip(self.bounds, other.bounds, strict=True))
                and np.array_equal(self.tiles, other.tiles))

    def with_cells(self, cells: np.ndarray) -> Layout:
        return Layout(self.shape, self.bounds, self.tiles, cells.reshape(self.tiles.shape))

    def __post_init__(self) -> None:
        for d, (extent, b) in enumerate(zip(self.shape, self.bounds, strict=True)):
            if b[0] != 0 or b[-1] != extent or np.any(np.diff(b) <= 0):
                msg = f"layout bounds of dim {d} must rise strictly from 0 to {extent}, got {b[:8]}..."
                raise InvalidIRError(msg)
        want = (*self.counts, self.tiles.shape[-1])
        if self.tiles.shape != want:
            msg = f"layout tile map has shape {self.tiles.shape}, expected {want}"
            raise InvalidIRError(msg)

    @property
    def counts(self) -> tuple[int, int, int]:
        return (len(self.bounds[0]) - 1, len(self.bounds[1]) - 1, len(self.bounds[2]) - 1)

    @property
    def replicas(self) -> int:
        return int(self.tiles.shape[-1])

    def slot_elements(self) -> np.ndarray:
        """Elements of every (chunk, replica) slot, in ``tiles.ravel()`` order."""
        dg, dr, dc = (np.diff(b) for b in self.bounds)
        size = dg[:, None, None] * dr[None, :, None] * dc[None, None, :]
        return np.broadcast_to(size[..., None], self.tiles.shape).ravel()

    def chunks(self) -> dict[str, np.ndarray]:
        """One entry per (chunk, replica): chunk index, replica, tile and the rectangle."""
        ng, nr, nc = self.counts
        rep = self.replicas
        gi, ri, ci, k = (a.ravel() for a in np.meshgrid(np.arange(ng), np.arange(nr), np.arange(nc),
                                                        np.arange(rep), indexing="ij"))
        g, r, c = self.bounds
        return {
            "chunk": ((gi * nr + ri) * nc + ci).astype(np.int64), "replica": k.astype(np.int32),
            "tile": self.tiles.ravel().astype(np.int32),
            "g0": g[gi], "g1": g[gi + 1], "r0": r[ri], "r1": r[ri + 1], "c0": c[ci], "c1": c[ci + 1],
        }


def even_bounds(extent: int, parts: int) -> np.ndarray:
    """Boundaries of ``parts`` near-equal chunks of ``extent`` (never an empty chunk)."""
    parts = max(1, min(parts, extent))
    return np.unique(np.round(np.linspace(0, extent, parts + 1)).astype(np.int64))


def block_bounds(extent: int, block: int) -> np.ndarray:
    """Boundaries of chunks of ``block`` elements (the last may be short)."""
    return np.append(np.arange(0, extent, block, dtype=np.int64), np.int64(extent))


@functools.cache
def segmented_bounds(segments: int, extent: int, block: int) -> np.ndarray:
    """``segments`` consecutive runs of ``extent`` elements, each cut into ``block`` chunks.

    Used for batch-folded rows: images of 729 tokens cut into row blocks that
    never straddle two images. Cached (the search asks for the same few many
    times); the result is read-only.
    """
    one = block_bounds(extent, block)
    starts = (np.arange(segments, dtype=np.int64) * extent)[:, None]
    out = np.unique((starts + one[None, :]).ravel())
    out.flags.writeable = False
    return out


def spread(cells: int, tiles: int, base: int = 0) -> np.ndarray:
    """Map ``cells`` work cells onto tiles ``base ..`` one each, or in balanced contiguous runs past ``tiles``."""
    idx = np.arange(cells, dtype=np.int64)
    return (base + (idx * tiles) // max(cells, 1) if cells > tiles else base + idx).astype(np.int32)


def homes(n_rows: int, tiles: int) -> np.ndarray:
    """Home tiles of the residual stream's row blocks: the last tiles, away from the op grids that start at 0."""
    if n_rows >= tiles:
        return spread(n_rows, tiles)
    return (tiles - n_rows + np.arange(n_rows)).astype(np.int32)


def chunk_overlaps(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pairs (i, j) of overlapping chunks of two partitions of one dimension, with the overlap [lo, hi)."""
    lo = np.maximum(a[:-1, None], b[None, :-1])
    hi = np.minimum(a[1:, None], b[None, 1:])
    i, j = np.nonzero(hi > lo)
    return i, j, lo[i, j], hi[i, j]


def route(src: Layout, dst: Layout) -> dict[str, np.ndarray]:
    """Pieces moving from ``src`` (one replica per chunk) to every replica of ``dst``.

    Returns columns: src_chunk, dst_chunk, replica, src_tile, dst_tile and the
    piece rectangle g0..c1. One row per (piece, destination replica).
    """
    if src.shape != dst.shape:
        msg = f"cannot route between layouts of shapes {src.shape} and {dst.shape}"
        raise InvalidIRError(msg)
    per_dim = [chunk_overlaps(a, b) for a, b in zip(src.bounds, dst.bounds, strict=True)]
    n = [len(p[0]) for p in per_dim]
    ig, ir, ic = (a.ravel() for a in np.meshgrid(np.arange(n[0]), np.arange(n[1]), np.arange(n[2]), indexing="ij"))
    (gs, gd, g0, g1), (rs, rd, r0, r1), (cs, cd, c0, c1) = per_dim
    _sng, snr, snc = src.counts
    _dng, dnr, dnc = dst.counts
    s_chunk = (gs[ig] * snr + rs[ir]) * snc + cs[ic]
    d_chunk = (gd[ig] * dnr + rd[ir]) * dnc + cd[ic]
    rep = dst.replicas
    k = np.tile(np.arange(rep), len(s_chunk))
    pieces = {
        "src_chunk": np.repeat(s_chunk, rep), "dst_chunk": np.repeat(d_chunk, rep), "replica": k,
        "g0": np.repeat(g0[ig], rep), "g1": np.repeat(g1[ig], rep),
        "r0": np.repeat(r0[ir], rep), "r1": np.repeat(r1[ir], rep),
        "c0": np.repeat(c0[ic], rep), "c1": np.repeat(c1[ic], rep),
    }
    pieces["src_tile"] = src.tiles.reshape(-1, src.replicas)[pieces["src_chunk"], 0]
    pieces["dst_tile"] = dst.tiles.reshape(-1, rep)[pieces["dst_chunk"], k]
    return pieces


def remote_sources(src: Layout, dst: Layout) -> int:
    """The most pieces any tile of ``dst`` receives from other tiles when ``src`` is routed into it (each one a
    receive cutover at least)."""
    p = route(src, dst)
    remote = (p["dst_tile"] >= 0) & (p["src_tile"] >= 0) & (p["src_tile"] != p["dst_tile"])
    return int(np.bincount(p["dst_tile"][remote]).max(initial=0)) if remote.any() else 0

