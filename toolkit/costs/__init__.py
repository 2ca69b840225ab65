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
               ``add_layernorm``, ``add``, ``softmax``, ``copy``, ``cast``,
               ``unpack``, ``merge``
dtype          ``f16`` or ``f8`` (matmul: the inputs fed to the AMP)
weight_class   ``interleaved`` / ``standard`` (matmul only, null elsewhere)
rows           matmul R (output rows); elementwise rows; reduce 1
cols           matmul C; reduce output elements E; elementwise row width
               (softmax: keys); copy and cast: bytes read; unpack: the
               row-major width of the unpacked rows; merge: one head's values
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

import numpy as np
import polars as pl

from toolkit.costs.exchange import (
    control_cycles,
    cutover_cycles,
    exchange_cycles,
    group_cycles,
    max_tile_row,
    phase_overhead_cycles,
    tile_horizon_cycles,
    tile_rows,
)
from toolkit.costs.kernels import (
    DTYPES,
    INVOCATIONS_SCHEMA,
    KERNEL_SYMBOLS,
    KERNELS,
    OPTIONAL_COLUMNS,
    OUTPUTS,
    PRECISION,
    RULES,
    SCHEDULES,
    Cols,
    _cdiv,
    amp_kernel,
    amp_panels,
    copies_cycles,
)
from toolkit.errors import OptionError
from toolkit.options import PARTIALS, WEIGHT_CLASSES
from toolkit.target import Target, ipu21


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
    col = col.cast(pl.String)
    return (col if default is None else col.fill_null(default)).to_numpy().astype(object)


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


def rules() -> pl.DataFrame:
    """One row per kernel kind: its rule's summary line and source (for notebooks and reports)."""
    names = list(RULES)
    docs = [(RULES[k].__doc__ or "Fused residual add + LayerNorm (see layernorm; HARDWARE.md section 3).")
            .strip().splitlines()[0] for k in names]
    return pl.DataFrame({"kernel": names, "rule": docs})


__all__ = ["INVOCATIONS_SCHEMA", "KERNELS", "KERNEL_SYMBOLS", "OPTIONAL_COLUMNS", "PRECISION", "amp_kernel",
           "amp_panels", "control_cycles", "copies_cycles", "cutover_cycles", "cycles", "exchange_cycles",
           "group_cycles", "kernel_cycles", "max_tile_row", "phase_overhead_cycles", "rules",
           "tile_horizon_cycles", "tile_rows"]
