"""The MAC-bound roofline of a compiled program, per op and in total."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

from toolkit import tables
from toolkit.errors import OptionError

FP8_DTYPES = ("f8_143", "f8_152")

if TYPE_CHECKING:
    from toolkit.graph import Graph
    from toolkit.schedule import Schedule
    from toolkit.target import Target

#: the stage results a roofline reads, in the order ``roofline`` takes them
ROOFLINE_INPUTS = ("graph", "schedule", "target")

ROOFLINE_SCHEMA: tables.Schema = {
    "op_id": tables.ID,               # null on the total row
    "name": tables.STR,               # "total" on the total row
    "kind": tables.STR,
    "block": tables.STR,
    "instances": tables.BIG,
    "precision": tables.STR,          # f8 (FP8 weights on the FP8 AMP) | f16; null off the AMP
    "macs": tables.BIG,               # all instances
    "ideal_cycles": tables.BIG,       # ceil(macs / (tiles * macs_per_cycle at the op's precision))
    "est_compute_cycles": tables.BIG,  # the schedule's compute phases of the op, all instances
    "efficiency": pl.Float64,          # ideal / est_compute (null when est is 0)
}


def roofline(graph: Graph | Any, schedule: Schedule | None = None, target: Target | None = None, *,
             tiles: int | None = None) -> pl.DataFrame:
    """MAC-bound ideal cycles per op and in total (ROOFLINE_SCHEMA, total row last); ``roofline(compilation)``
    reads the compilation's graph, schedule and target.

    MACs of a matmul = rows x cols x inner x groups per instance; the ideal
    spreads every MAC over all ``target.tiles`` tiles (or ``tiles``, e.g. the
    tiles a small program uses) at the AMP rate of the op's precision with
    FP16 partials (ipu21: 128 MAC/cycle/tile for FP8 matmuls, 64 for FP16).
    The total row sums the per-op ideals. ``est_compute_cycles`` is the
    schedule's estimate of the op's compute phases, for the ratio.
    """
    from toolkit.simulate.run import program_of
    graph, sched, target = program_of(ROOFLINE_INPUTS, graph, schedule, target)
    n = target.tiles if tiles is None else tiles
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        msg = f"tiles={tiles!r} is not a positive number of tiles; use e.g. {target.tiles} (target '{target.name}')"
        raise OptionError(msg, field="tiles", value=tiles)
    rates = {p: target.amp_rate(p, "f16").macs_per_cycle * n for p in ("f16", "f8")}
    inst = sched.repeats.select("block", "instances")
    est = (sched.phases.filter(pl.col("kind") == "compute").group_by("op_id")
           .agg(pl.col("est_cycles").sum().alias("est_one")))
    t = graph.tensors
    precision = (graph.ops.select("op_id", "kind", "inputs").explode("inputs")
                 .join(t.select(pl.col("tensor_id").alias("inputs"), "role", "dtype"), on="inputs", how="left")
                 .group_by("op_id").agg(
                     pl.when(pl.col("kind").first() != "matmul").then(None)
                     .when(((pl.col("role") == "weight") & pl.col("dtype").is_in(list(FP8_DTYPES))).any())
                     .then(pl.lit("f8")).otherwise(pl.lit("f16")).alias("precision")))
    ops = (graph.ops.select("op_id", "name", "kind", "block", "rows", "cols", "inner", "groups")
           .join(inst, on="block", how="left").join(est, on="op_id", how="left")
           .join(precision, on="op_id", how="left")
           .with_columns(pl.col("instances").fill_null(1))
           .with_columns(pl.when(pl.col("kind") == "matmul")
                         .then(pl.col("rows") * pl.col("cols") * pl.col("inner") * pl.col("groups")
                               * pl.col("instances")).otherwise(0).alias("macs"),
                         (pl.col("est_one").fill_null(0) * pl.col("instances")).alias("est_compute_cycles")))
    rate = pl.col("precision").replace_strict(rates, default=rates["f16"], return_dtype=pl.Int64)
    ops = ops.with_columns(((pl.col("macs") + rate - 1) // rate).alias("ideal_cycles"))
    total = ops.select(pl.lit(None, tables.ID).alias("op_id"), pl.lit("total").alias("name"),
                       pl.lit(None, tables.STR).alias("kind"), pl.lit(None, tables.STR).alias("block"),
                       pl.col("instances").max(), pl.lit(None, tables.STR).alias("precision"), pl.col("macs").sum(),
                       pl.col("ideal_cycles").sum(), pl.col("est_compute_cycles").sum())
    cols = [c for c in ROOFLINE_SCHEMA if c != "efficiency"]
    out = pl.concat([ops.select(cols).cast({c: ROOFLINE_SCHEMA[c] for c in cols}),
                     total.select(cols).cast({c: ROOFLINE_SCHEMA[c] for c in cols})])
    eff = pl.when(pl.col("est_compute_cycles") > 0).then(pl.col("ideal_cycles") / pl.col("est_compute_cycles"))
    return out.with_columns(eff.cast(pl.Float64).alias("efficiency")).select(list(ROOFLINE_SCHEMA))
