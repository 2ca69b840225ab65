"""One sweep row per point: the schema, declared once, and the worker function that fills it.

``SWEEP_SCHEMA`` has the point's identity (id, workload and its parameters),
one typed ``opt_<name>`` column per field of :class:`~toolkit.options.Options`
(its dtype read from the field's annotation, so the grid values are typed and
every file of every sweep has the same columns), the outcome (``status``,
``error``), the numbers an engineer sorts on (the columns of
``Compilation.summary()`` under its names, whose meanings
``toolkit.tables.SUMMARY_MEANINGS`` holds: lowered cycles and launches, exchange
steps, the placed and the screen's peak SRAM; then simulated cropped cycles,
placement and the first placement failure) and the cost of the point (compile
seconds, peak RSS).

A point file written before the summary's names said which figure they are
(``est_cycles`` for ``lowered_cycles``, ``launches`` for ``lowered_launches``
...) is read back in today's names (:func:`toolkit.tables.upgrade_summary`; its
``screen_peak_bytes`` is null, and a point that did not place has no
``peak_sram_bytes``); a file holding an old name and its new one both is a
FormatError naming the column.

``status`` is ``ok``, ``error`` (the compile raised: a failed point is a row
and a rerun does not repeat it) or ``crashed`` (the worker died or was lost:
a rerun runs the point again).

Peak RSS: ``peak_rss_bytes`` is the worker process's high-water mark
(``getrusage``) after the point. A reused worker's mark never goes down, so it
is an upper bound on the point's own peak; ``rss_growth_bytes`` is how far the
point raised the mark (0: its peak stayed under an earlier point's). With one
worker the sweep runs in its own process and both include the sweep's memory.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import socket
import sys
import time
import types
import typing
from datetime import UTC, datetime
from typing import Any

import polars as pl

from toolkit.options import Options
from toolkit.sweep.points import Point
from toolkit.tables import BIG, ID, STR, SUMMARY_SCHEMA, Schema, frame
from toolkit.target import Target

STATUSES = ("ok", "error", "crashed")
FINAL = ("ok", "error")      # statuses a rerun skips


def _option_dtype(tp: Any) -> pl.DataType | type[pl.DataType]:
    """The column type of an Options field: its annotation with ``None`` dropped (plans: one string)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)] if isinstance(tp, types.UnionType) else [tp]
    base = args[0]
    if typing.get_origin(base) is tuple:
        return pl.List(BIG) if typing.get_args(base)[0] is int else STR
    return {bool: pl.Boolean, int: BIG, float: pl.Float64, str: STR}[base]


OPTION_COLUMNS: Schema = {f"opt_{name}": _option_dtype(tp) for name, tp in typing.get_type_hints(Options).items()}

SWEEP_SCHEMA: Schema = {
    "point_id": STR,            # hash of workload fields, canonical options, target fields, toolkit version
    "workload": STR, "batch": BIG, "blocks": BIG, "weight_dtype": STR,
    "target_digest": STR,       # SHA-256 of the target's fields (16 hex digits): sweeps of two targets differ
    **OPTION_COLUMNS,           # the options compiled (grid values and defaults), typed; null: searched
    "status": STR,              # ok | error | crashed
    "error": STR,               # first line of the error (null when ok)
    # the summary's columns, its dtypes (toolkit.tables.SUMMARY_COLUMNS says what each is)
    **{k: SUMMARY_SCHEMA[k] for k in ("lowered_cycles", "lowered_compute_cycles", "lowered_exchange_cycles",
                                      "lowered_sync_cycles", "lowered_launches", "kernel_calls", "exchange_steps",
                                      "peak_sram_bytes", "screen_peak_bytes", "tiles_used", "placed")},
    "cropped_cycles": BIG,      # simulated profile, cropped as the hardware renderer does (null: simulate off)
    "fail_tile": ID, "fail_event": ID,           # the first placement failure (null when placed)
    "fail_bytes_over": BIG, "fail_reason": STR,
    **{k: SUMMARY_SCHEMA[k] for k in ("row_block", "row_shard", "inner_split", "plans", "weight_class",
                                      "fused_qkv")},   # the layout chosen
    "compile_seconds": pl.Float64,
    "peak_rss_bytes": BIG, "rss_growth_bytes": BIG,
    "worker": STR,              # host:pid that ran the point
    "toolkit_version": STR,
    "finished_at": pl.Datetime("us", "UTC"),
}

