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

from toolkit import tables
from toolkit.costs import KERNEL_SYMBOLS, phase_overhead_cycles, tile_horizon_cycles, tile_rows
from toolkit.graph import Graph
from toolkit.layout.plans import LayoutParams, plan_graph
from toolkit.schedule.build import build_program
from toolkit.tables import OBJECTS_SCHEMA, TRANSFERS_SCHEMA
from toolkit.target import Target

PHASES_SCHEMA = {
    "phase": pl.Int32, "kind": pl.String, "op_id": pl.Int32, "name": pl.String, "block": pl.String,
    "wave": pl.Int32, "est_cycles": pl.Int64,
}
COMMANDS_SCHEMA = {
    "command_id": pl.Int64, "phase": pl.Int32, "tile": pl.Int32, "op_id": pl.Int32, "kernel": pl.String,
    "rows": pl.Int64, "cols": pl.Int64, "inner": pl.Int64, "groups": pl.Int64,
    "dtype": pl.String,          # precision the kernel runs at (f16 | f8: FP8 inputs on the FP8 AMP panel)
    "weight_class": pl.String,   # AMP coefficient memory class (interleaved | standard); null off the AMP
    "panels": pl.Int64,          # AMP coefficient panels (K16 x C16 FP16, K32 x C16 FP8) over all groups
    "calls": pl.Int64, "launches": pl.Int64,
    "cast_cycles": pl.Int64,     # part of est_cycles: F16 -> FP8 cast of an FP8 matmul's left panel
    "est_cycles": pl.Int64,      # toolkit.costs rules: groups x invocation cycles (+ launch, + cast)
}
OPERANDS_SCHEMA = {"command_id": pl.Int64, "object_id": pl.Int64, "role": pl.String, "offset": pl.Int64}
RECT = {"g0": pl.Int64, "g1": pl.Int64, "r0": pl.Int64, "r1": pl.Int64, "c0": pl.Int64, "c1": pl.Int64}
SLICES_SCHEMA = {"transfer_id": pl.Int64, "destination": pl.Int32, **RECT}
SEGMENTS_SCHEMA = {"object_id": pl.Int64, "tensor_id": pl.Int32, **RECT}
REPEAT_PHASES_SCHEMA = {"block": pl.String, "instances": pl.Int64, "first_phase": pl.Int32, "last_phase": pl.Int32}
RELOCATIONS_SCHEMA = {"block": pl.String, "instance": pl.Int32, "object_id": pl.Int64, "repeat_index": pl.Int32}


def block_instances(repeats: pl.DataFrame) -> pl.Expr:
    """How many times the phase of each row runs: its ``block``'s repeat instances (REPEAT_PHASES_SCHEMA), 1 outside
    repeated blocks. The one rule for multiplying a symbolic phase's cycles or bytes by its instances."""
    inst = dict(zip(repeats["block"].to_list(), repeats["instances"].to_list(), strict=True))
    return pl.col("block").replace_strict(inst, default=1, return_dtype=pl.Int64)


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

    def __repr__(self) -> str:
        return tables.short_repr(self)

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


def invocations(commands: pl.DataFrame) -> pl.DataFrame:
    """The kernel invocation each command repeats (``toolkit.costs.INVOCATIONS_SCHEMA`` plus ``count``).

    An AMP command is ``groups`` invocations of one ``rows x cols x inner``
    matmul; an elementwise command one invocation over ``rows x groups`` rows
    of ``cols``; a reduce one invocation of ``inner`` partials into ``rows x
    cols`` elements; a copy one call of its bytes is priced from its size and
    is not listed here. ``toolkit.costs.kernel_cycles(invocations(c))`` is what
    the commands' ``est_cycles`` are built from.
    """
    rule = pl.col("kernel").replace_strict(KERNEL_SYMBOLS, default=None)
    amp = rule == "matmul"
    red = rule == "reduce"
    return commands.filter(pl.col("kernel") != "copy").select(
        "command_id", rule.alias("kernel"), "dtype", "weight_class",
        pl.when(red).then(1).when(amp).then(pl.col("rows")).otherwise(pl.col("rows") * pl.col("groups"))
        .alias("rows"),
        pl.when(red).then(pl.col("rows") * pl.col("cols")).otherwise(pl.col("cols")).alias("cols"),
        "inner", pl.when(amp).then(pl.col("groups")).otherwise(1).alias("count"))


