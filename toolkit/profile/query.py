"""Questions asked of a profile: where the cycles go, who waits at barriers, what changed, where tiles idle.

All functions take a :class:`Profile` (cropped here) or an existing
:class:`Crop`, and answer with polars frames whose schemas are declared below.
Offsets are cycles from the crop origin.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from toolkit import tables
from toolkit.errors import OptionError
from toolkit.profile.crop import Crop, crop
from toolkit.profile.model import Profile, require_profile

GROUP_KEYS: dict[str, pl.DataType | type[pl.DataType]] = {
    "kernel": tables.STR, "operation": tables.STR, "phase": tables.BIG, "kind": tables.STR, "tile": tables.ID,
}
COMPARE_KEYS = ("phase", "operation", "kernel")
#: query() columns after the group key
QUERY_COLUMNS: tables.Schema = {
    "samples": tables.BIG,
    "tiles": tables.BIG,
    "span_cycles": tables.BIG,         # first start to last end of the group (not its cost: gaps count)
    "busy_cycles": tables.BIG,         # wall-clock cycles in which at least one of the group's samples runs
    "wall_share": pl.Float64,          # busy_cycles / the profile's wall clock (its cropped cycles)
    "work_cycles": tables.BIG,         # sample durations summed over tiles
    "mean_cycles": pl.Float64,
    "p50_cycles": pl.Float64,
    "p95_cycles": pl.Float64,
    "max_cycles": tables.BIG,
    "first_offset_cycles": tables.BIG,
    "last_offset_cycles": tables.BIG,
}
#: what each query() number is and its scope, as a table's legend says it
QUERY_MEANINGS = {
    "tiles": "tiles with a sample in the group",
    "span_cycles": "wall clock from the group's first start to its last end (gaps count)",
    "busy_cycles": "wall-clock cycles in which one of its samples runs on any tile",
    "wall_share": "busy_cycles over the profile's wall clock",
    "work_cycles": "sample cycles summed over tiles",
    "mean_cycles": "per sample (also p50, p95, max)",
    "first_offset_cycles": "from the origin (also last_offset_cycles)",
}
BARRIER_SCHEMA: tables.Schema = {
    "phase": tables.BIG,
    "tiles": tables.BIG,
    "entry_offset_cycles": tables.BIG,   # first tile to enter
    "exit_offset_cycles": tables.BIG,    # last tile to leave
    "entry_spread_cycles": tables.BIG,   # latest entry - earliest entry
    "exit_spread_cycles": tables.BIG,    # latest exit - earliest exit
    "work_spread_cycles": tables.BIG,    # latest end of real work - earliest end of real work
    "latest_tile": tables.ID,            # the straggler: last to finish its real work
    "max_wait_cycles": tables.BIG,
    "mean_wait_cycles": pl.Float64,
    "first_arrival_offset_cycles": tables.BIG,   # earliest end of real work (a tile arriving at the barrier)
    "last_arrival_offset_cycles": tables.BIG,    # the late tile's arrival
    "after_last_arrival_cycles": tables.BIG,     # phase exit - last arrival: what the barrier itself costs
    "label": tables.STR,                 # the phase's operation and kind (its most common among samples)
}
WAIT_SCHEMA: tables.Schema = {
    "phase": tables.BIG,
    "tile": tables.ID,
    "entry_offset_cycles": tables.BIG,
    "work_end_offset_cycles": tables.BIG,  # end of the tile's last compute/exchange sample in the phase
    "exit_offset_cycles": tables.BIG,
    "wait_cycles": tables.BIG,             # phase exit - the tile's work end: time spent waiting for others
}
IDLE_SCHEMA: tables.Schema = {
    "tile": tables.ID,
    "phase": tables.BIG,                   # phase of the sample the idle interval ends in (null: the tail)
    "start_offset_cycles": tables.BIG,
    "end_offset_cycles": tables.BIG,
    "duration_cycles": tables.BIG,
}
WAITING_KINDS = ("synchronization", "idle")


@dataclass(frozen=True, slots=True, kw_only=True)
class Barriers:
    """Per-phase barrier spreads, and per (phase, tile) who waited how long."""

    phases: pl.DataFrame  # BARRIER_SCHEMA
    waits: pl.DataFrame   # WAIT_SCHEMA

    def __repr__(self) -> str:
        return tables.short_repr(self)


def kernel_label() -> pl.Expr:
    """A sample's kernel, or its kind where it runs none (exchange, synchronization, idle), so no group is blank."""
    k = pl.col("kernel")
    return pl.when(k.is_null() | (k == "")).then(pl.col("kind")).otherwise(k).alias("kernel")


