"""Stage ``simulate``: a cycle profile of a compiled program, in the same data model as hardware profiles.

Contract: takes a :class:`~toolkit.pipeline.Compilation` (and optionally a kernel
cost calibration); returns a :class:`~toolkit.profile.Profile` with
``source="simulated"`` and ``clock_hz = target.clock_hz``. Timing rules:

- Program order is the EXPANDED program (:func:`phase_order`): the phases of a
  repeated block run once per instance, in order. A profile ``phase`` is the
  position in that order (``event``; equal to the schedule phase when nothing
  repeats) and ``epoch`` is the repeat instance (0 outside blocks).
- Every tile that has a step gets one sample per step per instance (tiles
  idle in a phase have no sample: idle is derived by :func:`toolkit.profile.idle`),
  plus a first sample: the initial sync barrier, ``sync_cycles`` long, phase 0.
- compute: duration = the sum of the tile's commands' ``est_cycles`` in the
  phase (or their calibrated cost); ``kernel`` = the kernel with the most cycles
  on the tile in that phase; ``operation`` = the phase's op name.
- exchange (from the exchange lowering): within a phase, steps run in order;
  a step lasts as long as its slowest group, ``ceil(words * word_bytes /
  exchange_bytes_per_cycle) + packets * exchange_fragment_cycles``; every
  staging pass after the first is preceded by a ``sync_cycles`` sync. A
  group's source has a ``send`` activity and each of its destinations a
  ``receive`` activity spanning the group's own duration from the step start
  (offsets within the exchange phase; ``fanout`` = the group's destinations;
  ``paired`` is always false; ``partnerBusy`` is not modelled). The tile's
  sample ends with its last activity; ``exchange_event_cycles`` is the span
  from its first activity start to its last activity end.
- sync: ``sync_cycles`` for every tile taking part (the tiles of the next exchange).
- Barriers: a phase ends when its slowest tile ends; every tile starts the next
  phase then. Counters are 32-bit: ``start_cycle``/``end_cycle`` are stored
  modulo 2**32 from ``base_cycle``.

Calibration (:func:`load_calibration`) reads the hardware tool's kernel cost
database. A measurement's ``key.dimensions`` describes ONE invocation of a
command (a command with ``groups = G`` is G invocations):
``[rows, cols, inner]`` for ``amp_matmul_f16``, ``amp_matmul_f32`` (output rows
and columns on the tile, inner length K) and ``reduce`` (inner = partials summed);
``[rows, cols]`` for every other kernel (layernorm, gelu, softmax, add, copy, ...).
A matching command costs ``median * groups`` cycles; unmatched commands keep
the cost model's ``est_cycles``. Cycles are taken as they are (the database's
``clockHz`` is recorded, not used to rescale).

:func:`roofline` gives the MAC-bound ideal per op and in total: MACs /
(target tiles x AMP MACs per cycle per tile, FP16 partials).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import polars as pl

from toolkit import tables
from toolkit.errors import FormatError, InvalidIRError, OptionError
from toolkit.profile import Profile
from toolkit.profile.model import WRAP

if TYPE_CHECKING:
    from toolkit.pipeline import Compilation
    from toolkit.schedule import Schedule

CALIBRATION_SCHEMA: tables.Schema = {
    "kernel": tables.STR,
    "dimensions": pl.List(tables.BIG),  # one invocation; see the module docstring for the mapping
    "samples": tables.BIG,
    "minimum_cycles": pl.Float64,
    "median_cycles": pl.Float64,
    "p95_cycles": pl.Float64,
    "maximum_cycles": pl.Float64,
}
PHASE_ORDER_SCHEMA: tables.Schema = {
    "event": tables.BIG,      # position in the expanded program = the profile's phase
    "phase": tables.ID,       # schedule phase
    "instance": tables.BIG,   # repeat instance (0 outside repeated blocks) = the profile's epoch
    "kind": tables.STR, "name": tables.STR, "block": tables.STR,
}
ROOFLINE_SCHEMA: tables.Schema = {
    "op_id": tables.ID,               # null on the total row
    "name": tables.STR,               # "total" on the total row
    "kind": tables.STR,
    "block": tables.STR,
    "instances": tables.BIG,
    "macs": tables.BIG,               # all instances
    "ideal_cycles": tables.BIG,       # ceil(macs / (tiles * macs_per_cycle))
    "est_compute_cycles": tables.BIG,  # the schedule's compute phases of the op, all instances
    "efficiency": pl.Float64,          # ideal / est_compute (null when est is 0)
}
#: kernels whose calibration dimensions are [rows, cols, inner]; all others use [rows, cols]
INNER_KERNELS = ("amp_matmul_f16", "amp_matmul_f32", "reduce")
INITIAL_SYNC = "initial_sync"

Calibration = pl.DataFrame | str | os.PathLike[str]


def simulate(compilation: Compilation, *, calibration: Calibration | None = None, base_cycle: int = 0) -> Profile:
    """Simulate ``compilation`` cycle by cycle per (tile, step); see the module docstring for the rules."""
    if isinstance(base_cycle, bool) or not isinstance(base_cycle, int | np.integer) or not 0 <= base_cycle < WRAP:
        msg = f"base_cycle={base_cycle!r} is not a 32-bit counter value; use an integer in [0, 2**32)"
        raise OptionError(msg, field="base_cycle", value=base_cycle)
    target = compilation.target
    sched = compilation.schedule
    sync = int(target.costs.sync_cycles)
    cal = None
    if calibration is not None:
        cal = calibration if isinstance(calibration, pl.DataFrame) else load_calibration(calibration)
    order = phase_order(sched)
    compute = _compute_steps(sched.commands, cal)
    exch, acts = _exchange_steps(compilation, target)
    steps = compilation.tiles.steps.select("tile", "phase", "kind")
    per_step = (steps.join(compute, on=["phase", "tile"], how="left")
                .join(exch, on=["phase", "tile"], how="left")
                .with_columns(
                    pl.when(pl.col("kind") == "compute").then(pl.col("compute_cycles"))
                    .when(pl.col("kind") == "exchange").then(pl.col("exchange_cycles"))
                    .otherwise(pl.lit(sync, tables.BIG)).fill_null(0).alias("cycles"),
                    pl.col("kernel").fill_null(""), pl.col("event_cycles").fill_null(0))
                .select("tile", "phase", "kind", "kernel", "cycles", "event_cycles"))
    # barriers: a phase lasts as long as its slowest tile; cumulative sums over the expanded order
    length = per_step.group_by("phase").agg(pl.col("cycles").max().alias("length"))
    order = (order.join(length, on="phase", how="left").sort("event")
             .with_columns(pl.col("length").fill_null(0))
             .with_columns((pl.col("length").cum_sum() - pl.col("length") + sync).alias("offset")))
    timed = per_step.join(order.select("phase", "event", "instance", "name", "offset"), on="phase")
    first = (timed.select(pl.col("tile").unique()).with_columns(
        pl.lit(-1, tables.ID).alias("phase"), pl.lit("synchronization").alias("kind"), pl.lit("").alias("kernel"),
        pl.lit(sync, tables.BIG).alias("cycles"), pl.lit(0, tables.BIG).alias("event_cycles"),
        pl.lit(-1, tables.BIG).alias("event"), pl.lit(0, tables.BIG).alias("instance"),
        pl.lit(INITIAL_SYNC).alias("name"), pl.lit(0, tables.BIG).alias("offset")))
    # one int64 sort key per sample: (tile, event), the initial sync first
    rows = (pl.concat([first, timed.select(first.columns)], how="vertical_relaxed")
            .sort(pl.col("tile").cast(tables.BIG) * WRAP + pl.col("event") + 1)
            .with_columns(pl.int_range(pl.len(), dtype=tables.BIG).alias("_row")))
    tile = rows["tile"].to_numpy()
    new_tile = np.r_[True, tile[1:] != tile[:-1]] if len(tile) else np.zeros(0, bool)
    row = np.arange(len(tile))
    rows = rows.with_columns(pl.Series("sample", row - row[new_tile][np.cumsum(new_tile) - 1], dtype=tables.BIG))
    kind_name = {"compute": "compute", "exchange": "exchange", "sync": "synchronization"}
    all_samples = rows.select(
        "tile", "sample", pl.col("sample").alias("local_index"), pl.col("event").clip(0, None).alias("phase"),
        pl.col("instance").alias("epoch"), pl.col("name").alias("operation"),
        pl.col("kind").replace(kind_name), "kernel",
        ((pl.col("offset") + base_cycle) % WRAP).alias("start_cycle"),
        ((pl.col("offset") + pl.col("cycles") + base_cycle) % WRAP).alias("end_cycle"),
        pl.when(pl.col("kind") == "exchange").then(pl.col("event_cycles")).otherwise(0)
        .alias("exchange_event_cycles"),
    ).cast(tables.SAMPLES_SCHEMA)
    # activities in (sample row, start, receive before send) order, again through one int64 key
    # activities: each exchange sample gathers its (tile, phase) slice of the sorted activity arrays
    segments = (rows.filter(pl.col("kind") == "exchange").select("tile", "phase", "sample", "_row")
                .join(exch.select("tile", "phase", "_first", "_count"), on=["tile", "phase"])
                .sort("_row"))
    activities = _activities(acts, segments)
    return Profile(samples=all_samples, activities=activities, metadata=tables.empty(tables.METADATA_SCHEMA),
                   clock_hz=float(target.clock_hz), schema_version=5, source="simulated")


def phase_order(schedule: Schedule) -> pl.DataFrame:
    """The expanded program order (PHASE_ORDER_SCHEMA): each repeated block's phases once per instance."""
    reps = schedule.repeats.select("block", "instances", pl.col("first_phase").alias("_anchor"))
    return (schedule.phases.select("phase", "kind", "name", "block")
            .join(reps, on="block", how="left")
            .with_columns(pl.coalesce("_anchor", "phase").alias("_anchor"),
                          pl.int_ranges(0, pl.col("instances").fill_null(1)).alias("instance"))
            .explode("instance")
            .sort("_anchor", "instance", "phase")
            .with_columns(pl.int_range(pl.len()).alias("event"))
            .select(list(PHASE_ORDER_SCHEMA)).cast(PHASE_ORDER_SCHEMA))