def schedule(graph: Graph, params: LayoutParams, target: Target, *, tiles: int | None = None) -> Schedule:
    """Build the BSP program of ``graph`` under the layout ``params`` on ``tiles`` compute tiles."""
    n_tiles = tiles or target.tiles
    ops = list(graph.ops.iter_rows(named=True))
    tensors = {r["tensor_id"]: r for r in graph.tensors.iter_rows(named=True)}
    repeats = dict(zip(graph.repeats["block"].to_list(), graph.repeats["instances"].to_list(), strict=True))
    plans = plan_graph(ops, tensors, graph.params, params, n_tiles)
    carried = {int(r["last_op"]): (int(r["carried_in"]), int(r["carried_out"]))
               for r in graph.repeats.iter_rows(named=True)}
    prog = build_program(ops, plans, tensors, repeats, target, params, carried)
    return _frames(prog, graph, target)


def _frames(prog, graph: Graph, target: Target) -> Schedule:
    phases = prog.phases.frame().with_columns(pl.int_range(pl.len()).alias("phase"))
    phases = phases.select("phase", "kind", "op_id", "name", "block", "wave")
    commands = (prog.commands.frame().with_columns(pl.int_range(pl.len()).alias("command_id"),
                                                   pl.col("weight_class").replace("", None))
                .cast(COMMANDS_SCHEMA).select(list(COMMANDS_SCHEMA)))
    operands = prog.operands.frame().cast(OPERANDS_SCHEMA).select(list(OPERANDS_SCHEMA))

    oc = prog.objects.columns()
    n_obj = prog.objects.count
    uc = prog.uses.columns()
    last = oc["first"].astype(np.int64).copy()
    np.maximum.at(last, uc["object_id"].astype(np.int64), uc["phase"].astype(np.int64))
    is_weight = (prog.objects.series("kind") == "weight").to_numpy()
    last[is_weight] = prog.final_phase  # weights are loaded once and stay

    transfers, slices, st = _staging(prog, n_obj, target)
    n_st = len(st["tile"])
    strings = {name: pl.concat([prog.objects.series(src), pl.Series([fill] * n_st, dtype=pl.String)])
               for name, src, fill in (("kind", "kind", "staging"), ("name", "name", "staging"),
                                       ("class", "cls", "standard"))}
    tensor_id = np.concatenate([oc["tensor_id"], np.full(n_st, -1)])
    objects = pl.DataFrame({
        "object_id": np.arange(n_obj + n_st, dtype=np.int64),
        "tile": np.concatenate([oc["tile"], st["tile"]]).astype(np.int32),
        "kind": strings["kind"], "name": strings["name"],
        "tensor_id": pl.Series(tensor_id, dtype=pl.Int32).set(pl.Series(tensor_id < 0), None),
        "size_bytes": np.concatenate([oc["size_bytes"], st["size_bytes"]]).astype(np.int64),
        "align": np.concatenate([oc["align"], np.full(n_st, 16)]).astype(np.int64),
        "first": np.concatenate([oc["first"], st["phase"]]).astype(np.int32),
        "last": np.concatenate([last, st["phase"]]).astype(np.int32),
    }).with_columns(
        pl.lit("data").alias("access"), strings["class"].alias("class"),
        pl.when(strings["class"] == "interleaved").then(pl.lit([1], dtype=pl.List(pl.Int8)))
        .otherwise(pl.lit([0, 1], dtype=pl.List(pl.Int8))).alias("regions"),
        pl.lit(None, dtype=pl.Int64).alias("group"), pl.lit(None, dtype=pl.Int64).alias("alias_of"),
        pl.Series(np.concatenate([oc["repeat_count"], np.ones(n_st)]).astype(np.int32)).alias("repeat_count"),
        pl.lit([], dtype=pl.List(pl.Int64)).alias("separate_from"), pl.lit(False).alias("auxiliary"),
    ).select(list(OBJECTS_SCHEMA))
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