def query(profile: Profile | Crop, by: str = "kernel", cropped: bool = True) -> pl.DataFrame:
    """Cycles per group: ``by`` is one of kernel, operation, phase, kind, tile.

    Columns: the key (for phases, then their :func:`phase_labels` label), then ``QUERY_COLUMNS``. Samples that
    run no kernel are grouped by their kind
    (:func:`kernel_label`). Durations are the cropped ones
    (``cropped=False``: the shared clock). Rows by key for phase and tile, else
    by busy cycles (wall clock in which the group runs on any tile), largest first. A :class:`Crop` is used as
    it is.
    """
    if by not in GROUP_KEYS:
        msg = f"by={by!r} is not a group key; use one of {list(GROUP_KEYS)}"
        raise OptionError(msg, field="by", value=by)
    c = _crop(profile, cropped)
    dur, start, end = pl.col("duration_cycles"), pl.col("start_offset_cycles"), pl.col("end_offset_cycles")
    samples = c.samples.with_columns(kernel_label()) if by == "kernel" else c.samples
    busy = _busy(samples, by)
    out = samples.group_by(by).agg(
        pl.len().alias("samples"),
        pl.col("tile").n_unique().alias("tiles"),
        (end.max() - start.min()).alias("span_cycles"),
        dur.sum().alias("work_cycles"),
        dur.mean().alias("mean_cycles"),
        dur.quantile(0.5, "linear").alias("p50_cycles"),
        dur.quantile(0.95, "linear").alias("p95_cycles"),
        dur.max().alias("max_cycles"),
        start.min().alias("first_offset_cycles"),
        end.max().alias("last_offset_cycles"),
    )
    wall = max(int(c.cropped_cycles), 1)
    out = out.join(busy, on=by, how="left").with_columns((pl.col("busy_cycles") / wall).alias("wall_share"))
    out = out.sort(by) if by in ("phase", "tile") else out.sort(["busy_cycles", by], descending=[True, False])
    out = out.cast({by: GROUP_KEYS[by], **QUERY_COLUMNS}).select(by, *QUERY_COLUMNS)
    if by == "phase":   # phases also say what they are
        out = out.join(phase_labels(c), on="phase", how="left").select("phase", "label", *QUERY_COLUMNS)
    return out


def _busy(samples: pl.DataFrame, by: str) -> pl.DataFrame:
    """Per group, the wall-clock cycles covered by the union of its samples' intervals (over all tiles):
    intervals sorted by start open a new run where they start past every earlier end."""
    s, e = pl.col("start_offset_cycles"), pl.col("end_offset_cycles")
    runs = (samples.lazy().select(by, s, e).filter(e > s).sort(by, "start_offset_cycles")
            .with_columns(e.cum_max().shift(1).over(by).alias("_reach"))
            .with_columns((pl.col("_reach").is_null() | (s > pl.col("_reach"))).cum_sum().over(by).alias("_run"))
            .group_by(by, "_run").agg((e.max() - s.min()).alias("busy_cycles"))
            .group_by(by).agg(pl.col("busy_cycles").sum()))
    out = samples.lazy().select(by).unique().join(runs, on=by, how="left")
    return out.with_columns(pl.col("busy_cycles").fill_null(0)).collect()


def phase_labels(profile: Profile | Crop) -> pl.DataFrame:
    """Per phase, its label: the operation and kind of the work that ran in it (``"12 mlp.fc2 compute"`` reads
    better than ``12``): compute and exchange samples vote by their cycles; a phase with no such sample is
    labelled by its synchronization samples; idle samples never vote. A phase that also holds the tiles'
    initial sync barrier (a tile's first sample, a synchronization) says so: ``"0 mlp.ln compute + initial
    sync"``, so the 600 cycles of that barrier are not taken for the work's."""
    s = _crop(profile, cropped=False, func="phase_labels").samples
    work = ~pl.col("kind").is_in(list(WAITING_KINDS))
    weight = (pl.col("end_offset_cycles") - pl.col("start_offset_cycles")).clip(1, None)
    votes = (s.filter(pl.col("kind") != "idle")
             .with_columns(pl.when(work).then(weight * 2**20).otherwise(1).alias("_vote"),
                           ((pl.col("sample") == 0) & (pl.col("kind") == "synchronization")).alias("_entry"))
             .group_by("phase", pl.col("operation").fill_null(""), "kind", "_entry").agg(pl.col("_vote").sum()))
    entry = votes.group_by("phase").agg(pl.col("_entry").any().alias("_has_entry"))
    best = (votes.sort("phase", "_entry", "_vote", "operation", "kind", descending=[False, False, True, False, False])
            .group_by("phase", maintain_order=True).first().join(entry, on="phase"))
    label = pl.concat_str(pl.col("operation"), pl.lit(" "), pl.col("kind")).str.strip_chars()
    return (best.select("phase", pl.when(pl.col("_has_entry") & ~pl.col("_entry"))
                        .then(label + " + initial sync").otherwise(label).alias("label"))
            .cast({"phase": tables.BIG, "label": tables.STR}).sort("phase"))



