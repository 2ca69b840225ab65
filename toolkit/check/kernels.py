"""Simulated kernel numerics: one rule per kernel, each one numpy pass over every tile doing it.

Every rule takes the operand arrays of ``n`` commands (``[n, G, R, C]`` as read
from their objects: FP16 activations as float32, FP8 weights decoded,
FP32 partials) and returns float32 results that the caller rounds to the
output object's element type (FP16, or FP32 for partials).

- ``linear`` (``amp_matmul_f16`` / ``amp_matmul_f8``, ``_p32`` for FP32 partials,
  with weights): ``A W (+ b)``, rounded to the output object's type (FP16
  outputs and FP16 partials). The FP16 AMP accumulates in FP32
  (``partials="f16"`` instead rounds the running sum to FP16 after every
  16-deep inner block). The FP8 AMP (``f8v8hihov4amp``, docs/FP8.md of
  ``ipu-stack``: "FP16 accumulator inputs/outputs") carries its running sum as
  FP16 from one 32-deep K panel to the next, rounded after every panel
  (``partials="f32"`` forces FP32 accumulation everywhere).
  The FP8 AMP reads FP8 inputs: the FP16 left panel is cast to F143 at
  the activation scale (``KernelContext.scale``) first (round to nearest even, as the cast kernel);
  a left panel stored as F143 codes (an early cast) is multiplied as read
  (``linear_f8_codes``: the cast of an F143 value is the value itself).
  The bias is an operand of the first inner-split cell only, so it is added
  to that cell's partial.
- ``scores``: ``Q K^T`` (no scale here), ``values``: ``P V``; on the FP8 AMP
  (``_f8``: an FP8 attention product) both operands are cast to F143 at the
  activation scale (the cast of an operand stored as F143, an early cast, is
  the identity) and the sum is FP16 per 32-deep panel, as for ``linear_f8``.
- ``reduce``: sum of the S partials in FP32 (the bias is already in partial 0), plus the running sum a
  staged reduction's later epochs read.
- ``layernorm`` (eps 1e-6), ``gelu`` (tanh form), ``softmax`` of
  ``x / sqrt(head_dim)`` over the row, ``add``: computed in FP32.
"""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from toolkit.check.reference import GELU_C, LN_EPS, cast_activation, on_f16

AMP_BLOCK = 16
#: K depth of one FP8 AMP panel pass: the FP8 AMP's FP16 running sum is rounded after each
FP8_AMP_BLOCK = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelContext:
    head_dim: int
    partials: str  # "planned" (FP16 sums on the FP8 AMP only) | "f32" (FP32 everywhere) | "f16" (FP16 everywhere)
    scale: int = 0  # the F143 activation scale of FP8 operand casts


def _matmul(a: np.ndarray, b: np.ndarray, ctx: KernelContext, fp16_partials: bool,
            block: int = AMP_BLOCK) -> np.ndarray:
    if not fp16_partials:
        return np.matmul(a, b)
    k = a.shape[-1]
    acc = np.zeros((*a.shape[:-1], b.shape[-1]), dtype=np.float32)
    for lo in range(0, k, block):  # the AMP's inner blocks, in order (k / block steps, each over all tiles)
        acc = (acc + np.matmul(a[..., lo:lo + block], b[..., lo:lo + block, :])).astype(np.float16)
        acc = acc.astype(np.float32)
    return acc


def _fp16_sums(ctx: KernelContext, fp8_amp: bool, fp32_out: bool) -> tuple[bool, int]:
    """Whether an AMP kernel rounds its running sum to FP16, and after how deep a K block."""
    if fp32_out or ctx.partials == "f32":
        return False, AMP_BLOCK
    if fp8_amp:
        return True, FP8_AMP_BLOCK
    return ctx.partials == "f16", AMP_BLOCK


def linear(ins: list[np.ndarray], ws: list[np.ndarray | None], ctx: KernelContext, fp32_out: bool,
           fp8: bool = False, fp8_amp: bool = False) -> np.ndarray:
    a = ins[0][:, 0]                      # [n, rows, inner]
    if fp8:   # the cast of the left panel that feeds the FP8 AMP
        a = cast_activation(a, ctx.scale)
    w = ws[0][:, 0]                       # [n, inner, cols]
    y = _matmul(a, w, ctx, *_fp16_sums(ctx, fp8 or fp8_amp, fp32_out))
    if len(ws) > 1 and ws[1] is not None:
        y = y + ws[1][:, 0, 0][:, None, :]
    return y[:, None]