#: the columns of ``Compilation.summary()`` a row keeps (under the summary's names, with the summary's dtypes)
SUMMARY_COLUMNS = tuple(k for k in SWEEP_SCHEMA if k in SUMMARY_SCHEMA and k != "workload")


def run_point(point: Point, target: Target) -> dict[str, Any]:
    """Compile one point and return its row (a dict of SWEEP_SCHEMA columns); any exception of the compile
    becomes an ``error`` row, never a lost sweep."""
    import toolkit
    from toolkit.graph import get_workload
    before = _max_rss()
    row = identity(point)
    start = time.perf_counter()
    try:
        c = toolkit.compile(get_workload(point.workload, batch=point.batch, blocks=point.blocks), target=target,
                            options=point.options)
        row.update(c.summary().select(SUMMARY_COLUMNS).row(0, named=True), status="ok")
        if c.profile is not None:
            from toolkit.profile import crop
            row["cropped_cycles"] = crop(c.profile).cropped_cycles
        row.update(_first_failure(c.placement.failures))
    except Exception as exc:   # every failure of a point is recorded in its row
        first = str(exc).splitlines()[0] if str(exc) else ""
        kind = "" if isinstance(exc, toolkit.ToolkitError) else f"{type(exc).__name__}: "
        row.update(status="error", error=f"{kind}{first}"[:500])
    row["compile_seconds"] = time.perf_counter() - start
    after = _max_rss()
    row.update(peak_rss_bytes=after, rss_growth_bytes=max(after - before, 0))
    row["finished_at"] = datetime.now(UTC)
    return row


def crashed_row(point: Point, why: str) -> dict[str, Any]:
    """The row of a point whose worker died or was lost (a rerun runs it again)."""
    return {**identity(point), "status": "crashed", "error": why[:500], "worker": None,
            "finished_at": datetime.now(UTC)}


def identity(point: Point) -> dict[str, Any]:
    """The point's id, workload, parameters and option columns."""
    from toolkit import __version__
    opts = {f"opt_{k}": v for k, v in dataclasses.asdict(point.options).items()}
    opts["opt_plans"] = "; ".join(f"{op}={plan}" for op, plan in point.options.plans) or None
    mapping = point.options.tile_mapping   # a name, or a list of tiles written as JSON (the column is a string)
    opts["opt_tile_mapping"] = mapping if mapping is None or isinstance(mapping, str) else json.dumps(list(mapping))
    opts = {k: list(v) if isinstance(v, tuple) else v for k, v in opts.items()}
    return {"point_id": point.id, "workload": point.workload, "batch": point.batch, "blocks": point.blocks,
            "weight_dtype": point.weight_dtype, "target_digest": point.target_digest or None,
            **opts, "worker": f"{socket.gethostname()}:{os.getpid()}",
            "toolkit_version": __version__}


def to_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Rows as one SWEEP_SCHEMA frame (missing columns null)."""
    if not rows:
        return pl.DataFrame(schema=SWEEP_SCHEMA)
    return frame({c: [r.get(c) for r in rows] for c in SWEEP_SCHEMA}, SWEEP_SCHEMA, what="sweep rows")


def _first_failure(failures: pl.DataFrame) -> dict[str, Any]:
    if failures.height == 0:
        return {}
    f = failures.sort("event", "tile").row(0, named=True)
    return {"fail_tile": f["tile"], "fail_event": f["event"], "fail_reason": f["reason"],
            "fail_bytes_over": f["live_bytes"] - f["capacity_bytes"]}


def _max_rss() -> int:
    """The process's peak resident set in bytes (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)
