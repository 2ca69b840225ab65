"""The kernel rule table: one vectorized rule per kernel kind, from the hardware's measured formulas.

Every rule takes the invocation columns (numpy arrays or scalars, see
:mod:`toolkit.costs`) and ``Target.costs`` and returns the cycles of ONE
invocation on one tile. Each rule's docstring names its source and says where
a case has no measurement and the formula is derived from the nearest one.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from toolkit.options import PARTIALS
from toolkit.target import Costs, Target

KERNELS = ("matmul", "reduce", "gelu", "bias_gelu", "layernorm", "add_layernorm", "add", "softmax", "copy", "cast",
           "unpack", "merge", "rearrange_left", "rearrange_right", "cast_packed")
#: kernels that rewrite a result in place without changing its values as the functional check holds them (an
#: unpack or a rearrangement reorders; a merge normalizes what our softmax has already normalized)
IN_PLACE_KERNELS = ("unpack", "merge", "rearrange_left", "rearrange_right")
DTYPES = ("f16", "f8")
OUTPUTS = ("plain", "packed")
#: the element type (``f16`` / ``f8``) each stored tensor dtype feeds the AMP with
PRECISION = {"f16": "f16", "f32": "f16", "f8_143": "f8", "f8_152": "f8"}

#: the kernel symbols the schedule's commands name, and the rule that prices each
def amp_kernel(precision: str, partials: str | None = None) -> str:
    """A matmul's kernel symbol (a key of KERNEL_SYMBOLS): ``amp_matmul_<inputs>``, ``_p32`` for FP32 partials."""
    return f"amp_matmul_{precision}" + ("_p32" if partials == "f32" else "")


KERNEL_SYMBOLS = {
    **{amp_kernel(d, p): "matmul" for d in DTYPES for p in PARTIALS}, **{k: k for k in KERNELS if k != "matmul"},
}

INVOCATIONS_SCHEMA = {
    "kernel": pl.String, "dtype": pl.String, "weight_class": pl.String,
    "rows": pl.Int64, "cols": pl.Int64, "inner": pl.Int64,
}
OPTIONAL_COLUMNS = {"output": pl.String, "partials": pl.String, "padded": pl.Int64, "schedule": pl.String}
SCHEDULES = ("best", "split", "whole")

Cols = dict[str, np.ndarray]