def _staging(prog, first_id: int, target: Target) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """One staging object per (receiving tile, exchange phase); transfers reference it."""
    if not prog.transfers.count:
        empty_cols = {"tile": np.array([], np.int32), "size_bytes": np.array([], np.int64),
                      "phase": np.array([], np.int32)}
        return (pl.DataFrame(schema=TRANSFERS_SCHEMA), pl.DataFrame(schema=SLICES_SCHEMA), empty_cols)
    tc = prog.transfers.columns()
    n_dest = int(tc["destination"].max()) + 1
    key = tc["phase"].astype(np.int64) * n_dest + tc["destination"]
    uniq, inverse = np.unique(key, return_inverse=True)
    # the window holds whole words: a transfer of an odd number of half-words still takes its last word
    wb = target.word_bytes
    received = np.bincount(inverse, weights=-(-tc["size_bytes"] // wb) * wb).astype(np.int64)
    tc["staging_object"] = first_id + inverse  # rows stay in emission order (grouped by op and wave)
    transfers = pl.DataFrame({k: tc[k] for k in TRANSFERS_SCHEMA}).cast(TRANSFERS_SCHEMA)
    slices = pl.DataFrame({k: tc[k] for k in SLICES_SCHEMA}).cast(SLICES_SCHEMA)
    n_dest = int(tc["destination"].max()) + 1
    cols = {"tile": (uniq % n_dest).astype(np.int32), "phase": (uniq // n_dest).astype(np.int32),
            "size_bytes": np.minimum(received, target.staging_window_bytes)}
    return transfers, slices, cols


def _phase_cycles(phases: pl.DataFrame, commands: pl.DataFrame, transfers: pl.DataFrame, target: Target):
    """Estimated cycles per phase: slowest tile's commands; a fixed sync; the exchange horizon rule
    (:func:`toolkit.costs.tile_horizon_cycles`) on every tile, one receive cutover per source it receives from
    (the lowering refines this with the receive addresses and staging passes)."""
    comp = (commands.group_by("phase", "tile").agg(pl.col("est_cycles").sum())
            .group_by("phase").agg(pl.col("est_cycles").max().alias("compute")))
    per_tile = pl.concat([
        transfers.unique(["transfer_id"]).group_by("phase", "source")
        .agg(pl.col("size_bytes").sum(), pl.len().cast(pl.Int64).alias("sends"), pl.lit(0, pl.Int64).alias("receives"))
        .rename({"source": "tile"}),
        transfers.group_by("phase", "destination")
        .agg(pl.col("size_bytes").sum(), pl.lit(0, pl.Int64).alias("sends"),
             pl.col("source").n_unique().cast(pl.Int64).alias("receives"))
        .rename({"destination": "tile"}),
    ]).group_by("phase", "tile").agg(pl.col("size_bytes").max(), pl.col("sends", "receives").sum())
    words = -(-per_tile["size_bytes"].to_numpy() // target.word_bytes)
    x = tile_horizon_cycles(words, per_tile["receives"].to_numpy(), words, per_tile["sends"].to_numpy(),
                            tile_rows(per_tile["tile"].to_numpy(), target), target)
    ex = (per_tile.select("phase").with_columns(pl.Series("exchange", x))
          .group_by("phase").agg(pl.col("exchange").max() + phase_overhead_cycles(target)))
    return (phases.join(comp, on="phase", how="left").join(ex, on="phase", how="left")
            .with_columns(pl.when(pl.col("kind") == "sync").then(pl.lit(target.costs.sync_cycles))
                          .when(pl.col("kind") == "exchange").then(pl.col("exchange"))
                          .otherwise(pl.col("compute")).fill_null(0).cast(pl.Int64).alias("est_cycles"))
            .select(list(PHASES_SCHEMA)).cast(PHASES_SCHEMA).sort("phase"))