def barriers(profile: Profile | Crop) -> Barriers:
    """Barrier behaviour per phase, on the shared clock (clipping would distort the first phase).

    A tile's entry is its first sample start in the phase, its exit its last
    sample end, its work end (its arrival at the barrier) the last end of a
    sample that is not synchronization or idle. The latest tile is the one
    whose work ends last; every tile's wait is the phase exit minus its work
    end; ``after_last_arrival_cycles`` is what the barrier costs past the late
    tile. Spreads are per phase: summing them across phases means nothing.
    """
    c = _crop(profile, cropped=False, func="barriers")
    s = c.samples
    waiting = pl.col("kind").is_in(list(WAITING_KINDS))
    per_tile = s.group_by("phase", "tile").agg(
        pl.col("start_offset_cycles").min().alias("entry_offset_cycles"),
        pl.col("end_offset_cycles").filter(~waiting).max().alias("work_end_offset_cycles"),
        pl.col("end_offset_cycles").max().alias("exit_offset_cycles"),
    ).with_columns(pl.col("work_end_offset_cycles").fill_null(pl.col("entry_offset_cycles")))
    waits = per_tile.with_columns(
        (pl.col("exit_offset_cycles").max().over("phase") - pl.col("work_end_offset_cycles")).alias("wait_cycles"),
    ).sort("phase", "tile").cast(WAIT_SCHEMA).select(list(WAIT_SCHEMA))
    work = pl.col("work_end_offset_cycles")
    phases = waits.group_by("phase").agg(
        pl.len().alias("tiles"),
        pl.col("entry_offset_cycles").min(),
        pl.col("exit_offset_cycles").max(),
        (pl.col("entry_offset_cycles").max() - pl.col("entry_offset_cycles").min()).alias("entry_spread_cycles"),
        (pl.col("exit_offset_cycles").max() - pl.col("exit_offset_cycles").min()).alias("exit_spread_cycles"),
        (work.max() - work.min()).alias("work_spread_cycles"),
        pl.col("tile").sort_by(work, descending=True).first().alias("latest_tile"),
        pl.col("wait_cycles").max().alias("max_wait_cycles"),
        pl.col("wait_cycles").mean().alias("mean_wait_cycles"),
        work.min().alias("first_arrival_offset_cycles"),
        work.max().alias("last_arrival_offset_cycles"),
        (pl.col("exit_offset_cycles").max() - work.max()).alias("after_last_arrival_cycles"),
    )
    phases = (phases.join(phase_labels(c), on="phase", how="left").sort("phase")
              .cast(BARRIER_SCHEMA).select(list(BARRIER_SCHEMA)))
    return Barriers(phases=phases, waits=waits)


