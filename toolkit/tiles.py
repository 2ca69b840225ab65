"""Stage ``tiles``: sparse per-tile step streams.

Contract: takes a :class:`~toolkit.schedule.Schedule`; returns :class:`TilePrograms`
whose ``steps`` frame (STEPS_SCHEMA) holds one row per (tile, phase) in which
the tile does something: runs commands (compute), sends or receives
(exchange), or takes part in the sync before an exchange it is in. There are
no idle steps: a tile absent from a phase is idle there, and profiles derive
idle intervals from phase boundaries. ``per_tile`` summarizes each tile.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from toolkit import tables
from toolkit.errors import InvalidIRError
from toolkit.schedule.lineage import schedule_fingerprint

STEPS_SCHEMA = {
    "tile": pl.Int32, "index": pl.Int32, "phase": pl.Int32, "kind": pl.String, "commands": pl.Int64,
    "sends": pl.Int64, "receives": pl.Int64, "est_cycles": pl.Int64,
}
PER_TILE_SCHEMA = {
    "tile": pl.Int32, "steps": pl.Int64, "compute_steps": pl.Int64, "exchange_steps": pl.Int64,
    "commands": pl.Int64, "busy_cycles": pl.Int64,
}


@dataclass(frozen=True, slots=True)
class TilePrograms:
    """Per-tile step streams (sparse) and a per-tile summary."""

    steps: pl.DataFrame     # STEPS_SCHEMA
    per_tile: pl.DataFrame  # PER_TILE_SCHEMA
    schedule_fingerprint: str | None = None   # of the schedule lowered (toolkit.schedule.lineage); None: unknown

    def __repr__(self) -> str:
        return tables.short_repr(self)

    def frames(self) -> dict[str, pl.DataFrame]:
        return {"steps": self.steps, "per_tile": self.per_tile}


def lower_tiles(schedule) -> TilePrograms:
    """Build every tile's step stream in bulk from commands and transfers."""
    compute = (schedule.commands.group_by("phase", "tile")
               .agg(pl.len().cast(pl.Int64).alias("commands"), pl.col("est_cycles").sum())
               .with_columns(pl.lit(0, pl.Int64).alias("sends"), pl.lit(0, pl.Int64).alias("receives")))
    tr = schedule.transfers
    sends = (tr.unique(["transfer_id"]).group_by("phase", pl.col("source").alias("tile"))
             .agg(pl.len().cast(pl.Int64).alias("sends"), pl.col("size_bytes").sum().alias("out_bytes")))
    recvs = (tr.group_by("phase", pl.col("destination").alias("tile"))
             .agg(pl.len().cast(pl.Int64).alias("receives"), pl.col("size_bytes").sum().alias("in_bytes")))
    exchange = (sends.join(recvs, on=["phase", "tile"], how="full", coalesce=True)
                .with_columns(pl.col("sends").fill_null(0), pl.col("receives").fill_null(0),
                              pl.lit(0, pl.Int64).alias("commands"),
                              (pl.max_horizontal(pl.col("out_bytes").fill_null(0), pl.col("in_bytes").fill_null(0))
                               // 4).cast(pl.Int64).alias("est_cycles"))
                .drop("out_bytes", "in_bytes"))
    phase_kind = schedule.phases.select("phase", "kind")
    sync_of = (schedule.phases.filter(pl.col("kind") == "sync").select(
        pl.col("phase").alias("sync_phase"), (pl.col("phase") + 1).alias("phase")))
    # a sync step lasts what the schedule says its phase lasts (one owner: schedule.phases.est_cycles)
    sync_cycles = schedule.phases.select(pl.col("phase").alias("sync_phase"), pl.col("est_cycles").cast(pl.Int64))
    syncs = (exchange.select("phase", "tile").join(sync_of, on="phase").join(sync_cycles, on="sync_phase")
             .select(pl.col("sync_phase").alias("phase"), "tile",
                     *(pl.lit(0, pl.Int64).alias(c) for c in ("commands", "sends", "receives")), "est_cycles"))
    cols = ["phase", "tile", "commands", "sends", "receives", "est_cycles"]
    steps = (pl.concat([compute.select(cols), exchange.select(cols), syncs.select(cols)])
             .join(phase_kind, on="phase")
             .sort("tile", "phase")
             .with_columns(pl.int_range(pl.len()).over("tile").cast(pl.Int32).alias("index"))
             .cast({k: v for k, v in STEPS_SCHEMA.items()})
             .select(list(STEPS_SCHEMA)))
    per_tile = (steps.group_by("tile").agg(
        pl.len().cast(pl.Int64).alias("steps"),
        (pl.col("kind") == "compute").sum().cast(pl.Int64).alias("compute_steps"),
        (pl.col("kind") == "exchange").sum().cast(pl.Int64).alias("exchange_steps"),
        pl.col("commands").sum(), pl.col("est_cycles").sum().alias("busy_cycles"))
        .sort("tile").cast(PER_TILE_SCHEMA).select(list(PER_TILE_SCHEMA)))
    result = TilePrograms(steps=steps, per_tile=per_tile, schedule_fingerprint=schedule_fingerprint(schedule))
    verify_tiles(result, schedule)
    return result


def verify_tiles(tp: TilePrograms, schedule) -> None:
    """Steps are unique per (tile, phase), indices dense, and cover every command."""
    dup = tp.steps.group_by("tile", "phase").len().filter(pl.col("len") > 1)
    if dup.height:
        raise InvalidIRError("lower_tiles: a tile has two steps in one phase", rows=dup)
    n_cmd = int(tp.steps["commands"].sum())
    if n_cmd != schedule.commands.height:
        msg = f"lower_tiles: steps cover {n_cmd} commands, the schedule has {schedule.commands.height}"
        raise InvalidIRError(msg)
