"""The simulation proper: expanded BSP order, per-step durations, barriers, samples and activities.

See :mod:`toolkit.simulate` for the timing rules.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from toolkit import tables
from toolkit.costs import phase_overhead_cycles
from toolkit.errors import InvalidIRError, OptionError
from toolkit.exchange.horizon import activity_spans
from toolkit.profile import Profile
from toolkit.profile.model import WRAP
from toolkit.schedule.program import PREAMBLE
from toolkit.simulate.calibration import CALIBRATION_SCHEMA, apply_calibration, load_calibration

if TYPE_CHECKING:
    from toolkit.exchange import Exchange
    from toolkit.schedule import Schedule
    from toolkit.target import Target
    from toolkit.tiles import TilePrograms

PHASE_ORDER_SCHEMA: tables.Schema = {
    "event": tables.BIG,      # position in the expanded program = the profile's phase
    "phase": tables.ID,       # schedule phase
    "instance": tables.BIG,   # repeat instance (0 outside repeated blocks) = the profile's epoch
    "kind": tables.STR, "name": tables.STR, "block": tables.STR,
}
INITIAL_SYNC = "initial_sync"
#: the stage results a simulation reads, in the order ``simulate`` takes them
PROGRAM = ("schedule", "exchange", "tiles", "target")

Calibration = pl.DataFrame | str | os.PathLike[str]


def simulate(schedule: Schedule | Any, exchange: Exchange | None = None, tiles: TilePrograms | None = None,
             target: Target | None = None, *, calibration: Calibration | None = None, base_cycle: int = 0) -> Profile:
    """Simulate the program of ``schedule``, ``exchange`` and ``tiles`` on ``target`` cycle by cycle per
    (tile, step); see :mod:`toolkit.simulate` for the rules.

    ``simulate(compilation)`` is short for ``simulate(c.schedule, c.exchange, c.tiles, c.target)``: any
    object holding those four results may stand for them.
    """
    sched, exchange, tiles, target = program_of(PROGRAM, schedule, exchange, tiles, target)
    _check_program(sched, exchange, tiles, target)
    if isinstance(base_cycle, bool) or not isinstance(base_cycle, int | np.integer) or not 0 <= base_cycle < WRAP:
        msg = f"base_cycle={base_cycle!r} is not a 32-bit counter value; use an integer in [0, 2**32)"
        raise OptionError(msg, field="base_cycle", value=base_cycle)
    sync = int(target.costs.sync_cycles)
    cal = None
    if calibration is not None:
        cal = calibration if isinstance(calibration, pl.DataFrame) else load_calibration(calibration)
        missing = [c for c in ("kernel", "dimensions", "median_cycles") if c not in cal.columns]
        if missing:
            msg = (f"calibration frame is missing columns {missing}; pass a path or a frame from "
                   f"load_calibration (columns {list(CALIBRATION_SCHEMA)})")
            raise OptionError(msg, field="calibration", value=missing)
    order = phase_order(sched)
    compute = _compute_steps(sched.commands, cal)
    exch, acts = _exchange_steps(exchange, target)
    steps = tiles.steps.select("tile", "phase", "kind")
    per_step = (steps.join(compute, on=["phase", "tile"], how="left")
                .join(exch, on=["phase", "tile"], how="left")
                .with_columns(
                    pl.when(pl.col("kind") == "compute").then(pl.col("compute_cycles"))
                    .when(pl.col("kind") == "exchange").then(pl.col("exchange_cycles"))
                    .otherwise(pl.lit(sync, tables.BIG)).fill_null(0).alias("cycles"),
                    pl.col("kernel").fill_null(""), pl.col("event_cycles").fill_null(0),
                    pl.col("invocations").fill_null(0))
                .select("tile", "phase", "kind", "kernel", "cycles", "event_cycles", "invocations"))
    # barriers: a phase lasts as long as its slowest tile; cumulative sums over the expanded order
    overrun = phase_overhead_cycles(target)   # measured time past the last arrival of every exchange phase
    length = per_step.group_by("phase").agg(
        (pl.col("cycles").max() + pl.when(pl.col("kind").first() == "exchange").then(overrun).otherwise(0))
        .alias("length"))
    # the preamble's phases (schedule.PREAMBLE) run before the initial sync, every other phase after it
    pre = pl.col("block") == PREAMBLE
    order = (order.join(length, on="phase", how="left").sort("event")
             .with_columns(pl.col("length").fill_null(0))
             .with_columns(pl.when(pre).then(pl.col("length")).otherwise(0).alias("_pre"),
                           pl.when(pre).then(0).otherwise(pl.col("length")).alias("_main")))
    preamble = int(order["_pre"].sum())
    order = order.with_columns(pl.when(pre).then(pl.col("_pre").cum_sum() - pl.col("_pre"))
                               .otherwise(pl.col("_main").cum_sum() - pl.col("_main") + preamble + sync)
                               .alias("offset")).drop("_pre", "_main")
    # Everything above is one row per (tile, schedule phase) or per event: a repeated block's phases are timed
    # once and every instance shares those durations. The per-instance rows are only assembled on request.
    samples, activities, metadata = _expand(per_step, order, _activity_table(acts), sync, base_cycle,
                                            preamble)
    return Profile(samples=samples, activities=activities, metadata=metadata,
                   clock_hz=float(target.clock_hz), schema_version=5, source="simulated")


def _expand(per_step: pl.DataFrame, order: pl.DataFrame, acts: pl.DataFrame, sync: int,
            base_cycle: int, preamble: int = 0) -> tuple[pl.LazyFrame, pl.LazyFrame, pl.LazyFrame]:
    """The profile's samples, activities and metadata as LazyFrames over the symbolic tables.

    ``per_step``: one row per (tile, schedule phase) with its cycles; ``order``: one row per event (the expanded
    program) with its ``offset``; ``acts``: one row per activity of a (tile, schedule phase), in the order a
    sample lists them. A sample is a (tile, event): its step's row placed at the event's offset; an exchange
    sample's activities are its step's activities (offsets within the phase, the same in every instance).
    Per-sample values are prepared on the symbolic rows; the expanded rows only join, add and sort.
    """
    kind_name = {"compute": "compute", "exchange": "exchange", "sync": "synchronization"}
    steps = per_step.select(
        "tile", "phase", pl.col("kind").replace_strict(kind_name, return_dtype=tables.STR), "kernel", "cycles",
        pl.when(pl.col("kind") == "exchange").then(pl.col("event_cycles")).otherwise(0)
        .alias("exchange_event_cycles"),
        pl.when(pl.col("kind") == "compute").then(pl.col("invocations").cast(tables.STR)).alias("invocations"))
    first = steps.select(pl.col("tile").unique()).with_columns(   # the initial sync: event -1, offset 0
        pl.lit(-1, tables.ID).alias("phase"), pl.lit("synchronization").alias("kind"), pl.lit("").alias("kernel"),
        pl.lit(sync, tables.BIG).alias("cycles"), pl.lit(0, tables.BIG).alias("exchange_event_cycles"),
        pl.lit(None, tables.STR).alias("invocations"), pl.lit(-1, tables.BIG).alias("event"),
        pl.lit(0, tables.BIG).alias("instance"), pl.lit(INITIAL_SYNC).alias("name"),
        pl.lit(base_cycle + preamble, tables.BIG).alias("start"))
    events = order.select("phase", "event", "instance", "name", (pl.col("offset") + base_cycle).alias("start"))
    n_pre = int((order["offset"] < preamble).sum()) if preamble else 0   # the preamble's events come first
    row = pl.int_range(pl.len(), dtype=tables.BIG)
    tile_start = pl.when(pl.col("tile") != pl.col("tile").shift(1)).then(row).forward_fill().fill_null(0)
    # one sample per (tile, event), the initial sync first; ``sample`` = position in the tile's list
    rows = (pl.concat([first.lazy(), steps.lazy().join(events.lazy(), on="phase").select(first.columns)])
            # one int64 key (tile, event), the initial sync after the preamble's events and before the rest
            .sort(pl.col("tile").cast(tables.BIG) * WRAP + 2 * pl.col("event") + 2
                  + pl.when(pl.col("event") < 0).then(2 * n_pre + 1).otherwise(0))
            .with_columns((row - tile_start).alias("sample")))
    samples = rows.select(
        "tile", "sample", pl.col("sample").alias("local_index"), pl.col("event").clip(0, None).alias("phase"),
        pl.col("instance").alias("epoch"), pl.col("name").alias("operation"), "kind", "kernel",
        (pl.col("start") % WRAP).alias("start_cycle"), ((pl.col("start") + pl.col("cycles")) % WRAP).alias("end_cycle"),
        "exchange_event_cycles",
    ).cast(tables.SAMPLES_SCHEMA)
    # activities: every exchange sample lists its (tile, phase) activities, in their order
    activities = (rows.filter(pl.col("kind") == "exchange").select("tile", "phase", "sample")
                  .join(acts.lazy(), on=["tile", "phase"], how="inner", maintain_order="left_right")
                  .select(list(tables.ACTIVITIES_SCHEMA)).cast(tables.ACTIVITIES_SCHEMA))
    # metadata: the main kernel's invocation count on every compute sample, as hardware profiles carry it
    metadata = (rows.filter(pl.col("kind") == "compute")
                .select("tile", "sample", pl.lit("invocations").alias("name"), pl.col("invocations").alias("value"))
                .cast(tables.METADATA_SCHEMA))
    return samples, activities, metadata


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


# -- steps -------------------------------------------------------------------------------------------
def _compute_steps(commands: pl.DataFrame, cal: pl.DataFrame | None) -> pl.DataFrame:
    """(phase, tile) -> compute_cycles, main kernel (most cycles, then name) and its invocations (sum of groups)."""
    cmd = commands.select("phase", "tile", "kernel", "rows", "cols", "inner", "groups", "est_cycles")
    if cal is not None and cal.height:
        cmd = apply_calibration(cmd, cal)
    per_kernel = cmd.group_by("phase", "tile", "kernel").agg(pl.col("est_cycles").sum(),
                                                             pl.col("groups").sum().alias("invocations"))
    return (per_kernel.sort("est_cycles", "kernel", descending=[True, False])
            .group_by("phase", "tile")
            .agg(pl.col("est_cycles").sum().alias("compute_cycles"), pl.col("kernel", "invocations").first()))


#: what a simulation reads of each stage result (any object with these fields may stand for the result)
_READS = {"schedule": ("commands", "phases"), "exchange": ("groups", "passes"), "tiles": ("steps",),
          "target": ("costs", "tiles")}


def _check_program(*given: Any) -> None:
    """Each stage result a simulation reads has its stage's fields (a wrong value is refused by name, not met
    later as an AttributeError deep in the simulation)."""
    for name, value in zip(PROGRAM, given, strict=True):
        missing = [f for f in _READS[name] if not hasattr(value, f)]
        if missing:
            msg = (f"simulate: {name} must be the {name} stage's result (with {', '.join(_READS[name])}), got "
                   f"{type(value).__name__} without {missing[0]}; pass the stage results, or one toolkit.Compilation")
            raise OptionError(msg, field=name, value=type(value).__name__)


def program_of(names: tuple[str, ...], *given: Any) -> tuple:
    """The stage results ``names`` a stage reads: given one by one, or as one object holding them all (the first
    argument, the rest None: a compiled program such as a ``toolkit.Compilation``)."""
    first = given[0]
    if all(v is None for v in given[1:]) and all(hasattr(first, n) for n in names):
        return tuple(getattr(first, n) for n in names)
    missing = [n for n, v in zip(names, given, strict=True) if v is None]
    if missing:
        msg = (f"missing {missing}: pass {', '.join(names)} (the stage results), or one compiled program "
               f"holding them (a toolkit.Compilation)")
        raise OptionError(msg, field=missing[0], value=None)
    return given


def _exchange_steps(ex: Exchange, target) -> tuple[pl.DataFrame, dict[str, np.ndarray]]:
    """Exchange timing in numpy over groups and receive rows.

    Returns per (phase, tile) ``exchange_cycles`` (its last activity end) and
    ``event_cycles`` (its last end - its first start), and the activity arrays,
    sorted by (tile, phase, start, receive before send).
    """
    g = {c: ex.groups[c].to_numpy().astype(np.int64) for c in ("phase", "source", "fanout")}
    if ex.groups.height and not np.array_equal(ex.groups["group"].to_numpy(), np.arange(ex.groups.height)):
        msg = "simulate: exchange groups must be numbered 0..n-1 in row order (as lower_exchanges makes them)"
        raise InvalidIRError(msg)
    span = activity_spans(ex.groups, ex.passes, target)   # the exchange horizon model's layout of every phase
    rgroup = ex.passes["group"].to_numpy()
    acts = {
        "tile": np.r_[g["source"], ex.passes["tile"].to_numpy()].astype(np.int64),
        "phase": np.r_[g["phase"], g["phase"][rgroup]],
        "send": np.r_[np.ones(len(g["phase"]), np.int64), np.zeros(len(rgroup), np.int64)],
        "fanout": np.r_[g["fanout"], g["fanout"][rgroup]],
        "start_cycle": np.r_[span["send_start"], span["recv_start"]],
        "end_cycle": np.r_[span["send_end"], span["recv_end"]],
    }
    dur = span["send_end"]
    names = ("send", "start_cycle", "phase", "tile")  # sort keys, least significant first
    bits = [max(int(acts[k].max()).bit_length(), 1) if len(rgroup) + len(dur) else 1 for k in names]
    if sum(bits) <= 63:  # one packed int64 key sorts much faster than a lexsort, and unpacks sorted keys cheaply
        packed, shift = np.zeros(len(acts["tile"]), np.int64), 0
        for k, b in zip(names, bits, strict=True):
            packed |= acts[k] << shift
            shift += b
        order = np.argsort(packed, kind="stable")
        packed = packed[order]
        out, shift = {}, 0
        for k, b in zip(names, bits, strict=True):
            out[k] = (packed >> shift) & ((1 << b) - 1)
            shift += b
        acts = {**out, "fanout": acts["fanout"][order], "end_cycle": acts["end_cycle"][order]}
    else:
        order = np.lexsort([acts[k] for k in names])
        acts = {k: v[order] for k, v in acts.items()}
    tp = acts["tile"] * (int(acts["phase"].max()) + 1 if len(order) else 1) + acts["phase"]
    first = np.flatnonzero(np.r_[True, tp[1:] != tp[:-1]]) if len(tp) else np.zeros(0, np.int64)
    last_end = np.maximum.reduceat(acts["end_cycle"], first) if len(tp) else np.zeros(0, np.int64)
    first_start = np.minimum.reduceat(acts["start_cycle"], first) if len(tp) else np.zeros(0, np.int64)
    per_tile = pl.DataFrame({
        "phase": acts["phase"][first].astype(np.int32), "tile": acts["tile"][first].astype(np.int32),
        "exchange_cycles": last_end, "event_cycles": last_end - first_start,
    })
    return per_tile, acts


def _activity_table(acts: dict[str, np.ndarray]) -> pl.DataFrame:
    """The sorted activity arrays as one row per activity of a (tile, schedule phase) (ACTIVITIES_SCHEMA with
    ``phase`` in place of ``sample``)."""
    n = len(acts["tile"])
    return pl.DataFrame({
        "tile": pl.Series(acts["tile"], dtype=tables.ID),
        "phase": pl.Series(acts["phase"], dtype=tables.ID),
        "kind": pl.Series(["receive", "send"], dtype=tables.STR).gather(acts["send"]),
        "fanout": pl.Series(acts["fanout"], dtype=tables.BIG),
        "paired": pl.Series(np.zeros(n, bool)),
        "start_cycle": pl.Series(acts["start_cycle"], dtype=tables.BIG),
        "end_cycle": pl.Series(acts["end_cycle"], dtype=tables.BIG),
    })