def _cdiv(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
    return -(-np.asarray(a, dtype=np.int64) // b)


# -- rules ------------------------------------------------------------------------------------------------------
def amp_panels(cols: np.ndarray, inner: np.ndarray, dtype: np.ndarray | str, c: Costs) -> np.ndarray:
    """Coefficient panels of one AMP call: ``ceil(K' / 16) x ceil(C / 16)``, ``K' = K`` (FP16) or ``ceil(K/2)`` (FP8).

    A panel is K16 x C16 for FP16 and K32 x C16 for FP8 and costs the same for
    both (HARDWARE.md section 1), so FP8 runs at twice the FP16 MAC rate.
    """
    depth = np.where(np.asarray(dtype) == "f8", c.amp_panel_depth_f8, c.amp_panel_depth_f16)
    return _cdiv(inner, depth) * _cdiv(cols, c.amp_panel_cols)


def _matmul(x: Cols, c: Costs) -> np.ndarray:
    """AMP matmul (HARDWARE.md section 1).

    Interleaved weights, plain output: ``294 + panels (4 max(R, 16) + 160)``
    (stated within 2 % of hardware, 0.30 % median over 179 geometry keys; fewer
    rows than one 16-row AMP block cost a whole block, as the shared-row
    attention products measured). Packed
    output: six workers split the rows at 16-row panel boundaries,
    ``342 + panels (max_worker(24 rows + 184 chunks) + 170 | 202)`` (exact on
    the measured R48/K240/C64 rows). Standard weights, plain output: the tool's
    own pricing ``294 + ceil(K'/16) (ceil(C R / 4) + ceil(ceil(C/16) 1063 / 4))``,
    no hardware fixture. FP32 partials (only when asked; not measured) are
    derived from the AMP's half-rate FP32 accumulation: the row term doubles.
    """
    rows, cols, inner, dtype = x["rows"], x["cols"], x["inner"], x["dtype"]
    k_panels = _cdiv(inner, np.where(dtype == "f8", c.amp_panel_depth_f8, c.amp_panel_depth_f16))
    c_panels = _cdiv(cols, c.amp_panel_cols)
    panels = k_panels * c_panels
    row_factor = np.where(x["partials"] == "f32", 2, 1)
    inter = x["weight_class"] == "interleaved"
    out = np.zeros(np.broadcast(rows, cols, inner).shape, dtype=np.int64)
    if np.any(inter):
        plain = c.amp_call_cycles + panels * (c.amp_row_cycles * np.maximum(rows, c.amp_min_rows) * row_factor
                                              + c.amp_panel_cycles)
        out = np.where(inter, plain, out)
    if not np.all(inter):
        standard = c.amp_call_cycles + k_panels * (_cdiv(cols * rows * row_factor, 4)
                                                  + _cdiv(c_panels * c.amp_standard_feed_cycles, 4))
        out = np.where(inter, out, standard)
    packed_rows = x["output"] == "packed"
    if np.any(packed_rows):
        worker = _packed_worker(np.broadcast_to(rows, out.shape), c) * row_factor
        packed = c.amp_packed_call_cycles + panels * (worker + np.where(
            inter, c.amp_packed_panel_interleaved_cycles, c.amp_packed_panel_standard_cycles))
        out = np.where(packed_rows, packed, out)
    return out


def _packed_worker(rows: np.ndarray, c: Costs) -> np.ndarray:
    """Busiest worker of a packed store: balanced row ranges, each split at 16-row panel boundaries."""
    shape = np.shape(rows)
    w = np.arange(6)[None, :]
    r = np.asarray(rows, dtype=np.int64).reshape(-1, 1)
    count = r // 6 + (w < r % 6)
    start = w * (r // 6) + np.minimum(w, r % 6)
    chunks = _cdiv(start % c.amp_panel_cols + count, c.amp_panel_cols)
    per = np.where(count > 0, count * c.amp_packed_row_cycles + chunks * c.amp_packed_chunk_cycles, 0)
    return per.max(axis=1).reshape(shape)


def _reduce(x: Cols, c: Costs) -> np.ndarray:
    """FP16 reduction of P partials into E elements (HARDWARE.md section 2; exact on hardware samples).

    ``282 + 6 ceil(E / 48) (11 + 2 (P - 1))``; 0 when P < 2 (a one-partial sum is
    an identity). FP32 partials (not measured): two issue groups per partial more.
    """
    e, p = x["cols"], x["inner"]
    per_partial = np.where(x["partials"] == "f32", 2 * c.reduce_partial_cycles, c.reduce_partial_cycles)
    cyc = c.reduce_call_cycles + 6 * _cdiv(e, c.reduce_pass_elements) * (
        c.reduce_pass_cycles + per_partial * (p - 1))
    return np.where((p < 2) | (e == 0), 0, cyc)


def _gelu(x: Cols, c: Costs) -> np.ndarray:
    """GELU on ``rows x cols`` FP16 elements (HARDWARE.md section 3).

    Whole 16-element blocks: ``330 + 462 ceil(E / 96)``. Other even lengths run
    the pair path: six worker spans of 8-pair strides, 480 cycles per 48-pair
    block and 120 per tail pair, plus 330 (342 with a tail); the busiest
    worker decides (``ipu-stack``'s tail measurements, within 6 cycles).
    """
    e = np.asarray(x["rows"] * x["cols"], dtype=np.int64)
    aligned = c.gelu_call_cycles + _cdiv(e, c.gelu_block_elements) * c.gelu_block_cycles
    w = np.arange(6)[None, :]
    pairs = np.maximum(_cdiv(e, 2).reshape(-1, 1) - w * 8, 0)
    blocks = np.where(pairs < 8, 0, (pairs - 8) // 48 + 1)
    tail = np.maximum(pairs - blocks * 48, 0)
    span = (blocks * c.gelu_tail_block_cycles + tail * c.gelu_pair_cycles
            + np.where(tail == 0, c.gelu_call_cycles, c.gelu_tail_call_cycles))
    tailed = np.where(pairs > 0, span, 0).max(axis=1).reshape(e.shape)
    return np.where(e == 0, 0, np.where(e % 16 == 0, aligned, tailed))


def _bias_gelu(x: Cols, c: Costs) -> np.ndarray:
    """Fused bias add + GELU (MIX kernel, aligned rows of whole quads).

    ``450 + rows x 90 ceil(w / 24) + 228 (rows - 1)``: fifteen issue groups per
    quad over six workers. HARDWARE.md gives 1 x 2152 (8,550); the structure is
    fit to ``ipu-stack``'s direct-call table of the same kernel (1 x 16, 1 x 1408,
    1 x 2208, 3 x 2152), which it matches exactly.
    """
    rows, w = x["rows"], x["cols"]
    return np.where(rows * w == 0, 0, c.bias_gelu_call_cycles + rows * c.bias_gelu_quad_wave_cycles
                    * _cdiv(w, 24) + c.elementwise_row_cycles * np.maximum(rows - 1, 0))


def _layernorm(x: Cols, c: Costs, add: bool = False) -> np.ndarray:
    """LayerNorm of ``rows`` rows of width w, FP32 statistics (HARDWARE.md section 3).

    Aligned widths (w >= 96, multiple of 8): ``132 + rows (stats + apply + 1329)``
    with ``stats = 12 ceil(w/48) + 30 ceil(w/24) + 24`` and ``apply = 66 + 72
    ceil(w/24)`` (stated within meas/20 + 24). The fused residual add + LayerNorm
    adds 18 per 48 and 12 per 24 to the statistics, 12 per 24 to the apply and
    57 to the row setup (matches the measured 1 x 1152 fused 8,376 exactly).
    Narrow or unaligned widths (no measurement in HARDWARE.md) use the pair
    loops of the same kernel: 48 (72 fused) per 12 for the statistics, 60 (72)
    per 12 for the apply, setup 1200 (1290).
    """
    rows, w = x["rows"], x["cols"]
    aligned = (w >= 96) & (w % 8 == 0)
    stats = (c.ln_stats_per48_cycles + add * c.ln_add_stats_per48_cycles) * _cdiv(w, 48) + (
        c.ln_stats_per24_cycles + add * c.ln_add_stats_per24_cycles) * _cdiv(w, 24) + c.ln_stats_cycles
    apply = c.ln_apply_cycles + (c.ln_apply_per24_cycles + add * c.ln_add_apply_per24_cycles) * _cdiv(w, 24)
    setup = c.ln_row_setup_cycles + add * c.ln_add_row_setup_cycles
    narrow = (_cdiv(w, 12) * ((72 if add else 48) + (72 if add else 60)) + (1290 if add else 1200))
    per_row = np.where(aligned, stats + apply + setup, narrow)
    return np.where(rows * w == 0, 0, c.ln_call_cycles + rows * per_row)


def _add(x: Cols, c: Costs) -> np.ndarray:
    """Add of two FP16 tensors, rows x cols (HARDWARE.md section 3).

    Whole quads (cols a multiple of 4): ``504 + rows 18 ceil(cols/24) + 234 (rows - 1)``.
    Irregular widths use the pair loop, ``450 + 54 ceil(E / 12)`` (the kernel's
    own pricing; no measurement in HARDWARE.md).
    """
    rows, w = x["rows"], x["cols"]
    quads = (c.add_call_cycles + rows * c.add_per24_cycles * _cdiv(w, 24)
             + c.add_row_cycles * np.maximum(rows - 1, 0))
    pairs = 450 + 54 * _cdiv(rows * w, 12)
    return np.where(rows * w == 0, 0, np.where(w % 4 == 0, quads, pairs))


def _softmax(x: Cols, c: Costs) -> np.ndarray:
    """Row softmax over ``cols`` keys padded to ``padded`` (HARDWARE.md section 3): the cheaper schedule.

    Whole rows (one row per worker): ``launch + 6 ceil(rows / 6) row`` with 43
    cycles per full 16-key panel plus masked-tail and zero-padding loops.
    Split rows (three stages over 48-key segments, keys >= 128):
    ``408 + 6 ceil(rows / 2) (43 ceil(padded/48) + 128) + 126 ceil(rows / 6)``.
    Measured 729 keys / 768 padded: split 20,226 (7 rows) / 20,244 (8), whole
    rows 25,350; the tail terms are ``ipu-stack``'s instruction counts. A build without the split schedule
    (``softmax_split_rows`` 0: the original kernel, 71 cycles per full panel) runs whole rows.
    """
    rows, keys, padded = x["rows"], x["cols"], x["padded"]
    full = keys // 16
    row = 31 + full * c.softmax_panel_cycles
    exact = keys == padded
    rem = keys % 16
    pairs = rem // 2
    zero_pairs = 8 - _cdiv(rem, 2)
    zero_panels = np.maximum(padded // 16 - (full + 1), 0)
    masked = (5 + 6 * (full != 0) + 21 + np.where(full != 0, 4, 2) + 2 * (pairs != 0) + 12 * pairs + 12 * (keys % 2)
              + (zero_pairs != 0) + 2 * zero_pairs + (zero_panels != 0) + 10 * zero_panels)
    row = row + np.where(exact, 7, masked)
    launch = np.where(exact, c.softmax_whole_call_cycles, c.softmax_masked_call_cycles)
    whole = launch + 6 * _cdiv(rows, 6) * row
    segment = _cdiv(padded, 48) * c.softmax_panel_cycles + c.softmax_segment_cycles
    split = c.softmax_split_call_cycles + 6 * _cdiv(rows, 2) * segment + c.softmax_final_cycles * _cdiv(rows, 6)
    best = np.where((keys >= 128) & (c.softmax_split_rows != 0), np.minimum(whole, split), whole)
    best = np.where(x["schedule"] == "whole", whole, np.where(x["schedule"] == "split", split, best))
    return np.where(rows * keys == 0, 0, best)


def _copy(x: Cols, c: Costs) -> np.ndarray:
    """Six-worker local copy: 288 cycles per call plus 8 B/cycle (HARDWARE.md section 3)."""
    return np.where(x["cols"] == 0, 0, c.copy_call_cycles + _cdiv(x["cols"], c.copy_bytes_per_cycle))


def _cast(x: Cols, c: Costs) -> np.ndarray:
    """F16 -> FP8 cast of ``cols`` input bytes (no direct measurement in HARDWARE.md).

    Derived from the nearest measured case: the cast is a paced 64-bit
    load/store loop like the standard-to-interleaved paced copy (8 KiB: 1,308
    cycles), so it is priced as a copy call of its input bytes,
    ``288 + bytes / 8`` (1,312 for 8 KiB).
    """
    return np.where(x["cols"] == 0, 0, c.copy_call_cycles + _cdiv(x["cols"], c.cast_bytes_per_cycle))


def _cast_packed(x: Cols, c: Costs) -> np.ndarray:
    """F16 -> FP8 cast of an attention product's operand after its F16 distribution, ``cols`` input bytes: the
    cast packs the operand into the FP8 AMP's 32-deep panels and runs ipu-stack's unpipelined loop,
    ``288 + costs.cast_packed_group_cycles ceil(bytes / 8)`` (the larger PV cast of
    FP8_ATTENTION_AND_HOST_IO_2026_09_11.md: 6,888 cycles; this rule gives 6,636 for a 92 x 92 block)."""
    return np.where(x["cols"] == 0, 0, c.copy_call_cycles + c.cast_packed_group_cycles * _cdiv(x["cols"], 8))


def _unpack(x: Cols, c: Costs) -> np.ndarray:
    """Unpack of a swapped GEMM's result (the AMP's transposed-left order) into row-major rows of ``cols``.

    ipu-stack's ``unpack_transposed_amp_f16`` worker (``kernel/rearrange.rs``;
    its cost rule, no separate hardware fixture): six workers take row pairs,
    about fifteen issue slots per two columns,
    ``300 + ceil(rows / 12) (100 + ceil(C' / 2) 90)`` with ``C'`` the columns
    padded to the AMP's 16-column micro-panel. Checked against the one
    hardware figure that isolates it: grouping the Q and K unpacks into one
    phase saved 12,576 cycles (docs/QKV_PREPARATION.md), against 12,020 for
    one 16 x 116 unpack plus the 600-cycle sync.
    """
    rows, cols = np.asarray(x["rows"], dtype=np.int64), np.asarray(x["cols"], dtype=np.int64)
    padded = _cdiv(cols, c.amp_panel_cols) * c.amp_panel_cols
    cyc = c.unpack_call_cycles + _cdiv(rows, c.unpack_pass_rows) * (
        c.unpack_pass_cycles + _cdiv(padded, 2) * c.unpack_column_pair_cycles)
    return np.where(rows * cols == 0, 0, cyc)


def _merge(x: Cols, c: Costs) -> np.ndarray:
    """Attention merge of ``rows`` attention-product rows of ``cols`` values (one head): ipu-stack's
    AttentionMerge after the PV product (docs/ATTENTION_PRODUCT_LAYOUTS.md: "normalize and write result"; the
    softmax stores unnormalized exponentials and its FP32 denominators, docs/SOFTMAX_OPTIMIZATION.md). Six
    workers take whole rows, ``222 + 6 ceil(rows / 6) (31 + 3 floor(cols / 16) + 4 ceil(cols / 2))``: its cost
    fixtures (2,430 for a first merge of 7-8 rows x 72, without the final write's 3 cycles a row) give 2,466.
    """
    rows, cols = np.asarray(x["rows"], dtype=np.int64), np.asarray(x["cols"], dtype=np.int64)
    row = c.merge_row_cycles + c.merge_panel_cycles * (cols // c.amp_panel_cols) + c.merge_pair_cycles * _cdiv(cols, 2)
    return np.where(rows * cols == 0, 0, c.merge_call_cycles + 6 * _cdiv(rows, 6) * row)


def _rearrange_left(x: Cols, c: Costs) -> np.ndarray:
    """Rearrangement of ``rows`` row-major FP16 rows of ``cols`` into the AMP's left-operand order, the
    columns zero-padded to its 16-column micro-panel: ipu-stack's ``rearrange_amp_left_f16`` worker
    (``kernel/rearrange.rs``), one cycle per physical element. The attention's QK round measures it: its
    grid's preparation-and-GEMM round ran 23,010 cycles over a 12,798-cycle GEMM, and the PV round 19,080 over
    15,228 with no rearrangement (docs/FP8_ATTENTION_AND_HOST_IO_2026_09_11.md): 10,212 - 3,852 = 6,360 against
    6,480 physical elements of 81 query rows x 80.
    """
    rows, cols = np.asarray(x["rows"], dtype=np.int64), np.asarray(x["cols"], dtype=np.int64)
    return rows * (_cdiv(cols, c.amp_panel_cols) * c.amp_panel_cols) * c.rearrange_left_element_cycles


def _rearrange_right(x: Cols, c: Costs) -> np.ndarray:
    """Rearrangement of ``rows`` (physical, padded to the panel) row-major FP16 rows of ``cols`` into the AMP's
    transposed-right coefficient panel (an attention's K on its preparation owner): ipu-stack's
    ``kernel/rearrange.rs`` prices it at three cycles per physical element (the GEMM's coefficient permutation),
    3,083 cycles with the launch for a 64 x 16 panel. No hardware figure isolates it."""
    rows, cols = np.asarray(x["rows"], dtype=np.int64), np.asarray(x["cols"], dtype=np.int64)
    return rows * (_cdiv(cols, c.amp_panel_cols) * c.amp_panel_cols) * c.rearrange_right_element_cycles


RULES: dict[str, Callable[[Cols, Costs], np.ndarray]] = {
    "matmul": _matmul,
    "reduce": _reduce,
    "gelu": _gelu,
    "bias_gelu": _bias_gelu,
    "layernorm": _layernorm,
    "add_layernorm": lambda x, c: _layernorm(x, c, add=True),
    "add": _add,
    "softmax": _softmax,
    "copy": _copy,
    "cast": _cast,
    "cast_packed": _cast_packed,
    "unpack": _unpack,
    "merge": _merge,
    "rearrange_left": _rearrange_left,
    "rearrange_right": _rearrange_right,
}


def copies_cycles(calls, total_bytes, target: Target) -> np.ndarray:
    """``calls`` local copy calls moving ``total_bytes`` in all: the copy rule summed over the calls.

    Exact but for the per-call rounding of ``bytes / 8`` (under one cycle per
    call); the refine step counts copies this way without listing each one.
    """
    c = target.costs
    calls = np.asarray(calls, dtype=np.int64)
    return calls * c.copy_call_cycles + _cdiv(total_bytes, c.copy_bytes_per_cycle)