def scores(ins: list[np.ndarray], ws: list, ctx: KernelContext, fp8: bool = False,
           fp32_out: bool = False) -> np.ndarray:
    q, k = ins[0][:, 0], ins[1][:, 0]     # [n, rows, hd], [n, tokens, hd]
    if fp8:   # the FP8 AMP reads F143 casts of both operands (identity on operands stored as F143: early casts)
        q, k = cast_activation(q, ctx.scale), cast_activation(k, ctx.scale)
    return _matmul(q, np.swapaxes(k, 1, 2), ctx, *_fp16_sums(ctx, fp8, fp32_out))[:, None]


def values(ins: list[np.ndarray], ws: list, ctx: KernelContext, fp8: bool = False,
           fp32_out: bool = False) -> np.ndarray:
    p, v = ins[0][:, 0], ins[1][:, 0]     # [n, rows, tokens], [n, tokens, hd]
    if fp8:
        p, v = cast_activation(p, ctx.scale), cast_activation(v, ctx.scale)
    return _matmul(p, v, ctx, *_fp16_sums(ctx, fp8, fp32_out))[:, None]


def attention_stream(ins: list[np.ndarray], ws: list, ctx: KernelContext, last: bool) -> np.ndarray:
    """One key block of streaming attention (``toolkit.graph.streaming``): Q ``[n, rows, hd]``, the block's K and
    V ``[n, keys, hd]`` and (after the first block) the FP32 state ``[n, rows, hd + 2]`` (accumulator, running
    maximum, running sum) as ipu-stack's flash stages keep them (``kernel/attention.rs``): the QK product
    stored FP16; the block softmax's exponentials against the block's own maximum stored FP16, its maxima and
    sums FP32; the PV product stored FP16; the merge rescales the FP32 accumulator and sum by
    ``exp(m_old - m_new)`` and the block's by ``exp(m_block - m_new)``. Returns the new state, or after the
    last block the normalized output (rounded FP16 by the caller). Float64 operands (the check's local
    reference) run the same steps without the FP16 stores."""
    q, k, v = ins[0][:, 0], ins[1][:, 0], ins[2][:, 0]
    hd = q.shape[-1]
    rounds = q.dtype == np.float32   # the kernel as the tile runs it; float64: the exact local reference

    def stored(x: np.ndarray) -> np.ndarray:
        return x.astype(np.float16).astype(np.float32) if rounds else x

    z = stored(np.matmul(q, np.swapaxes(k, 1, 2))) * q.dtype.type(1.0 / np.sqrt(ctx.head_dim))
    m_b = z.max(axis=-1)
    e = stored(np.exp(z - m_b[..., None]))
    l_b = e.sum(axis=-1)
    pv = stored(np.matmul(e, v))
    if len(ins) > 3:
        st = ins[3][:, 0]
        acc, m, sums = st[..., :hd], st[..., hd], st[..., hd + 1]
        m_new = np.maximum(m, m_b)
        a, b = np.exp(m - m_new), np.exp(m_b - m_new)
        acc = acc * a[..., None] + pv * b[..., None]
        sums = sums * a + l_b * b
    else:
        acc, m_new, sums = pv, m_b, l_b
    if last:
        return (acc / sums[..., None])[:, None]
    return np.concatenate([acc, m_new[..., None], sums[..., None]], axis=-1)[:, None]


def reduce(ins: list[np.ndarray], ws: list, ctx: KernelContext) -> np.ndarray:
    """The sum of the partials in ``ins[0]``, plus the running sum ``ins[1]`` of a staged reduction's later epochs."""
    acc = np.result_type(ins[0], np.float32)
    total = ins[0].sum(axis=1, dtype=acc)[:, None]
    return total + ins[1].astype(acc) if len(ins) > 1 else total


