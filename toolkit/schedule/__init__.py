"""Stage ``schedule``: the BSP program of a graph under a chosen layout.

Contract: takes a :class:`~toolkit.graph.Graph`, the chosen
:class:`~toolkit.layout.LayoutResult` and a :class:`~toolkit.target.Target`;
returns a :class:`Schedule` whose frames are

- ``phases`` (PHASES_SCHEMA): one row per symbolic phase (compute, exchange,
  sync) with its op, block and wave; phases of a repeated block appear once.
- ``commands`` (COMMANDS_SCHEMA): one kernel command per work cell (and one
  ``copy`` per local piece of an operand panel), with its estimated cycles.
- ``operands`` (OPERANDS_SCHEMA): which objects each command reads and writes.
- ``transfers`` (tables.TRANSFERS_SCHEMA) and ``slices`` (the tensor rectangle
  of each transfer); a transfer references its staging object.
- ``objects`` (tables.OBJECTS_SCHEMA): every memory object, with ``segments``
  (the tensor rectangle each object holds).
- ``repeats`` and ``relocations``: repeated blocks with their phase range and
  the per-instance relocations (weights of instance i at ``repeat_index`` i).

Expanded views (every instance of every repeated phase) come from
:meth:`Schedule.expand` as LazyFrames.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from toolkit.graph import Graph
from toolkit.layout.plans import LayoutParams, plan_graph
from toolkit.schedule.build import build_program
from toolkit.tables import OBJECTS_SCHEMA, TRANSFERS_SCHEMA, frame
from toolkit.target import Target

PHASES_SCHEMA = {
    "phase": pl.Int32, "kind": pl.String, "op_id": pl.Int32, "name": pl.String, "block": pl.String,
    "wave": pl.Int32, "est_cycles": pl.Int64,
}
COMMANDS_SCHEMA = {
    "command_id": pl.Int64, "phase": pl.Int32, "tile": pl.Int32, "op_id": pl.Int32, "kernel": pl.String,
    "rows": pl.Int64, "cols": pl.Int64, "inner": pl.Int64, "groups": pl.Int64, "calls": pl.Int64,
    "launches": pl.Int64, "est_cycles": pl.Int64,
}
OPERANDS_SCHEMA = {"command_id": pl.Int64, "object_id": pl.Int64, "role": pl.String, "offset": pl.Int64}
RECT = {"g0": pl.Int64, "g1": pl.Int64, "r0": pl.Int64, "r1": pl.Int64, "c0": pl.Int64, "c1": pl.Int64}
SLICES_SCHEMA = {"transfer_id": pl.Int64, "destination": pl.Int32, **RECT}
SEGMENTS_SCHEMA = {"object_id": pl.Int64, "tensor_id": pl.Int32, **RECT}
REPEAT_PHASES_SCHEMA = {"block": pl.String, "instances": pl.Int64, "first_phase": pl.Int32, "last_phase": pl.Int32}
RELOCATIONS_SCHEMA = {"block": pl.String, "instance": pl.Int32, "object_id": pl.Int64, "repeat_index": pl.Int32}


@dataclass(frozen=True, slots=True)
class Schedule:
    """The symbolic BSP program: phases, commands, transfers and memory objects."""

    phases: pl.DataFrame
    commands: pl.DataFrame
    operands: pl.DataFrame
    transfers: pl.DataFrame
    slices: pl.DataFrame
    objects: pl.DataFrame
    segments: pl.DataFrame
    repeats: pl.DataFrame
    relocations: pl.DataFrame

    def frames(self) -> dict[str, pl.DataFrame]:
        return {name: getattr(self, name) for name in self.__slots__}

    def expand(self) -> dict[str, pl.LazyFrame]:
        """Per-instance views (lazy): every repeated phase, command and transfer once per instance."""
        inst = self.repeats.lazy().select("block", pl.int_ranges(0, "instances").alias("instance"))
        phases = (self.phases.lazy().join(inst, on="block", how="left")
                  .with_columns(pl.col("instance").fill_null(pl.lit([0], dtype=pl.List(pl.Int64))))
                  .explode("instance"))
        key = phases.select("phase", "instance")
        return {
            "phases": phases,
            "commands": self.commands.lazy().join(key, on="phase"),
            "transfers": self.transfers.lazy().join(key, on="phase"),
        }

    def summary(self) -> dict[str, int]:
        ex = self.expand()
        return {
            "phases": int(ex["phases"].select(pl.len()).collect().item()),
            "commands": int(ex["commands"].select(pl.len()).collect().item()),
            "transfers": int(ex["transfers"].select(pl.len()).collect().item()),
            "objects": self.objects.height,
            "symbolic_phases": self.phases.height,
            "symbolic_commands": self.commands.height,
            "symbolic_transfers": self.transfers.height,
        }


def schedule(graph: Graph, params: LayoutParams, target: Target, *, tiles: int | None = None) -> Schedule:
    """Build the BSP program of ``graph`` under the layout ``params`` on ``tiles`` compute tiles."""
    n_tiles = tiles or target.tiles
    ops = list(graph.ops.iter_rows(named=True))
    tensors = {r["tensor_id"]: r for r in graph.tensors.iter_rows(named=True)}
    repeats = dict(zip(graph.repeats["block"].to_list(), graph.repeats["instances"].to_list(), strict=True))
    plans = plan_graph(ops, tensors, graph.params, params, n_tiles)
    prog = build_program(ops, plans, tensors, repeats, target, params)
    return _frames(prog, graph, target)


def _frames(prog, graph: Graph, target: Target) -> Schedule:
    ph = prog.phases.columns()
    phases = pl.DataFrame({"phase": np.arange(prog.phases.count), "kind": ph["kind"], "op_id": ph["op_id"],
                           "name": ph["name"], "block": ph["block"], "wave": ph["wave"]})
    cc = prog.commands.columns()
    commands = pl.DataFrame({"command_id": np.arange(prog.commands.count), **cc}).cast(
        {k: v for k, v in COMMANDS_SCHEMA.items()}).select(list(COMMANDS_SCHEMA))
    operands = pl.DataFrame(prog.operands.columns()).cast(OPERANDS_SCHEMA).select(list(OPERANDS_SCHEMA))

    oc = prog.objects.columns()
    uses = pl.DataFrame(prog.uses.columns()).group_by("object_id").agg(pl.col("phase").max().alias("last_use"))
    last = np.maximum(oc["first"], uses.sort("object_id").join(
        pl.DataFrame({"object_id": np.arange(prog.objects.count)}), on="object_id", how="right")
        .sort("object_id")["last_use"].fill_null(-1).to_numpy())
    weight = oc["kind"] == "weight"
    last = np.where(weight, prog.final_phase, last)  # weights are loaded once and stay
    n_obj = prog.objects.count

    tc = prog.transfers.columns() if prog.transfers.count else {}
    transfers, slices, staging_cols = _staging(tc, n_obj, target)
    objects = frame({
        "object_id": np.concatenate([np.arange(n_obj), staging_cols["object_id"]]),
        "tile": np.concatenate([oc["tile"], staging_cols["tile"]]),
        "kind": np.concatenate([oc["kind"].astype(object), np.full(len(staging_cols["tile"]), "staging", object)]),
        "name": np.concatenate([oc["name"].astype(object), np.full(len(staging_cols["tile"]), "staging", object)]),
        "tensor_id": np.concatenate([oc["tensor_id"], np.full(len(staging_cols["tile"]), -1)]),
        "size_bytes": np.concatenate([oc["size_bytes"], staging_cols["size_bytes"]]),
        "align": np.concatenate([oc["align"], np.full(len(staging_cols["tile"]), 16)]),
        "first": np.concatenate([oc["first"], staging_cols["phase"]]),
        "last": np.concatenate([last, staging_cols["phase"]]),
        "access": "data",
        "class": np.concatenate([oc["cls"].astype(object), np.full(len(staging_cols["tile"]), "standard", object)]),
        "regions": None, "group": None, "alias_of": None,
        "repeat_count": np.concatenate([oc["repeat_count"], np.ones(len(staging_cols["tile"]), np.int64)]),
        "separate_from": None, "auxiliary": False,
    }, {**OBJECTS_SCHEMA, "regions": pl.List(pl.Int8)}, what="objects").with_columns(
        pl.when(pl.col("tensor_id") < 0).then(None).otherwise(pl.col("tensor_id")).alias("tensor_id"),
        pl.when(pl.col("class") == "interleaved").then(pl.lit([1], dtype=pl.List(pl.Int8)))
        .otherwise(pl.lit([0, 1], dtype=pl.List(pl.Int8))).alias("regions"),
        pl.lit([], dtype=pl.List(pl.Int64)).alias("separate_from"),
    )
    segments = pl.DataFrame({"object_id": np.arange(n_obj), "tensor_id": oc["tensor_id"],
                             **{k: oc[k] for k in RECT}}).cast(SEGMENTS_SCHEMA)
    reps = graph.repeats
    if reps.height:
        block_phases = phases.group_by("block").agg(pl.col("phase").min().alias("first_phase"),
                                                    pl.col("phase").max().alias("last_phase"))
        repeats = reps.select("block", "instances").join(block_phases, on="block").cast(REPEAT_PHASES_SCHEMA)
        w = objects.filter((pl.col("kind") == "weight") & (pl.col("repeat_count") > 1)).select("object_id",
                                                                                            "repeat_count")
        relocations = (repeats.select("block", "instances").join(w, how="cross")
                       .filter(pl.col("repeat_count") == pl.col("instances"))
                       .select("block", pl.int_ranges(0, "instances").alias("instance"), "object_id")
                       .explode("instance").with_columns(pl.col("instance").alias("repeat_index"))
                       .cast(RELOCATIONS_SCHEMA).select(list(RELOCATIONS_SCHEMA)))
    else:
        repeats = pl.DataFrame(schema=REPEAT_PHASES_SCHEMA)
        relocations = pl.DataFrame(schema=RELOCATIONS_SCHEMA)
    phases = _phase_cycles(phases, commands, transfers, target)
    return Schedule(phases=phases, commands=commands, operands=operands, transfers=transfers, slices=slices,
                    objects=objects, segments=segments, repeats=repeats, relocations=relocations)


def _staging(tc: dict, first_id: int, target: Target) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """One staging object per (receiving tile, exchange phase); transfers reference it."""
    if not tc:
        empty_cols = {"object_id": np.array([], np.int64), "tile": np.array([], np.int32),
                      "size_bytes": np.array([], np.int64), "phase": np.array([], np.int32)}
        return (pl.DataFrame(schema=TRANSFERS_SCHEMA), pl.DataFrame(schema=SLICES_SCHEMA), empty_cols)
    t = pl.DataFrame(tc)
    stage = (t.group_by("phase", "destination").agg(pl.col("size_bytes").sum())
             .sort("phase", "destination")
             .with_columns((pl.int_range(pl.len()) + first_id).alias("staging_object"),
                           pl.min_horizontal(pl.col("size_bytes"), pl.lit(target.staging_window_bytes))
                           .alias("staging_bytes")))
    t = t.join(stage.select("phase", "destination", "staging_object"), on=["phase", "destination"])
    transfers = t.select(list(TRANSFERS_SCHEMA)).cast(TRANSFERS_SCHEMA).sort("transfer_id", "destination")
    slices = t.select(list(SLICES_SCHEMA)).cast(SLICES_SCHEMA).sort("transfer_id", "destination")
    cols = {"object_id": stage["staging_object"].to_numpy(), "tile": stage["destination"].to_numpy(),
            "size_bytes": stage["staging_bytes"].to_numpy(), "phase": stage["phase"].to_numpy()}
    return transfers, slices, cols


def _phase_cycles(phases: pl.DataFrame, commands: pl.DataFrame, transfers: pl.DataFrame, target: Target):
    """Estimated cycles per phase: slowest tile's commands; busiest link; a fixed sync."""
    comp = (commands.group_by("phase", "tile").agg(pl.col("est_cycles").sum())
            .group_by("phase").agg(pl.col("est_cycles").max().alias("compute")))
    per_tile = pl.concat([
        transfers.unique(["transfer_id"]).group_by("phase", "source")
        .agg(pl.col("size_bytes").sum(), pl.len().alias("n")).rename({"source": "tile"}),
        transfers.group_by("phase", "destination").agg(pl.col("size_bytes").sum(), pl.len().alias("n"))
        .rename({"destination": "tile"}),
    ])
    ex = per_tile.group_by("phase").agg(
        ((pl.col("size_bytes") / target.exchange_bytes_per_cycle).ceil().cast(pl.Int64)
         + pl.col("n") * target.costs.exchange_fragment_cycles).max().alias("exchange"))
    return (phases.join(comp, on="phase", how="left").join(ex, on="phase", how="left")
            .with_columns(pl.when(pl.col("kind") == "sync").then(pl.lit(target.costs.sync_cycles))
                          .when(pl.col("kind") == "exchange").then(pl.col("exchange"))
                          .otherwise(pl.col("compute")).fill_null(0).cast(pl.Int64).alias("est_cycles"))
            .select(list(PHASES_SCHEMA)).cast(PHASES_SCHEMA).sort("phase"))
