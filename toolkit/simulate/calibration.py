"""Kernel cost calibration: the hardware tool's JSON database, and its use on our commands.

A measurement's ``key.dimensions`` describes ONE invocation of a command (a
command with ``groups = G`` is G invocations): ``[rows, cols, inner]`` for
the AMP kernels (``amp_matmul_f16``, ``amp_matmul_f8`` and their ``_p32``
FP32-partials variants) and ``reduce``; ``[rows, cols]`` for every other
kernel. Kernel names must be ones the schedule emits
(:data:`toolkit.costs.KERNEL_SYMBOLS`). A matching command costs ``median *
groups`` cycles.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, NoReturn

import polars as pl

from toolkit import tables
from toolkit.costs import KERNEL_SYMBOLS
from toolkit.errors import FormatError

CALIBRATION_SCHEMA: tables.Schema = {
    "kernel": tables.STR,
    "dimensions": pl.List(tables.BIG),  # one invocation; see the module docstring for the mapping
    "samples": tables.BIG,
    "minimum_cycles": pl.Float64,
    "median_cycles": pl.Float64,
    "p95_cycles": pl.Float64,
    "maximum_cycles": pl.Float64,
}
#: kernels whose calibration dimensions are [rows, cols, inner]; all others use [rows, cols]
INNER_KERNELS = tuple(k for k, rule in KERNEL_SYMBOLS.items() if rule in ("matmul", "reduce"))


def load_calibration(path: str | os.PathLike[str]) -> pl.DataFrame:
    """Read a kernel cost calibration database (JSON, schemaVersion 1) into CALIBRATION_SCHEMA rows.

    Raises :class:`FormatError` naming the file and the field (``measurements[3].key.dimensions``)
    for anything malformed; never returns part of a file.
    """
    file = os.fspath(path)
    try:
        from toolkit.files import depth_ok, read_text  # a regular file, bounded, nesting checked
        text = read_text(file, what="calibration file")
        depth_ok(text, file, what="calibration file")
    except (OSError, UnicodeDecodeError, FormatError) as exc:
        msg = f"{file}: cannot read the calibration file ({exc.__class__.__name__}: {exc})"
        raise FormatError(msg, file=file) from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"{file}: not JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})"
        raise FormatError(msg, file=file, offset=exc.pos) from None
    if not isinstance(doc, dict):
        _bad(file, "(root)", doc, "a JSON object with schemaVersion and measurements")
    if doc.get("schemaVersion") != 1 or isinstance(doc.get("schemaVersion"), bool):
        _bad(file, "schemaVersion", doc.get("schemaVersion"), "1")
    clock = doc.get("clockHz")
    if clock is not None and not (_number(clock) and clock > 0):
        _bad(file, "clockHz", clock, "a positive number")
    meas = doc.get("measurements")
    if not isinstance(meas, list):
        _bad(file, "measurements", meas, "a list of measurements")
    cols: dict[str, list[Any]] = {c: [] for c in CALIBRATION_SCHEMA}
    seen: dict[tuple, int] = {}
    for i, m in enumerate(meas):  # a reader of a small JSON document, not a hot path
        kernel, dims, stats = _measurement(file, i, m)
        key = (kernel, tuple(dims))
        if key in seen:
            _bad(file, f"measurements[{i}].key", m["key"], f"a key not already given by measurements[{seen[key]}]")
        seen[key] = i
        cols["kernel"].append(kernel)
        cols["dimensions"].append(dims)
        for c, v in stats.items():
            cols[c].append(v)
    return pl.DataFrame(cols, schema=CALIBRATION_SCHEMA)


_STATS = (("samples", "samples_int"), ("minimum", "minimum_cycles"), ("median", "median_cycles"),
          ("p95", "p95_cycles"), ("maximumCycles", "maximum_cycles"))


def _measurement(file: str, i: int, m: Any) -> tuple[str, list[int], dict[str, Any]]:
    where = f"measurements[{i}]"
    if not isinstance(m, dict):
        _bad(file, where, m, "an object with key, samples, minimum, median, p95, maximumCycles")
    key = m.get("key")
    if not isinstance(key, dict):
        _bad(file, f"{where}.key", key, "an object {kernel, dimensions}")
    kernel = key.get("kernel")
    if not isinstance(kernel, str) or kernel not in KERNEL_SYMBOLS:
        _bad(file, f"{where}.key.kernel", kernel, f"a kernel the schedule emits: {', '.join(KERNEL_SYMBOLS)}")
    dims = key.get("dimensions")
    if not isinstance(dims, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                             for d in dims):
        _bad(file, f"{where}.key.dimensions", dims, "a list of non-negative integers")
    arity = 3 if kernel in INNER_KERNELS else 2
    if len(dims) != arity:
        shape = "[rows, cols, inner]" if arity == 3 else "[rows, cols]"
        _bad(file, f"{where}.key.dimensions", dims, f"{shape} for kernel {kernel!r}")
    stats: dict[str, Any] = {}
    for name, col in _STATS:
        v = m.get(name)
        if name == "median" and v is None:
            _bad(file, f"{where}.median", v, "the median cycles (a non-negative number)")
        if v is not None and not (_number(v) and v >= 0):
            _bad(file, f"{where}.{name}", v, "a non-negative number")
        if name == "samples":
            if v is not None and v != int(v):
                _bad(file, f"{where}.samples", v, "a whole number of samples")
            stats["samples"] = None if v is None else int(v)
        else:
            stats[col] = None if v is None else float(v)
    return kernel, dims, stats


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _bad(file: str, field: str, value: Any, expected: str) -> NoReturn:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    msg = f"{file}: {field}={shown} is not valid; expected {expected}"
    raise FormatError(msg, file=file, field=field, value=value)


def apply_calibration(cmd: pl.DataFrame, cal: pl.DataFrame) -> pl.DataFrame:
    """Commands (kernel, rows, cols, inner, groups, est_cycles) with matching est_cycles replaced by median x groups."""
    inner_k = pl.col("kernel").is_in(list(INNER_KERNELS))
    table = (cal.filter(pl.col("dimensions").list.len() == pl.when(inner_k).then(3).otherwise(2))
             .select("kernel", pl.col("dimensions").list.get(0).alias("_d0"),
                     pl.col("dimensions").list.get(1).alias("_d1"),
                     pl.col("dimensions").list.get(2, null_on_oob=True).fill_null(-1).alias("_d2"),
                     "median_cycles")
             .unique(["kernel", "_d0", "_d1", "_d2"], keep="first"))
    keyed = cmd.with_columns(pl.col("rows").alias("_d0"), pl.col("cols").alias("_d1"),
                             pl.when(inner_k).then(pl.col("inner")).otherwise(-1).alias("_d2"))
    return (keyed.join(table, on=["kernel", "_d0", "_d1", "_d2"], how="left")
            .with_columns(pl.when(pl.col("median_cycles").is_not_null())
                          .then((pl.col("median_cycles") * pl.col("groups")).round().cast(tables.BIG))
                          .otherwise(pl.col("est_cycles")).alias("est_cycles"))
            .drop("_d0", "_d1", "_d2", "median_cycles"))
