"""The hardware's own functional-check figures (``toolkit/data/hardware_check_errors.csv``).

``ipu-stack`` checks every hardware run against a host reference computed the
way :mod:`toolkit.check` computes its own (``crates/ipu-tests/src/diagnostic.rs``:
Gaussian inputs x 0.25, weights Gaussian / sqrt(fan_in) stored as F143 at scale
-4, every result rounded to its storage precision, FP8 GEMM operands rounded
to F143) and reports the largest absolute output error. Each row names the
preset it corresponds to (empty where we have none), the compile options that
make our program the hardware's (``name=value`` pairs joined by ``;``), the
program that ran (what its graph holds: the benchmark graphs have no biases,
LayerNorm or residual), and its source document. ``current`` marks the latest
figure of a program; older ones (an earlier host reference or build) are kept
as history.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import polars as pl

HARDWARE_ERRORS_SCHEMA = {
    "workload": pl.String, "options": pl.String, "max_abs_error": pl.Float64, "current": pl.Boolean,
    "hardware_program": pl.String, "source": pl.String, "note": pl.String,
}


@cache
def _table() -> pl.DataFrame:
    text = resources.files("toolkit").joinpath("data", "hardware_check_errors.csv").read_bytes()
    return pl.read_csv(text, schema=HARDWARE_ERRORS_SCHEMA).with_columns(
        pl.col("workload").fill_null(""), pl.col("options").fill_null(""))


def hardware_errors() -> pl.DataFrame:
    """Every hardware check figure (HARDWARE_ERRORS_SCHEMA), history included."""
    return _table().clone()


def options_key(options: Any) -> str:
    """The ``name=value;...`` key of the options that change a program's numerics beyond the presets: the FP8
    attention products (an FP16 product has no cast placement)."""
    pairs = []
    for product in ("qk", "pv"):
        dtype = getattr(options, f"{product}_dtype", None) or "f16"
        if dtype != "f16":
            pairs += [f"{product}_dtype={dtype}", f"{product}_cast={getattr(options, f'{product}_cast', 'late')}"]
    return ";".join(pairs)


def hardware_error(workload: str, options: Any = None) -> dict | None:
    """The current hardware check figure of ``workload`` compiled with ``options`` (None when there is none, or
    when the options change the weights' format, which the hardware figures do not cover)."""
    if options is not None and (getattr(options, "weight_dtype", None) not in (None, "f8_143")):
        return None
    rows = _table().filter((pl.col("workload") == workload) & pl.col("current")
                           & (pl.col("options") == options_key(options)))
    return rows.row(0, named=True) if rows.height else None


__all__ = ["HARDWARE_ERRORS_SCHEMA", "hardware_error", "hardware_errors", "options_key"]
