"""The per-tile SRAM byte image of the functional check and bulk byte movement on it.

Only tiles that hold a placed object get a row; a row spans the addresses any
object uses (lowest placed address to the highest end, repeat instances
included), so a 64-tile program does not allocate 1472 x 624 KiB. Every address
the check touches is a *flat* index into ``Sram.flat``: ``row(tile) * span +
address - base``.

Bytes move as *runs* (contiguous byte ranges): a rectangle of a tensor that is
not contiguous in its object is one run per row (per group and row), built in
bulk by :func:`rect_runs`. The compiled kernels below copy runs one after
another (a tight loop of ``memcpy``; the run lists themselves are built with
numpy over every piece at once).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from numba import njit

from toolkit.errors import InfeasibleError, InvalidIRError

FILL_BYTE = 0xFF  # never-written memory reads as FP16 NaN (0xFFFF) and FP32 NaN, so stale reads show up


@njit(cache=True)
def copy_runs(src, src_start, dst, dst_start, length):  # pragma: no cover - compiled
    """``dst[dst_start[i]:+length[i]] = src[src_start[i]:+length[i]]`` for every run, in order."""
    for i in range(length.shape[0]):
        s = src_start[i]
        d = dst_start[i]
        n = length[i]
        dst[d:d + n] = src[s:s + n]


@njit(cache=True)
def gather_rows(src, start, n, out):  # pragma: no cover - compiled
    """``out[i] = src[start[i]:+n]`` (``out`` is ``[len(start), n]`` uint8)."""
    for i in range(start.shape[0]):
        out[i, :] = src[start[i]:start[i] + n]


@njit(cache=True)
def scatter_rows(dst, start, n, data):  # pragma: no cover - compiled
    """``dst[start[i]:+n] = data[i]``."""
    for i in range(start.shape[0]):
        dst[start[i]:start[i] + n] = data[i, :]


class Sram:
    """Byte image of every used tile's memory, with each object's placed address.

    ``start(objects, repeat_index)`` gives flat starts; ``repeat_index`` selects
    the instance of an iterated parameter (``address + i * stride_bytes``).
    """

    def __init__(self, objects: pl.DataFrame, placement: pl.DataFrame) -> None:
        n_obj = int(objects["object_id"].max()) + 1 if objects.height else 0
        placed = placement.join(objects.select("object_id", "size_bytes", "repeat_count"), on="object_id",
                                how="inner")
        missing = objects.join(placement.select("object_id"), on="object_id", how="anti")
        if missing.height:
            tiles = sorted(set(missing["tile"].to_list()))[:8]
            msg = (f"cannot check: {missing.height} memory objects are not placed (tiles {tiles}...); "
                   "placement failed, so there is no SRAM image to run; see compilation.placement.failures")
            raise InfeasibleError(msg, field="placement", value=missing.height)
        oid = placed["object_id"].to_numpy()
        tile = placed["tile"].to_numpy().astype(np.int64)
        addr = placed["address"].to_numpy().astype(np.int64)
        stride = placed["stride_bytes"].to_numpy().astype(np.int64)
        size = placed["size_bytes"].to_numpy().astype(np.int64)
        reps = placed["repeat_count"].to_numpy().astype(np.int64)
        end = addr + np.where(reps > 1, (reps - 1) * stride, 0) + size
        self.base = int(addr.min()) if len(addr) else 0
        self.span = int(end.max()) - self.base if len(addr) else 1
        self.tiles = np.unique(tile)
        self.row_of_tile = np.full(int(self.tiles.max()) + 1 if len(self.tiles) else 1, -1, dtype=np.int64)
        self.row_of_tile[self.tiles] = np.arange(len(self.tiles))
        self.flat = np.full(len(self.tiles) * self.span, FILL_BYTE, dtype=np.uint8)
        self.tile = np.full(n_obj, -1, dtype=np.int64)
        self.address = np.full(n_obj, -1, dtype=np.int64)
        self.stride = np.zeros(n_obj, dtype=np.int64)
        self.size = np.zeros(n_obj, dtype=np.int64)
        self.tile[oid] = tile
        self.address[oid] = addr
        self.stride[oid] = np.where(reps > 1, stride, 0)
        self.size[oid] = size
        self._start = self.row_of_tile[tile] * self.span + addr - self.base
        self.start0 = np.full(n_obj, -1, dtype=np.int64)
        self.start0[oid] = self._start

    def start(self, objects: np.ndarray, repeat_index: np.ndarray | int = 0) -> np.ndarray:
        """Flat start of each object (instance ``repeat_index`` of an iterated parameter)."""
        return self.start0[objects] + self.stride[objects] * repeat_index

    def address_of(self, flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(tile, address) of flat indices."""
        row, off = np.divmod(flat, self.span)
        return self.tiles[row], off + self.base

    def read(self, start: np.ndarray, nbytes: int) -> np.ndarray:
        """``[len(start), nbytes]`` uint8 copy of equal-length byte ranges."""
        out = np.empty((len(start), nbytes), dtype=np.uint8)
        gather_rows(self.flat, start.astype(np.int64), nbytes, out)
        return out

    def write(self, start: np.ndarray, data: np.ndarray) -> None:
        """Write rows of ``data`` (``[len(start), nbytes]``, any dtype viewed as bytes) at ``start``."""
        raw = np.ascontiguousarray(data).reshape(len(start), -1).view(np.uint8)
        scatter_rows(self.flat, start.astype(np.int64), raw.shape[1], raw)


def ranks(counts: np.ndarray) -> np.ndarray:
    """``0..counts[i]-1`` for every i, concatenated."""
    counts = counts.astype(np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(total, dtype=np.int64) - first


def rect_runs(start: np.ndarray, dims: np.ndarray, rows_in: np.ndarray, cols_in: np.ndarray,
              elem_bytes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Row runs of rectangles ``dims = [pieces, 3]`` (groups, rows, cols) inside row-major objects.

    ``start`` is the flat address of each piece's first element, ``rows_in`` /
    ``cols_in`` the object's own rows and columns. Returns (piece, flat start,
    length, offset of the run in the piece's packed row-major byte stream).
    A rectangle of whole rows is one run; any other is one run per (group, row).
    """
    g, r, c = dims[:, 0], dims[:, 1], dims[:, 2]
    # a rectangle of whole rows (and whole groups) is one contiguous run in its object
    whole = (c == cols_in) & ((g == 1) | (r == rows_in))
    n_runs = np.where(whole, 1, g * r)
    piece = np.repeat(np.arange(len(start)), n_runs)
    k = ranks(n_runs)
    gi, ri = np.divmod(k, r[piece])
    b = elem_bytes[piece]
    flat = start[piece] + ((gi * rows_in[piece] + ri) * cols_in[piece]) * b
    length = np.where(whole[piece], g[piece] * r[piece] * c[piece], c[piece]) * b
    packed = k * length
    return piece, flat, length, packed


def check_runs(sram: Sram, start: np.ndarray, length: np.ndarray, what: str) -> None:
    """Runs must stay inside the image (the compiled copy loops do not check)."""
    if len(start) and (start.min() < 0 or (start + length).max() > sram.flat.size):
        bad = int(np.argmax((start < 0) | (start + length > sram.flat.size)))
        msg = f"{what}: a byte run at flat offset {int(start[bad])} (+{int(length[bad])}) falls outside the SRAM image"
        raise InvalidIRError(msg)