def roofline(compilation: Compilation) -> pl.DataFrame:
    """MAC-bound ideal cycles per op and in total (ROOFLINE_SCHEMA, total row last).

    MACs of a matmul = rows x cols x inner x groups per instance; the ideal
    spreads every MAC over all ``target.tiles`` tiles at the FP16-partials AMP
    rate (64 MAC/cycle/tile on ipu21). ``est_compute_cycles`` is the schedule's
    estimate of the op's compute phases, for the ratio.
    """
    target = compilation.target
    rate = target.amp_rate("f16", "f16").macs_per_cycle * target.tiles
    sched = compilation.schedule
    inst = sched.repeats.select("block", "instances")
    est = (sched.phases.filter(pl.col("kind") == "compute").group_by("op_id")
           .agg(pl.col("est_cycles").sum().alias("est_one")))
    ops = (compilation.graph.ops.select("op_id", "name", "kind", "block", "rows", "cols", "inner", "groups")
           .join(inst, on="block", how="left").join(est, on="op_id", how="left")
           .with_columns(pl.col("instances").fill_null(1))
           .with_columns(pl.when(pl.col("kind") == "matmul")
                         .then(pl.col("rows") * pl.col("cols") * pl.col("inner") * pl.col("groups")
                               * pl.col("instances")).otherwise(0).alias("macs"),
                         (pl.col("est_one").fill_null(0) * pl.col("instances")).alias("est_compute_cycles")))
    ops = ops.with_columns(((pl.col("macs") + rate - 1) // rate).alias("ideal_cycles"))
    total = ops.select(pl.lit(None, tables.ID).alias("op_id"), pl.lit("total").alias("name"),
                       pl.lit(None, tables.STR).alias("kind"), pl.lit(None, tables.STR).alias("block"),
                       pl.col("instances").max(), pl.col("macs").sum(),
                       ((pl.col("macs").sum() + rate - 1) // rate).alias("ideal_cycles"),
                       pl.col("est_compute_cycles").sum())
    cols = [c for c in ROOFLINE_SCHEMA if c != "efficiency"]
    out = pl.concat([ops.select(cols).cast({c: ROOFLINE_SCHEMA[c] for c in cols}),
                     total.select(cols).cast({c: ROOFLINE_SCHEMA[c] for c in cols})])
    eff = pl.when(pl.col("est_compute_cycles") > 0).then(pl.col("ideal_cycles") / pl.col("est_compute_cycles"))
    return out.with_columns(eff.cast(pl.Float64).alias("efficiency")).select(list(ROOFLINE_SCHEMA))


# -- steps -------------------------------------------------------------------------------------------
def _compute_steps(commands: pl.DataFrame, cal: pl.DataFrame | None) -> pl.DataFrame:
    """(phase, tile) -> compute_cycles and main kernel (most cycles, then name)."""
    cmd = commands.select("phase", "tile", "kernel", "rows", "cols", "inner", "groups", "est_cycles")
    if cal is not None and cal.height:
        cmd = _calibrated(cmd, cal)
    per_kernel = cmd.group_by("phase", "tile", "kernel").agg(pl.col("est_cycles").sum())
    return (per_kernel.sort("est_cycles", "kernel", descending=[True, False])
            .group_by("phase", "tile")
            .agg(pl.col("est_cycles").sum().alias("compute_cycles"), pl.col("kernel").first()))


def _calibrated(cmd: pl.DataFrame, cal: pl.DataFrame) -> pl.DataFrame:
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


def _exchange_steps(compilation: Compilation, target) -> tuple[pl.DataFrame, dict[str, np.ndarray]]:
    """Exchange timing in numpy over groups and receive rows.

    Returns per (phase, tile) ``exchange_cycles`` (its last activity end) and
    ``event_cycles`` (its last end - its first start), with ``_first``/``_count``:
    the tile's slice of the activity arrays, which are sorted by (tile, phase,
    start, receive before send).
    """
    ex = compilation.exchange
    wb, bpc = target.word_bytes, target.exchange_bytes_per_cycle
    frag, sync = target.costs.exchange_fragment_cycles, target.costs.sync_cycles
    g = {c: ex.groups[c].to_numpy().astype(np.int64) for c in ("phase", "source", "fanout", "pass", "step",
                                                                 "words", "packets")}
    if ex.groups.height and not np.array_equal(ex.groups["group"].to_numpy(), np.arange(ex.groups.height)):
        msg = "simulate: exchange groups must be numbered 0..n-1 in row order (as lower_exchanges makes them)"
        raise InvalidIRError(msg)
    dur = (g["words"] * wb + bpc - 1) // bpc + g["packets"] * frag
    # a step lasts as long as its slowest group; steps follow each other; each pass after the first syncs first
    width = int(g["step"].max()) + 1 if len(dur) else 1
    skey, inv = np.unique(g["phase"] * width + g["step"], return_inverse=True)
    slen = np.zeros(len(skey), np.int64)
    np.maximum.at(slen, inv, dur)
    spass = np.zeros(len(skey), np.int64)
    np.maximum.at(spass, inv, g["pass"])
    sphase = skey // width
    new_phase = np.r_[True, sphase[1:] != sphase[:-1]] if len(skey) else np.zeros(0, bool)
    before = np.cumsum(slen) - slen
    at = before - before[new_phase][np.cumsum(new_phase) - 1] + spass * sync
    gstart = at[inv]
    rgroup = ex.passes["group"].to_numpy()
    acts = {
        "tile": np.r_[g["source"], ex.passes["tile"].to_numpy()].astype(np.int64),
        "phase": np.r_[g["phase"], g["phase"][rgroup]],
        "send": np.r_[np.ones(len(dur), np.int64), np.zeros(len(rgroup), np.int64)],
        "fanout": np.r_[g["fanout"], g["fanout"][rgroup]],
        "start_cycle": np.r_[gstart, gstart[rgroup]],
        "end_cycle": np.r_[gstart + dur, (gstart + dur)[rgroup]],
    }
    keys = [acts["send"], acts["start_cycle"], acts["phase"], acts["tile"]]
    bits = [max(int(k.max()).bit_length(), 1) if len(k) else 1 for k in keys]
    if sum(bits) <= 63:  # one packed int64 key sorts much faster than a lexsort
        packed, shift = np.zeros(len(keys[0]), np.int64), 0
        for k, b in zip(keys, bits, strict=True):
            packed |= k << shift
            shift += b
        order = np.argsort(packed, kind="stable")
    else:
        order = np.lexsort(keys)
    acts = {k: v[order] for k, v in acts.items()}
    tp = acts["tile"] * (int(acts["phase"].max()) + 1 if len(order) else 1) + acts["phase"]
    first = np.flatnonzero(np.r_[True, tp[1:] != tp[:-1]]) if len(tp) else np.zeros(0, np.int64)
    count = np.diff(np.r_[first, len(tp)])
    last_end = np.maximum.reduceat(acts["end_cycle"], first) if len(tp) else np.zeros(0, np.int64)
    first_start = np.minimum.reduceat(acts["start_cycle"], first) if len(tp) else np.zeros(0, np.int64)
    per_tile = pl.DataFrame({
        "phase": acts["phase"][first].astype(np.int32), "tile": acts["tile"][first].astype(np.int32),
        "exchange_cycles": last_end, "event_cycles": last_end - first_start,
        "_first": first.astype(np.int64), "_count": count.astype(np.int64),
    })
    return per_tile, acts


def _activities(acts: dict[str, np.ndarray], segments: pl.DataFrame) -> pl.DataFrame:
    """Gather the activity arrays per exchange sample: ``segments`` (tile, sample, _first, _count) in sample order."""
    first = segments["_first"].to_numpy()
    count = segments["_count"].to_numpy()
    total = int(count.sum())
    starts = np.cumsum(count) - count
    idx = np.repeat(first - starts, count) + np.arange(total)
    return pl.DataFrame({
        "tile": pl.Series(np.repeat(segments["tile"].to_numpy(), count), dtype=tables.ID),
        "sample": pl.Series(np.repeat(segments["sample"].to_numpy(), count), dtype=tables.BIG),
        "kind": pl.Series(["receive", "send"], dtype=tables.STR).gather(acts["send"][idx]),
        "fanout": pl.Series(acts["fanout"][idx], dtype=tables.BIG),
        "paired": pl.Series(np.zeros(total, bool)),
        "start_cycle": pl.Series(acts["start_cycle"][idx], dtype=tables.BIG),
        "end_cycle": pl.Series(acts["end_cycle"][idx], dtype=tables.BIG),
    }, schema=tables.ACTIVITIES_SCHEMA)


# -- calibration -------------------------------------------------------------------------------------
def load_calibration(path: str | os.PathLike[str]) -> pl.DataFrame:
    """Read a kernel cost calibration database (JSON, schemaVersion 1) into CALIBRATION_SCHEMA rows.

    Raises :class:`FormatError` naming the file and the field (``measurements[3].key.dimensions``)
    for anything malformed; never returns part of a file.
    """
    file = os.fspath(path)
    try:
        text = Path(file).read_text()
    except (OSError, UnicodeDecodeError) as exc:
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
    if not isinstance(kernel, str) or not kernel:
        _bad(file, f"{where}.key.kernel", kernel, "a kernel name")
    dims = key.get("dimensions")
    if not isinstance(dims, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                             for d in dims):
        _bad(file, f"{where}.key.dimensions", dims, "a list of non-negative integers")
    arity = 3 if kernel in INNER_KERNELS else 2
    if kernel in (*INNER_KERNELS, "layernorm", "gelu", "softmax", "add", "copy") and len(dims) != arity:
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
