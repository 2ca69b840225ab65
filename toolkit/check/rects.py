"""Tensor rectangles of memory objects: compiled gathers, scatters and bit comparisons.

An object holds one rectangle of a tensor ``[G, R, C]`` (``schedule.segments``:
``g0:g1, r0:r1, c0:c1``) packed row-major. The check moves whole groups of
objects of one shape at once between a tensor-shaped array and the objects'
packed rows ``[n, g * r * c]``. The compiled loops see bytes: element ``(gi, ri,
ci)`` of object ``i`` starts at byte ``(origin[i] + (gi * R + ri) * C + ci) * eb``
of the tensor, with ``origin`` from :func:`origins` and ``eb`` the element
bytes, so one compiled function serves every element type (the check keeps
element *bits*: uint8 F143 codes, uint16 FP16, uint32 FP32).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from toolkit.errors import InvalidIRError

if TYPE_CHECKING:
    from toolkit.check.run import Tables

#: (and-mask, equal-to, mantissa-mask) per element width: ``bits & m == e and bits & mant != 0`` is NaN
NAN_BITS = {1: (0xFF, 0x80, 0xFF), 2: (0x7C00, 0x7C00, 0x03FF), 4: (0x7F800000, 0x7F800000, 0x007FFFFF)}
#: the element bits that mark a tensor element as never written (a NaN of each width)
UNWRITTEN = {1: 0x80, 2: 0x7E00, 4: 0x7FC00000}
BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def origins(orect: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Flat element index in a tensor of ``shape`` of each object's first element (``orect``: g0 g1 r0 r1 c0 c1)."""
    _, rows, cols = shape
    return (orect[:, 0] * rows + orect[:, 2]) * cols + orect[:, 4]


def byte_args(tensor: np.ndarray, origin: np.ndarray, dims: tuple[int, int, int]) -> tuple:
    """The compiled loops' arguments for rectangles ``dims`` of ``tensor`` at element ``origin``: (the tensor's
    bytes, byte origins, groups, rows, row bytes, tensor rows, tensor row bytes)."""
    eb = tensor.itemsize
    g, r, c = dims
    return (tensor.reshape(-1).view(np.uint8), origin * eb, g, r, c * eb, tensor.shape[1], tensor.shape[2] * eb)


@njit(cache=True)
def gather_rects(src, origin, g, r, row, rows, pitch, out):  # pragma: no cover - compiled
    """``out[i] = `` the ``g x r`` rows of ``row`` bytes at byte ``origin[i]`` of ``src`` (``rows`` rows of
    ``pitch`` bytes per group), packed."""
    for i in range(origin.shape[0]):
        k = 0
        for gi in range(g):
            for ri in range(r):
                base = origin[i] + (gi * rows + ri) * pitch
                out[i, k:k + row] = src[base:base + row]
                k += row


@njit(cache=True)
def scatter_rects(dst, origin, g, r, row, rows, pitch, data):  # pragma: no cover - compiled
    """The inverse of :func:`gather_rects`: write ``data[i]`` into the rectangle at byte ``origin[i]``."""
    for i in range(origin.shape[0]):
        k = 0
        for gi in range(g):
            for ri in range(r):
                base = origin[i] + (gi * rows + ri) * pitch
                dst[base:base + row] = data[i, k:k + row]
                k += row


@njit(cache=True)
def same_bytes(got, src, origin, g, r, row, rows, pitch):  # pragma: no cover - compiled
    """Per object: ``got[i]`` holds exactly the bytes of its rectangle at byte ``origin[i]`` of ``src``."""
    ok = np.ones(origin.shape[0], dtype=np.bool_)
    for i in range(origin.shape[0]):
        k = 0
        diff = 0
        for gi in range(g):
            for ri in range(r):
                base = origin[i] + (gi * rows + ri) * pitch
                for e in range(row):
                    diff |= got[i, k + e] ^ src[base + e]
                k += row
        ok[i] = diff == 0
    return ok


def has_nan(bits: np.ndarray) -> bool:
    """Whether element bits (uint8 FP8 codes, uint16 FP16, uint32 FP32) hold a NaN anywhere."""
    return bool(_any_nan(np.ascontiguousarray(bits).reshape(-1).view(np.uint8), bits.itemsize,
                         *NAN_BITS[bits.itemsize]))


@njit(cache=True)
def _any_nan(b, eb, nan_and, nan_eq, nan_mant):  # pragma: no cover - compiled
    for e in range(0, b.shape[0], eb):
        v = 0
        for k in range(eb):
            v |= np.int64(b[e + k]) << (8 * k)
        if (v & nan_and) == nan_eq and (v & nan_mant) != 0:
            return True
    return False


def by_shape(t: Tables, objs: np.ndarray):
    """Objects split by rectangle shape: (objects, (g, r, c)) per distinct shape."""
    if not len(objs):
        return
    uniq, inv = np.unique(t.odims[objs], axis=0, return_inverse=True)
    inv = inv.ravel()
    for k, dims in enumerate(uniq):
        yield objs[inv == k], tuple(int(d) for d in dims)


def rect_origins(t: Tables, objs: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Flat index in a tensor of ``shape`` of each object's first element; every rectangle must lie inside the
    tensor (the compiled moves do not check)."""
    rect = t.orect[objs]
    lo, hi = rect[:, 0::2], rect[:, 1::2]
    bad = np.nonzero(((lo < 0) | (lo > hi) | (hi > np.asarray(shape))).any(axis=1))[0]
    if len(bad):
        o = int(objs[bad[0]])
        msg = (f"{len(bad)} objects hold a rectangle outside their tensor {int(t.otensor[o])} of shape "
               f"{tuple(int(d) for d in shape)}, e.g. object {o}: {t.orect[o].tolist()} (g0 g1 r0 r1 c0 c1) "
               "in schedule.segments")
        raise InvalidIRError(msg)
    return origins(rect, shape)


def gather(t: Tables, objs: np.ndarray, tensor: np.ndarray, dims: tuple[int, int, int]) -> np.ndarray:
    """The rectangles ``[n, g * r * c]`` of objects of one shape ``dims`` in ``tensor`` ``[G, R, C]``."""
    out = np.empty((len(objs), int(np.prod(dims))), dtype=tensor.dtype)
    gather_rects(*byte_args(tensor, rect_origins(t, objs, tensor.shape), dims), out.view(np.uint8))
    return out


def scatter(t: Tables, objs: np.ndarray, tensor: np.ndarray, dims: tuple[int, int, int], data: np.ndarray) -> None:
    """Write ``data`` ``[n, g * r * c]`` into the objects' rectangles of ``tensor`` (the inverse of :func:`gather`)."""
    data = np.ascontiguousarray(data, dtype=tensor.dtype).reshape(len(objs), -1)
    scatter_rects(*byte_args(tensor, rect_origins(t, objs, tensor.shape), dims), data.view(np.uint8))
