"""The cost model: cycles of one kernel invocation on one tile, and of exchange work.

One rule per kernel kind, each a vectorized function of the invocation's
columns; every constant is a field of ``Target.costs`` (overridable, validated,
loadable from a target file). The schedule's commands, the layout search's
screen and refine steps, the exchange lowering and the simulator all price
through this module, so an estimate in the search and a simulated phase use the
same formula by construction.

Sources. The formulas are the hardware-measured ones of ``shared/HARDWARE.md``
(``ipu-stack``'s C600 kernel measurements, September 2026); the rows they are
checked against live in ``tests/data/hardware_kernels.csv``. Each rule's
docstring names its source and says where a case has no measurement and the
formula is derived from the nearest measured one.

Invocation columns (:data:`INVOCATIONS_SCHEMA`):

=============  ================================================================
kernel         ``matmul``, ``reduce``, ``gelu``, ``bias_gelu``, ``layernorm``,
               ``add_layernorm``, ``add``, ``softmax``, ``copy``, ``cast``
dtype          ``f16`` or ``f8`` (matmul: the inputs fed to the AMP)
weight_class   ``interleaved`` / ``standard`` (matmul only, null elsewhere)
rows           matmul R (output rows); elementwise rows; reduce 1
cols           matmul C; reduce output elements E; elementwise row width
               (softmax: keys); copy and cast: bytes read
inner          matmul K; reduce partials P; 0 elsewhere
output         optional, matmul: ``plain`` (default) or ``packed`` stores
partials       optional, matmul: ``f16`` (default, the hardware's) or ``f32``
padded         optional, softmax: padded key count (default: keys rounded
               up to 64, as the measured 25 -> 64 and 729 -> 768 cases)
schedule       optional, softmax: ``best`` (default: the cheaper), ``split``
               (split rows; needs >= 128 keys) or ``whole`` (one row per worker)
=============  ================================================================
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl

from toolkit.errors import OptionError
from toolkit.target import Costs, Target, ipu21

KERNELS = ("matmul", "reduce", "gelu", "bias_gelu", "layernorm", "add_layernorm", "add", "softmax", "copy", "cast")
DTYPES = ("f16", "f8")
WEIGHT_CLASSES = ("interleaved", "standard")
OUTPUTS = ("plain", "packed")
PARTIALS = ("f16", "f32")
#: the element type (``f16`` / ``f8``) each stored tensor dtype feeds the AMP with
PRECISION = {"f16": "f16", "f32": "f16", "f8_143": "f8", "f8_152": "f8"}

#: the kernel symbols the schedule's commands name, and the rule that prices each
KERNEL_SYMBOLS = {
    "amp_matmul_f16": "matmul", "amp_matmul_f8": "matmul", "amp_matmul_f16_p32": "matmul",
    "amp_matmul_f8_p32": "matmul", **{k: k for k in KERNELS if k != "matmul"},
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

    Interleaved weights, plain output: ``294 + panels (4 R + 160)`` (stated
    within 2 % of hardware, 0.30 % median over 179 geometry keys). Packed
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
        plain = c.amp_call_cycles + panels * (c.amp_row_cycles * rows * row_factor + c.amp_panel_cycles)
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
    rows 25,350; the tail terms are ``ipu-stack``'s instruction counts.
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
    best = np.where(keys >= 128, np.minimum(whole, split), whole)
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
}


# -- the public contract ------------------------------------------------------------------------------------------
def kernel_cycles(invocations: pl.DataFrame, target: Target | None = None) -> pl.Series:
    """Cycles of ONE invocation on one tile per row (Int64), from the rule of its ``kernel``.

    ``invocations`` has the columns of :data:`INVOCATIONS_SCHEMA` (and any of
    :data:`OPTIONAL_COLUMNS`); see the module docstring. Unknown kernels, bad
    dtypes, weight classes or sizes raise :class:`OptionError` naming the row
    and the field. Cycles include the kernel call and the workers' setup, not
    the supervisor's launch (``costs.launch_cycles``).
    """
    x = _columns(invocations)
    c = (target or ipu21()).costs
    out = np.zeros(invocations.height, dtype=np.int64)
    for kernel, rule in RULES.items():
        sel = x["kernel"] == kernel
        if sel.any():
            out[sel] = rule({k: v[sel] for k, v in x.items()}, c)
    return pl.Series("cycles", out, dtype=pl.Int64)


def _columns(inv: pl.DataFrame) -> Cols:
    if not isinstance(inv, pl.DataFrame):
        msg = f"invocations must be a polars DataFrame, got {type(inv).__name__}"
        raise OptionError(msg, field="invocations", value=type(inv).__name__)
    missing = [k for k in INVOCATIONS_SCHEMA if k not in inv.columns and k != "weight_class"]
    if missing:
        msg = f"invocations lack column(s) {missing}; give {list(INVOCATIONS_SCHEMA)} (see toolkit.costs)"
        raise OptionError(msg, field=missing[0], value=None)
    n = inv.height
    x: Cols = {}
    for name in ("kernel", "dtype"):
        x[name] = _strings(inv, name, None)
    x["weight_class"] = _strings(inv, "weight_class", None) if "weight_class" in inv.columns else np.full(n, None)
    x["output"] = _strings(inv, "output", "plain")
    x["partials"] = _strings(inv, "partials", "f16")
    x["schedule"] = _strings(inv, "schedule", "best")
    for name in ("rows", "cols", "inner"):
        x[name] = _ints(inv, name)
    _check(x, "kernel", ~np.isin(x["kernel"], KERNELS), f"one of {KERNELS}")
    _check(x, "dtype", ~np.isin(x["dtype"], DTYPES), f"one of {DTYPES}")
    mm = x["kernel"] == "matmul"
    _check(x, "weight_class", mm & ~np.isin(x["weight_class"], WEIGHT_CLASSES),
           f"one of {WEIGHT_CLASSES} for a matmul")
    _check(x, "output", ~np.isin(x["output"], OUTPUTS), f"one of {OUTPUTS}")
    _check(x, "partials", ~np.isin(x["partials"], PARTIALS), f"one of {PARTIALS}")
    _check(x, "schedule", ~np.isin(x["schedule"], SCHEDULES), f"one of {SCHEDULES}")
    _check(x, "schedule", (x["schedule"] == "split") & (x["kernel"] == "softmax") & (x["cols"] < 128),
           "'best' or 'whole' below 128 keys (the split-row schedule needs at least 128)")
    for name in ("rows", "cols", "inner"):
        _check(x, name, x[name] < 0, "a non-negative integer")
    default_pad = _cdiv(x["cols"], 64) * 64
    x["padded"] = default_pad if "padded" not in inv.columns else np.where(
        inv["padded"].is_null().to_numpy(), default_pad, inv["padded"].fill_null(0).cast(pl.Int64).to_numpy())
    _check(x, "padded", (x["kernel"] == "softmax") & (x["padded"] < x["cols"]), "at least the key count (cols)")
    return x


def _strings(inv: pl.DataFrame, name: str, default: str | None) -> np.ndarray:
    if name not in inv.columns:
        return np.full(inv.height, default, dtype=object)
    col = inv[name]
    if col.dtype not in (pl.String, pl.Categorical, pl.Enum, pl.Null):
        msg = f"invocations column {name!r} must hold strings, got {col.dtype}"
        raise OptionError(msg, field=name, value=str(col.dtype))
    values = np.array(col.cast(pl.String).to_list(), dtype=object)
    if default is not None:
        values[pd_null(values)] = default
    return values


def pd_null(values: np.ndarray) -> np.ndarray:
    return np.array([v is None for v in values], dtype=bool) if values.dtype == object else np.zeros(len(values), bool)


def _ints(inv: pl.DataFrame, name: str) -> np.ndarray:
    col = inv[name]
    if not col.dtype.is_integer():
        msg = f"invocations column {name!r} must be integers, got {col.dtype}"
        raise OptionError(msg, field=name, value=str(col.dtype))
    nulls = col.is_null().to_numpy()
    if nulls.any():
        row = int(np.flatnonzero(nulls)[0])
        msg = f"invocations row {row}: {name} is null; give a size (0 where the kernel has none)"
        raise OptionError(msg, field=name, value=None, row=row)
    return col.cast(pl.Int64).to_numpy()


def _check(x: Cols, name: str, bad: np.ndarray, expected: str) -> None:
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        value = x[name][row].item() if isinstance(x[name][row], np.generic) else x[name][row]
        msg = (f"invocations row {row} (kernel {x['kernel'][row]!r}): {name}={value!r} is not valid; "
               f"expected {expected}" + (f" ({int(bad.sum())} rows like it)" if bad.sum() > 1 else ""))
        raise OptionError(msg, field=name, value=value, row=row)


# -- helpers the stages call with numpy columns ------------------------------------------------------------------
def cycles(kernel: str, target: Target, *, rows, cols, inner=0, dtype="f16", weight_class=None, output="plain",
           partials="f16", padded=None, schedule="best") -> np.ndarray:
    """:func:`kernel_cycles` of one kernel kind over numpy columns (scalars broadcast); no frame is built.

    The stages call this in their inner loops, so it does no validation beyond the kernel name: their
    inputs come from plans, not from users (:func:`kernel_cycles` checks every field).
    """
    if kernel not in RULES:
        msg = f"unknown kernel {kernel!r}; known: {KERNELS}"
        raise OptionError(msg, field="kernel", value=kernel)
    r, co, k = (np.asarray(v, dtype=np.int64) for v in (rows, cols, inner))
    x: Cols = {"kernel": kernel, "rows": r, "cols": co, "inner": k, "dtype": dtype, "weight_class": weight_class,
               "output": output, "partials": partials, "schedule": schedule}
    x["padded"] = _cdiv(co, 64) * 64 if padded is None else np.asarray(padded, dtype=np.int64)
    out = np.asarray(RULES[kernel](x, target.costs))
    return np.broadcast_to(out, np.broadcast_shapes(out.shape, r.shape, co.shape, k.shape)).astype(np.int64)


def copies_cycles(calls, total_bytes, target: Target) -> np.ndarray:
    """``calls`` local copy calls moving ``total_bytes`` in all: the copy rule summed over the calls.

    Exact but for the per-call rounding of ``bytes / 8`` (under one cycle per
    call); the refine step counts copies this way without listing each one.
    """
    c = target.costs
    calls = np.asarray(calls, dtype=np.int64)
    return calls * c.copy_call_cycles + _cdiv(total_bytes, c.copy_bytes_per_cycle)


def exchange_cycles(payload_bytes, control, target: Target) -> np.ndarray:
    """One tile's exchange work: ``max(payload / 4 B per cycle, control)`` (HARDWARE.md section 4).

    ``control`` is the tile's control work in cycles (:func:`control_cycles`).
    Fragments are nearly free on hardware (two exchanges with 134 and 244
    fragments were scheduled 4 cycles apart), so there is no per-fragment charge.
    """
    return np.maximum(_cdiv(payload_bytes, target.exchange_bytes_per_cycle), np.asarray(control, dtype=np.int64))


def control_cycles(sends, receives, resets, target: Target) -> np.ndarray:
    """Exchange control work: 2 cycles per send, 2 per receive, 1 per pointer reset (HARDWARE.md section 4)."""
    c = target.costs
    return (np.asarray(sends, np.int64) * c.exchange_send_cycles + np.asarray(receives, np.int64)
            * c.exchange_receive_cycles + np.asarray(resets, np.int64) * c.exchange_reset_cycles)


def group_cycles(words, packets, target: Target) -> np.ndarray:
    """One exchange group (one source's fragment to its destinations in one step).

    ``max(payload at 4 B/cycle, control)``: the source issues one send per
    packet and every destination one receive per packet, each with one
    pointer reset, and the two ends run at once, so the control work is
    ``2 packets + 1`` cycles on either end.
    """
    payload = np.asarray(words, dtype=np.int64) * target.word_bytes
    return exchange_cycles(payload, control_cycles(packets, 0, 1, target), target)


def phase_overhead_cycles(target: Target) -> int:
    """Cycles an exchange phase runs past its scheduled horizon (measured 230-280 per phase)."""
    return int(target.costs.exchange_phase_cycles)


def rules() -> pl.DataFrame:
    """One row per kernel kind: its rule's summary line and source (for notebooks and reports)."""
    names = list(RULES)
    docs = [(RULES[k].__doc__ or _layernorm.__doc__ or "").strip().splitlines()[0] for k in names]
    docs[names.index("add_layernorm")] = "Fused residual add + LayerNorm (see layernorm; HARDWARE.md section 3)."
    return pl.DataFrame({"kernel": names, "rule": docs})


__all__ = ["INVOCATIONS_SCHEMA", "KERNELS", "KERNEL_SYMBOLS", "PRECISION", "amp_panels", "control_cycles",
           "copies_cycles", "cycles", "exchange_cycles", "group_cycles", "kernel_cycles", "phase_overhead_cycles",
           "rules"]
