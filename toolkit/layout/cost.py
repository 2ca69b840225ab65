"""How one work cell of an op plan becomes kernel invocations, priced by :mod:`toolkit.costs`.

Vectorized over cells: every function takes numpy columns. This module holds
no formula of its own: it maps a cell's geometry (rows, cols, inner, groups)
to the invocations the schedule emits for it (AMP calls of at most
``inner_block`` depth, the F16 -> FP8 cast of an FP8 matmul's left panel,
elementwise rows) and asks :func:`toolkit.costs.cycles` for their cycles, so
the layout screen, the refine step and the schedule's commands price a cell the
same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from toolkit.costs import (
    amp_panels,
    cycles,
    max_tile_row,
    phase_overhead_cycles,
    tile_horizon_cycles,
)
from toolkit.target import Target

if TYPE_CHECKING:
    from toolkit.layout.layout import Layout

#: bytes per element of a stored dtype
DTYPE_BYTES = {"f8_143": 1, "f8_152": 1, "f16": 2, "f32": 4}
#: bytes per element of inner-split partials
PARTIAL_BYTES = {"f16": 2, "f32": 4}


#: weight precisions (:data:`toolkit.costs.PRECISION`) whose AMP always reads its weights from interleaved compute
#: storage: ipu-stack materializes FP16 weights there whatever input memory class a plan requests (its
#: docs/MLP_LAYOUT_SWEEP.md: the standard-input down projection runs the same GEMM kernels; MLP_LAYOUT_ALTERNATIVES)
MATERIALIZED_PRECISIONS = ("f16",)


def compute_class(weight_class: str, precision: str) -> str:
    """The memory class an AMP reads a linear op's weights from, given the class they are stored in."""
    return "interleaved" if precision in MATERIALIZED_PRECISIONS else weight_class


def materialized(plan, weight_class: str) -> bool:
    """Whether a linear op's weights, stored in ``weight_class`` (the plan's or the layout's), are copied into
    interleaved compute storage before its AMP reads them: ipu-stack does so for F16 weights whose input class is
    standard (:data:`MATERIALIZED_PRECISIONS`); the schedule prices that copy (``plan``: an
    :class:`~toolkit.layout.plans.OpPlan`)."""
    return (plan.rule == "linear" and not plan.swapped and weight_class == "standard"
            and plan.precision in MATERIALIZED_PRECISIONS)


def weight_read_class(plan, weight_class: str) -> str:
    """The class an AMP op's coefficient operand is read from: a linear op's own weights as
    :func:`compute_class` says, a swapped op's activation coefficient and an attention product's designated
    coefficient in ``weight_class`` (the plan's or the layout's), every other AMP operand in standard memory
    (``plan``: an :class:`~toolkit.layout.plans.OpPlan`)."""
    if plan.rule == "linear" and not plan.swapped:
        return compute_class(weight_class, plan.precision)
    return weight_class if plan.rule == "linear" or plan.coefficient is not None else "standard"


#: op rules whose AMP operands are an attention product's, cast (when FP8 and late) by the packed cast
PRODUCT_RULES = ("scores", "values")


def kernel_casts(plan) -> dict[str, bool]:
    """The ``cast`` / ``cast_right`` flags of :func:`amp_cycles` for an AMP op plan, in the kernel's orientation:
    a swapped product streams the plan's right operand (a linear op's FP8 weights, already F143) as its left
    panel and reads the plan's left operand (the FP16 activation) as its coefficient, so the activation's cast is
    the kernel's right-panel cast, sized ``inner x`` the activation's rows."""
    packed = plan.rule in PRODUCT_RULES   # an attention product's operands: packed casts after distribution
    if plan.swapped:
        return {"cast": plan.cast_right, "cast_right": plan.cast_input, "packed": packed}
    return {"cast": plan.cast_input, "cast_right": plan.cast_right, "packed": packed}