def layernorm(ins: list[np.ndarray], ws: list, ctx: KernelContext) -> np.ndarray:
    x = ins[0]
    acc = np.result_type(x, np.float32)   # FP32 statistics (float64 when the check's local reference runs it)
    mean = x.mean(axis=-1, keepdims=True, dtype=acc)
    var = np.square(x - mean).mean(axis=-1, keepdims=True, dtype=acc)
    y = (x - mean) / np.sqrt(var + np.float32(LN_EPS))
    return y * ws[0][:, :, :1] + ws[1][:, :, :1]


def gelu(ins: list[np.ndarray], ws: list, ctx: KernelContext) -> np.ndarray:
    return on_f16(_gelu, ins[0])   # an FP16 operand: a table over the FP16 values


def _gelu(x: np.ndarray) -> np.ndarray:
    return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(np.float32(GELU_C) * (x + np.float32(0.044715) * x**3)))


def softmax(ins: list[np.ndarray], ws: list, ctx: KernelContext) -> np.ndarray:
    z = ins[0] * np.float32(1.0 / np.sqrt(ctx.head_dim))
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def add(ins: list[np.ndarray], ws: list, ctx: KernelContext) -> np.ndarray:
    return ins[0] + (ins[1] if len(ins) > 1 else ws[0])   # a weight operand: the table rows of these rows


Rule = Callable[[list[np.ndarray], list, KernelContext], np.ndarray]
RULES: dict[str, Rule] = {
    "linear_f16": lambda i, w, c: linear(i, w, c, fp32_out=False),
    "linear_f16_p32": lambda i, w, c: linear(i, w, c, fp32_out=True),
    "linear_f8": lambda i, w, c: linear(i, w, c, fp32_out=False, fp8=True),
    "linear_f8_p32": lambda i, w, c: linear(i, w, c, fp32_out=True, fp8=True),
    "linear_f8_codes": lambda i, w, c: linear(i, w, c, fp32_out=False, fp8_amp=True),  # F143 left: no cast
    "linear_f8_codes_p32": lambda i, w, c: linear(i, w, c, fp32_out=True, fp8_amp=True),
    "scores": scores,
    "values": values,
    "scores_f8": lambda i, w, c: scores(i, w, c, fp8=True),
    "values_f8": lambda i, w, c: values(i, w, c, fp8=True),
    "scores_f8_p32": lambda i, w, c: scores(i, w, c, fp8=True, fp32_out=True),
    "values_f8_p32": lambda i, w, c: values(i, w, c, fp8=True, fp32_out=True),
    "reduce": reduce,
    "attention_stream": lambda i, w, c: attention_stream(i, w, c, last=False),
    "attention_stream_last": lambda i, w, c: attention_stream(i, w, c, last=True),
    "layernorm": layernorm,
    "gelu": gelu,
    "softmax": softmax,
    "add": add,
}


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run numpy's OpenBLAS on one thread inside the block, then restore its thread count.

    The check multiplies thousands of small per-tile matrices; OpenBLAS threads
    on each tiny GEMM cost far more than they gain (measured 15x wall on a
    loaded 2-core machine). A no-op when numpy's OpenBLAS cannot be found.
    """
    get, put = _openblas_threads()
    if get is None:
        yield
        return
    old = get()
    put(1)
    try:
        yield
    finally:
        put(old)


def _openblas_threads():
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "*openblas*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_openblas", "64_"), ("openblas", "")):
            get = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
            put = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
            if get is not None and put is not None:
                get.restype = ctypes.c_int
                put.argtypes = [ctypes.c_int]
                return get, put
    return None, None


def rule_name(kernel: str, op_rule: str, has_weights: bool, left_f143: bool = False) -> str:
    """The rule of a command: its kernel, with AMP matmuls split by what they multiply (an FP8 AMP whose left
    operand is stored as F143 codes, an early cast, multiplies it as read)."""
    if kernel.startswith("amp_matmul"):
        if has_weights:
            name = "linear_" + kernel.removeprefix("amp_matmul_")
            return name.replace("linear_f8", "linear_f8_codes", 1) if left_f143 else name
        fp8 = kernel.startswith("amp_matmul_f8")   # an FP8 attention product: both operands cast to F143
        return op_rule + ("_f8" if fp8 else "") + ("_p32" if fp8 and kernel.endswith("_p32") else "")
    return kernel
