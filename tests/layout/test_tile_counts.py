"""Fewer compute tiles where the search's own model says they pay (toolkit.layout.tile_counts)."""

from __future__ import annotations

import dataclasses

import polars as pl
import pytest

import toolkit
from toolkit.layout.search import TILE_COUNTS_SCHEMA
from toolkit.layout.tile_counts import MIN_TILES, SPREAD_BOUND, search_tile_counts


@dataclasses.dataclass(frozen=True)
class _Result:   # what search_tile_counts reads of a LayoutResult
    tiles: int
    candidates: pl.DataFrame
    tile_counts: pl.DataFrame = None


def _search(refined: dict[int, int], compute: int = 1_000):
    """A stand-in search: the chosen candidate's refined estimate at each tile count; records the counts asked."""
    asked = []

    def search(graph, target, options):
        t = options.tiles or graph.params.get("compute_tiles") or 1472
        asked.append(t)
        cand = pl.DataFrame({"chosen": [True], "sched_cycles": [refined[t]], "est_cycles": [refined[t]],
                             "est_compute_cycles": [compute]})
        return _Result(tiles=t, candidates=cand)
    return search, asked


GRAPH = toolkit.build_graph("siglip-mlp-benchmark")


def test_a_spread_bound_choice_halves_the_tiles_while_the_refined_estimate_falls() -> None:
    search, asked = _search({1472: 9_000, 736: 6_000, 368: 4_000, 184: 3_000, 92: 3_500})
    r = search_tile_counts(GRAPH, toolkit.ipu21(), toolkit.Options(), search=search)
    assert asked == [1472, 736, 368, 184, 92]   # stops at the first count that does not pay
    assert r.tiles == 184
    assert r.tile_counts.schema == pl.Schema(TILE_COUNTS_SCHEMA)
    assert r.tile_counts["tiles"].to_list() == asked
    assert r.tile_counts.filter(pl.col("chosen"))["tiles"].to_list() == [184]


def test_a_compute_bound_choice_or_a_fixed_count_is_searched_once() -> None:
    bound = int(SPREAD_BOUND * 1_000)
    search, asked = _search({1472: bound})   # exactly at the bound: not spread-bound
    assert search_tile_counts(GRAPH, toolkit.ipu21(), toolkit.Options(), search=search).tiles == 1472
    assert asked == [1472]
    search, asked = _search({368: 50_000})
    r = search_tile_counts(GRAPH, toolkit.ipu21(), toolkit.Options(tiles=368), search=search)
    assert asked == [368] and r.tile_counts["chosen"].to_list() == [True]
    small = toolkit.build_graph("mlp-small-repeat")   # its workload fixes 64 compute tiles
    search, asked = _search({64: 50_000})
    search_tile_counts(small, toolkit.ipu21(), toolkit.Options(), search=search)
    assert asked == [64]


def test_a_count_no_layout_fits_ends_the_ladder_without_an_estimate() -> None:
    """Fewer tiles may not hold the weights (the 27-layer ViT on 736 tiles): the ladder stops at the count before."""
    search, asked = _search({1472: 9_000, 736: 6_000})

    def failing(graph, target, options):
        if (options.tiles or 1472) < 736:
            raise toolkit.InfeasibleError("no layout candidate fits", field="tiles", value=options.tiles)
        return search(graph, target, options)
    r = search_tile_counts(GRAPH, toolkit.ipu21(), toolkit.Options(), search=failing)
    assert r.tiles == 736 and asked == [1472, 736]
    assert r.tile_counts["tiles"].to_list() == [1472, 736, 368]
    assert r.tile_counts["sched_cycles"].to_list() == [9_000, 6_000, None]


def test_the_ladder_stops_at_the_fewest_tiles() -> None:
    search, asked = _search({t: 10 * t + 5_000 for t in (1472, 736, 368, 184, 92, 46, 23)})
    search_tile_counts(GRAPH, toolkit.ipu21(), toolkit.Options(), search=search)
    assert min(asked) >= MIN_TILES and asked[-1] == 23


@pytest.mark.slow
def test_the_small_vit_runs_on_fewer_tiles_where_the_model_says_it_pays() -> None:
    """ipu-stack's small FP16 ViT (4 tokens, width 144, 27 layers): spread over 1,472 tiles the search's own
    refined estimate is about 5 M cycles, on 64 about 1.25 M; the search now finds the smaller count itself."""
    w = toolkit.graph.get_workload("siglip-vit", fused_qkv=True, search_qkv=False, width=144, hidden=288, heads=2,
                                   head_dim=72, image=28, patch=14, tokens=4, weight_dtype="f16")
    c = toolkit.compile(w, options={"simulate": False})
    counts = c.layout.tile_counts
    assert counts["tiles"][0] == 1472 and c.layout.tiles < 1472
    best = counts.filter(pl.col("chosen")).row(0, named=True)
    assert best["sched_cycles"] < 0.5 * counts["sched_cycles"][0]
    assert c.summary()["tiles_used"].item() <= c.layout.tiles