def _ceil_div(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    return -(-np.asarray(a) // b)


def amp_cycles(rows: np.ndarray, cols: np.ndarray, inner: np.ndarray, target: Target, *,
               weight_class: str | np.ndarray,
               dtype: str = "f16", partials: str = "f16", inner_block: int | None = None,
               cast: bool = False, cast_right: bool = False,
               out_cast: bool = False, packed: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(cycles, calls, worker launches, cast cycles) of one AMP cell per row.

    One call covers the whole column panel and ``inner_block`` (None: all) of
    the inner dimension; every call is launched by the supervisor
    (``costs.launch_cycles``). Worker launches = coefficient panels (one
    launch of the six workers per panel). ``cast``: the left panel arrives as
    FP16 and is cast to FP8 on the tile before the FP8 AMP reads it (the
    ``cast`` rule on ``rows x inner x 2`` bytes), included in ``cycles``;
    ``cast_right`` likewise for the right panel (``inner x cols``: K or V of an
    FP8 attention product cast late); ``out_cast``: the FP16 result is stored
    as F143 (``rows x cols``: an FP8 product's operand cast early at its
    producer, the Q/K/V projection). ``packed``: the operand casts are an
    attention product's, after their F16 distribution (the ``cast_packed``
    rule instead of ``cast``).
    """
    rows, cols, inner = (np.asarray(a, dtype=np.int64) for a in (rows, cols, inner))
    ib = inner if inner_block is None else np.minimum(inner, inner_block)
    ib = np.maximum(ib, 1)
    full, rest = inner // ib, inner % ib
    kw = {"dtype": dtype, "weight_class": weight_class, "partials": partials}
    per_full = cycles("matmul", target, rows=rows, cols=cols, inner=ib, **kw)
    calls = full + (rest > 0)
    cyc = full * per_full + calls * target.costs.launch_cycles
    launches = full * amp_panels(cols, ib, dtype, target.costs)
    if np.any(rest > 0):   # a last call shorter than inner_block (none when the whole inner runs in one call)
        per_rest = cycles("matmul", target, rows=rows, cols=cols, inner=rest, **kw)
        cyc = cyc + np.where(rest > 0, per_rest, 0)
        launches = launches + amp_panels(cols, rest, dtype, target.costs)
    cast_cyc = cast_cycles(rows * inner, target, packed) if cast else np.zeros_like(cyc)
    if cast_right:
        cast_cyc = cast_cyc + cast_cycles(inner * cols, target, packed)
    if out_cast:
        cast_cyc = cast_cyc + cast_cycles(rows * cols, target)
    return cyc + cast_cyc, calls, launches, cast_cyc


def vector_cycles(kind: str, rows: np.ndarray, cols: np.ndarray, target: Target, *,
                  out_cast: bool = False) -> np.ndarray:
    """Cycles of one elementwise invocation of ``rows`` rows of width ``cols`` (plus its launch).

    ``out_cast``: the result is stored as F143 for FP8 matmuls (an early cast),
    priced as the cast rule on its FP16 bytes.
    """
    out = cycles(kind, target, rows=rows, cols=cols) + target.costs.launch_cycles
    if out_cast:
        out = out + cast_cycles(np.asarray(rows) * np.asarray(cols), target)
    return out


def cast_cycles(elements: np.ndarray, target: Target, packed: bool = False) -> np.ndarray:
    """F16 -> FP8 cast of ``elements`` values (the cast rule on their FP16 bytes; ``packed``: an attention
    product's operand after distribution, the ``cast_packed`` rule)."""
    return cycles("cast_packed" if packed else "cast", target, rows=1, cols=np.asarray(elements) * DTYPE_BYTES["f16"])


def unpack_cycles(rows: np.ndarray, cols: np.ndarray, target: Target) -> np.ndarray:
    """Cycles of one unpack of a swapped GEMM's ``rows x cols`` result into row-major rows (plus its launch)."""
    return cycles("unpack", target, rows=rows, cols=cols) + target.costs.launch_cycles


def merge_cycles(rows: np.ndarray, cols: np.ndarray, target: Target) -> np.ndarray:
    """Cycles of one attention merge of ``rows`` product rows of one head's ``cols`` values (plus its launch)."""
    return cycles("merge", target, rows=rows, cols=cols) + target.costs.launch_cycles


def rearrange_cycles(kernel: str, rows: np.ndarray, cols: np.ndarray, target: Target) -> np.ndarray:
    """Cycles of one rearrangement (``rearrange_left`` / ``rearrange_right``) of ``rows`` row-major rows of
    ``cols`` (plus its launch)."""
    return cycles(kernel, target, rows=rows, cols=cols) + target.costs.launch_cycles


def rearrange_pieces(plan, cells: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The query rearrangements of an attention scores plan (``plan.rearrange``), one per cell: ``(rows, cols)``
    of the given cells (default: all), its query rows (all groups) by the head's depth. The schedule's commands
    and the screen's price read the same pieces (``plan``: an :class:`~toolkit.layout.plans.OpPlan`)."""
    sh = plan.cell_shape if cells is None else plan.cell_shape[np.asarray(cells, dtype=np.int64)]
    return (sh[:, 0] * sh[:, 3]).astype(np.int64), sh[:, 2].astype(np.int64)


def prep_pieces(plan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The panels an attention product's coefficient is prepared in (``plan.prep``), one per placed slot:
    ``(tile, rows, cols)``; a transposed-right rearrangement works on whole panels (a short last key block is
    padded to the panel's rows). The schedule's commands and the screen's price read the same pieces."""
    ch = plan.prep.chunks()
    ok = ch["tile"] >= 0
    rows = (ch["r1"] - ch["r0"])[ok]
    if plan.prep_kernel == "rearrange_right" and len(rows):
        rows = np.full_like(rows, rows.max())
    return ch["tile"][ok].astype(np.int64), rows.astype(np.int64), (ch["c1"] - ch["c0"])[ok].astype(np.int64)


def merge_pieces(output: Layout, slots: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The attention merges of an attention product's result layout, one per chunk (its column shards are
    heads): ``(tile, rows, cols)`` of the given chunk slots (default: every placed one), ``cols`` the head's
    values. The schedule's merge commands and the screen's price read the same pieces."""
    ch = output.chunks()
    slots = np.nonzero(ch["tile"] >= 0)[0] if slots is None else np.asarray(slots, dtype=np.int64)
    rows = ((ch["g1"] - ch["g0"]) * (ch["r1"] - ch["r0"]))[slots]
    return ch["tile"][slots].astype(np.int64), rows.astype(np.int64), (ch["c1"] - ch["c0"])[slots].astype(np.int64)


def reduce_cycles(elements: np.ndarray, partials: int | np.ndarray, target: Target,
                  partials_dtype: str = "f16") -> np.ndarray:
    """Cycles of one reduction of ``partials`` partial slices into ``elements`` outputs (plus its launch)."""
    return cycles("reduce", target, rows=1, cols=elements, inner=partials, partials=partials_dtype) + (
        target.costs.launch_cycles)


def copy_cycles(size_bytes: np.ndarray, target: Target) -> np.ndarray:
    """Cycles of one local copy call of ``size_bytes``."""
    return cycles("copy", target, rows=1, cols=size_bytes)


def phase_exchange_cycles(max_tile_bytes: np.ndarray, max_tile_fragments: np.ndarray, target: Target,
                          runs: np.ndarray | int = 0, send_bytes: np.ndarray | None = None) -> np.ndarray:
    """Search estimate of one exchange phase: the exchange horizon rule (:func:`toolkit.costs.tile_horizon_cycles`,
    the one the lowering and the simulator lay phases out with) on its busiest tile, whose receives are
    ``max_tile_fragments`` cutovers, placed in the highest physical row, plus the phase overrun. The tile sends
    as much as it receives (a reduce-scatter; a gather's receive lane is the longer anyway) unless
    ``send_bytes`` says what the busiest sender sends (a staged reduction's epoch), ``runs`` of it in strided
    partial-panel runs."""
    words = _ceil_div(np.asarray(max_tile_bytes, dtype=np.int64), target.word_bytes)
    sent = words if send_bytes is None else _ceil_div(np.asarray(send_bytes, dtype=np.int64), target.word_bytes)
    return (tile_horizon_cycles(words, max_tile_fragments, sent, 0, max_tile_row(target), target, runs=runs)
            + phase_overhead_cycles(target))