def compare(*profiles: Profile | Crop, by: str = "phase", names: list[str] | None = None,
            metric: str | None = None, cropped: bool = True) -> pl.DataFrame:
    """Two or more profiles aligned by ``by`` (phase, operation or kernel).

    ``metric`` is a :func:`query` column (default: span_cycles for phases, work_cycles otherwise).
    Columns: the key (phases then their label), ``metric`` (which query column every ``<name>_cycles`` holds:
    a kernel's work cycles are summed over tiles, a phase's span is wall clock), ``<name>_cycles`` per profile,
    and for every profile after the first ``<name>_delta_cycles`` and ``<name>_ratio`` against the first.
    Groups missing from a profile have null cycles there and count 0 in the deltas. Phases align by what they are (their
    :func:`phase_labels` label, the repeat instance (``epoch``) it ran in, and its occurrence there: the second
    ``mlp.fc2 compute`` of instance 1), not by number, so two layouts with different phase counts still compare
    op by op; ``phase`` is the first profile's number.
    """
    if len(profiles) < 2:
        msg = f"compare needs at least two profiles, got {len(profiles)}"
        raise OptionError(msg, field="profiles", value=len(profiles))
    if by not in COMPARE_KEYS:
        msg = f"by={by!r} cannot align profiles; use one of {list(COMPARE_KEYS)}"
        raise OptionError(msg, field="by", value=by)
    names = list(names) if names is not None else [f"p{i}" for i in range(len(profiles))]
    if len(names) != len(profiles) or len(set(names)) != len(names):
        msg = f"names={names!r} must be {len(profiles)} distinct names, one per profile"
        raise OptionError(msg, field="names", value=names)
    metric = metric or ("span_cycles" if by == "phase" else "work_cycles")
    if metric not in QUERY_COLUMNS:
        msg = f"metric={metric!r} is not a query column; use one of {list(QUERY_COLUMNS)}"
        raise OptionError(msg, field="metric", value=metric)
    # phases of two programs align by what they are (the label, the repeat instance it ran in, and which
    # occurrence of it there), not by number: a different layout may add or drop phases, which would shift every
    # later number, and counting occurrences over the whole program would pair one instance's extra phase with
    # the next instance's
    on = ["label", "epoch", "occurrence"] if by == "phase" else [by]
    out: pl.DataFrame | None = None
    for name, p in zip(names, profiles, strict=True):
        c = _crop(p, cropped, "compare")
        q = query(c, by=by)
        if by == "phase":
            epochs = c.samples.group_by("phase").agg(pl.col("epoch").min().cast(pl.Int64))
            q = (q.join(epochs, on="phase", how="left")
                 .with_columns(pl.int_range(1, pl.len() + 1).over("label", "epoch").alias("occurrence")))
        q = q.select(*on, *(["phase"] if by == "phase" else []), pl.col(metric).alias(f"{name}_cycles"))
        if out is not None and by == "phase":
            q = q.rename({"phase": f"_phase_{name}"})
        out = q if out is None else out.join(q, on=on, how="full", coalesce=True)
    assert out is not None
    if by == "phase":   # the first profile's phase number, else the first that has the phase
        later = [f"_phase_{n}" for n in names[1:]]
        out = (out.with_columns(pl.coalesce("phase", *later).alias("phase"))
               .drop(later).select("phase", "label", pl.exclude("phase", "label", "epoch", "occurrence"))
               .sort("phase", nulls_last=True))
    base = pl.col(f"{names[0]}_cycles")
    # a group one profile lacks (a kernel one layout never runs) ran 0 cycles there: its cycles stay null (absent)
    # but its delta is its whole cost, as the delta chart draws it
    out = out.with_columns(
        *((pl.col(f"{n}_cycles").fill_null(0) - base.fill_null(0)).alias(f"{n}_delta_cycles") for n in names[1:]),
        *((pl.col(f"{n}_cycles") / base).alias(f"{n}_ratio") for n in names[1:]),
    )
    keys = ["phase", "label"] if by == "phase" else [by]
    out = out.select(*keys, pl.lit(metric).alias("metric"), pl.exclude(*keys))   # each number says what it is
    return out.sort(by, nulls_last=True) if by == "phase" else out.sort(base, by, descending=[True, False],
                                                                          nulls_last=True)


def idle(profile: Profile | Crop, cropped: bool = True) -> pl.LazyFrame:
    """Idle intervals per tile, derived (never stored): gaps between a tile's samples and after its last one.

    A gap is labelled with the phase of the sample that ends it (the phase the
    tile waits to enter); the tail gap up to the profile's last end has a null
    phase. Columns: ``IDLE_SCHEMA``.
    """
    c = _crop(profile, cropped, "idle")
    end_all = c.cropped_cycles
    lf = c.samples.lazy().select("tile", "phase", "start_offset_cycles", "end_offset_cycles")
    gaps = lf.sort("tile", "start_offset_cycles").with_columns(
        pl.col("end_offset_cycles").cum_max().shift(1, fill_value=0).over("tile").alias("_prev"),
    ).select(
        "tile", "phase", pl.col("_prev").alias("start_offset_cycles"),
        pl.col("start_offset_cycles").alias("end_offset_cycles"),
    )
    tails = lf.group_by("tile").agg(pl.col("end_offset_cycles").max().alias("start_offset_cycles")).select(
        "tile", pl.lit(None, tables.BIG).alias("phase"), "start_offset_cycles",
        pl.lit(end_all, tables.BIG).alias("end_offset_cycles"),
    )
    return (pl.concat([gaps, tails])
            .with_columns((pl.col("end_offset_cycles") - pl.col("start_offset_cycles")).alias("duration_cycles"))
            .filter(pl.col("duration_cycles") > 0)
            .sort("tile", "start_offset_cycles")
            .cast(IDLE_SCHEMA).select(list(IDLE_SCHEMA)))


def _crop(profile: Profile | Crop, cropped: bool, func: str = "query") -> Crop:
    profile = require_profile(profile, func, also=(Crop,), need=tuple(tables.SAMPLES_SCHEMA))
    if isinstance(profile, Crop):
        return profile
    return crop(profile, shared_clock=not cropped)
