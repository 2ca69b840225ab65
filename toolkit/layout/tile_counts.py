"""Fewer compute tiles where the search's own model says they pay.

A small graph spread over every tile pays in exchange and sync what it saves
in compute: the small FP16 ViT of 4 tokens (ipu-stack docs/VIT_REPEAT_2026_09_10.md,
run on 64 tiles) is refined at 4.97 M cycles on 1,472 tiles and 1.25 M on 64.
:func:`search_tile_counts` runs the layout search on the workload's tiles and,
when its choice is spread-bound (its refined estimate more than
:data:`SPREAD_BOUND` times the screen's compute), again on half as many tiles,
halving while the refined estimate of the choice keeps falling (never below
:data:`MIN_TILES`, and never to a count no layout fits: that count is listed
with no estimate and ends the ladder). The best count's search is the result; every count tried is
a row of ``LayoutResult.tile_counts``. A count fixed by the ``tiles`` option or
by the workload's ``compute_tiles`` is searched alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import polars as pl

from toolkit.errors import InfeasibleError
from toolkit.graph import Graph
from toolkit.layout.search import TILE_COUNTS_SCHEMA, LayoutResult, search_layouts
from toolkit.options import Options
from toolkit.target import Target

#: a choice whose refined estimate exceeds its screened compute this many times is spread-bound: try fewer tiles
SPREAD_BOUND = 2.0
#: the fewest compute tiles the ladder tries
MIN_TILES = 16

Search = Callable[[Graph, Target, Options], LayoutResult]


def search_tile_counts(graph: Graph, target: Target, options: Options,
                       search: Search = search_layouts) -> LayoutResult:
    """The layout search over a halving ladder of compute-tile counts (module docstring)."""
    first = search(graph, target, options)
    tried = [(first.tiles, _choice(first), first)]
    fixed = options.tiles is not None or graph.params.get("compute_tiles") is not None
    if not fixed and _spread_bound(tried[0][1]):
        best = tried[0]
        tiles = first.tiles // 2
        while tiles >= MIN_TILES:
            try:
                result = search(graph, target, dataclasses.replace(options, tiles=tiles))
            except InfeasibleError:   # fewer tiles cannot hold it: the count before is the fewest that pays
                tried.append((tiles, {"sched_cycles": None, "est_cycles": None, "est_compute_cycles": None}, None))
                break
            row = (result.tiles, _choice(result), result)
            tried.append(row)
            if not _better(row[1], best[1]):
                break
            best = row
            tiles //= 2
    else:
        best = tried[0]
    counts = pl.DataFrame([{**c, "tiles": t, "chosen": t == best[0]} for t, c, _ in tried],
                          schema=TILE_COUNTS_SCHEMA, orient="row")
    return dataclasses.replace(best[2], tile_counts=counts)


def _choice(result: LayoutResult) -> dict:
    chosen = result.candidates.filter(pl.col("chosen"))
    if not chosen.height:
        return {"sched_cycles": None, "est_cycles": None, "est_compute_cycles": None}
    row = chosen.row(0, named=True)
    return {k: row.get(k) for k in ("sched_cycles", "est_cycles", "est_compute_cycles")}


def _spread_bound(c: dict) -> bool:
    return (c["sched_cycles"] is not None and c["est_compute_cycles"]
            and c["sched_cycles"] > SPREAD_BOUND * c["est_compute_cycles"])


def _better(a: dict, b: dict) -> bool:
    return a["sched_cycles"] is not None and (b["sched_cycles"] is None or a["sched_cycles"] < b["sched_cycles"])


__all__ = ["MIN_TILES", "SPREAD_BOUND", "search_tile_counts"]
