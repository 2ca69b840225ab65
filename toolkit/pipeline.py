"""``compile``: run the stages in order, verify each, keep every intermediate.

A :class:`Compilation` holds every stage's typed result, so a notebook can
open any intermediate (``c.schedule.transfers``) or all of them
(``c.frames()``). Nothing is printed: progress goes to an optional callback
``progress(stage, index, total)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from toolkit.errors import ModelError
from toolkit.graph import Graph, Workload, build_graph
from toolkit.layout import LayoutResult, search_layouts
from toolkit.options import Options, as_options
from toolkit.schedule import Schedule, schedule
from toolkit.schedule.verify import verify_schedule
from toolkit.target import Target, ipu21
from toolkit.tiles import TilePrograms, lower_tiles

Progress = Callable[[str, int, int], None]
STAGES = ("graph", "layout", "schedule", "tiles")


@dataclass(frozen=True, slots=True)
class Compilation:
    """Every stage's result for one workload, target and options."""

    workload: str
    target: Target
    options: Options
    graph: Graph
    layout: LayoutResult
    schedule: Schedule
    tiles: TilePrograms
    timings: dict[str, float] = field(default_factory=dict)

    def frames(self) -> dict[str, pl.DataFrame]:
        """Every stage's DataFrames by name, prefixed with the stage (``schedule.transfers``)."""
        out: dict[str, pl.DataFrame] = {}
        for stage in STAGES:
            result = getattr(self, stage)
            for name, df in result.frames().items():
                out[f"{stage}.{name}"] = df
        return out

    def summary(self) -> pl.DataFrame:
        """One row: estimated cycles, launches and record counts (repeat instances expanded)."""
        ex = self.schedule.expand()
        phases = ex["phases"].collect()
        counts = self.schedule.summary()
        busiest = (ex["commands"].group_by("phase", "instance", "tile").agg(pl.col("calls", "launches").sum())
                   .group_by("phase", "instance").agg(pl.col("calls", "launches").max())
                   .select(pl.col("calls", "launches").sum()).collect())
        chosen = self.layout.candidates.filter(pl.col("chosen")).row(0, named=True)
        return pl.DataFrame({
            "workload": [self.workload],
            "est_cycles": [int(phases["est_cycles"].sum())],
            "launches": [int(busiest["launches"].item() or 0)],
            "kernel_calls": [int(busiest["calls"].item() or 0)],
            "phases": [counts["phases"]],
            "commands": [counts["commands"]],
            "transfers": [counts["transfers"]],
            "objects": [counts["objects"]],
            "peak_sram_bytes": [int(chosen["peak_live_bytes"])],
            "tiles_used": [int(self.tiles.per_tile.height)],
            "row_block": [chosen["row_block"]],
            "row_shard": [chosen["row_shard"]],
            "inner_split": [chosen["inner_split"]],
            "weight_class": [chosen["weight_class"]],
            "fused_qkv": [chosen["fused_qkv"]],
        })


def resolve_graph(workload: str | Workload | Graph) -> Graph:
    if isinstance(workload, Graph):
        return workload
    if isinstance(workload, str | Workload):
        return build_graph(workload)
    msg = f"workload must be a preset name, a Workload or a Graph, got {type(workload).__name__}"
    raise ModelError(msg, field="workload", value=workload)


def compile(
    workload: str | Workload | Graph,
    target: Target | None = None,
    options: Options | Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> Compilation:
    """Compile a workload through every stage, verifying each; see :class:`Compilation`."""
    target = target or ipu21()
    opts = as_options(options)
    timings: dict[str, float] = {}
    notify = progress or (lambda *_: None)

    def step(name: str, fn, *args, **kwargs):
        notify(name, STAGES.index(name), len(STAGES))
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        timings[name] = time.perf_counter() - start
        return out

    graph = step("graph", resolve_graph, workload)
    layout = step("layout", search_layouts, graph, target, opts)

    def build_schedule() -> Schedule:
        s = schedule(layout.graph, layout.chosen, target, tiles=layout.tiles)
        verify_schedule(s)
        return s

    sched = step("schedule", build_schedule)
    tiles = step("tiles", lower_tiles, sched)
    notify("done", len(STAGES), len(STAGES))
    return Compilation(workload=graph.name, target=target, options=opts, graph=layout.graph, layout=layout,
                       schedule=sched, tiles=tiles, timings=timings)
