from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.errors import OptionError
from toolkit.layout import CANDIDATES_SCHEMA
from toolkit.viz.layout import pareto, tradeoff


def candidates() -> pl.DataFrame:
    """Six hand-made candidates over two row blocks; #5 was rejected before costing."""
    n = 6
    cols = {
        "candidate_id": list(range(n)), "row_block": [18, 18, 18, 36, 36, 36], "row_shard": [8, 4, 2, 4, 2, 1],
        "panel_groups": [None] * n, "inner_split": [1, 1, 2, 1, 2, 1], "inner_block": [None] * n,
        "weight_class": ["interleaved"] * n, "fused_qkv": [False] * n, "tiles_used": [64] * n,
        "est_compute_cycles": [1] * n, "est_exchange_cycles": [1] * n, "est_sync_cycles": [1] * n,
        "est_cycles": [100, 150, 300, 120, 90, None], "launches": [10] * n,
        "peak_live_bytes": [500, 400, 300, 350, 900, 10_000_000], "peak_interleaved_bytes": [0] * n,
        "weight_bytes": [0] * n, "support_bytes": [0] * n,
        "feasible": [True, True, True, True, False, False], "reject_reason": [None, None, None, None, "x", "y"],
        "beam": [False] * n, "sched_cycles": [None] * n,
        "chosen": [True, False, False, False, False, False], "pareto": [True, False, True, True, False, False],
    }
    return pl.DataFrame(cols).select(
        pl.col(k).cast(t) if k in cols else pl.lit(None, dtype=t).alias(k) for k, t in CANDIDATES_SCHEMA.items())


def layer_data(spec: dict, i: int) -> list[dict]:
    return spec["datasets"][spec["layer"][i]["data"]["name"]]


def test_pareto_draws_estimated_candidates_front_and_chosen():
    spec = pareto(candidates()).to_dict()
    points = layer_data(spec, 0)
    assert sorted(p["candidate_id"] for p in points) == [0, 1, 2, 3, 4]
    status = {p["candidate_id"]: p["status"] for p in points}
    assert status == {0: "chosen", 1: "feasible", 2: "pareto", 3: "pareto", 4: "rejected"}
    assert [p["candidate_id"] for p in layer_data(spec, 1)] == [0, 3, 2]   # front sorted by cycles
    assert [p["candidate_id"] for p in layer_data(spec, 2)] == [0]         # the ring
    assert spec["title"][0] == "6 candidates, 4 feasible, 3 on the Pareto front; 1 rejected before costing"
    assert "chosen: row_block=18 row_shard=8 inner_split=1" in spec["title"][1]


def test_pareto_row_block_fades_other_blocks():
    spec = pareto(candidates(), row_block=36).to_dict()
    focus = {p["candidate_id"]: p["focus"] for p in layer_data(spec, 0)}
    assert focus == {0: False, 1: False, 2: False, 3: True, 4: True}
    assert spec["title"][-1] == "showing row_block=36"
    assert spec["layer"][0]["encoding"]["opacity"]["condition"]["test"] == "datum.focus"


def test_pareto_colours_by_a_parameter():
    spec = pareto(candidates(), color="inner_split").to_dict()
    assert spec["layer"][0]["encoding"]["color"]["field"] == "inner_split"


def test_tradeoff_keeps_the_fastest_feasible_per_value():
    spec = tradeoff(candidates(), x="row_block").to_dict()
    rows = spec["datasets"][spec["hconcat"][0]["data"]["name"]]
    best = {r["row_block"]: (r["best_cycles"], r["fastest_peak_bytes"], r["smallest_peak_bytes"], r["chosen"])
            for r in rows}
    assert best == {18: (100, 500, 300, True), 36: (120, 350, 350, False)}
    assert spec["title"] == "4 feasible of 6 candidates; chosen row_block = 18"   # one line: a string


@pytest.mark.parametrize(("call", "match"), [
    (lambda c: pareto(c, color="tiles"), r"color='tiles' is not a layout parameter column"),
    (lambda c: tradeoff(c, x="est_cycles"), r"x='est_cycles' is not a layout parameter column"),
    (lambda c: pareto(c.drop("pareto")), r"candidates lacks columns \['pareto'\]"),
    (lambda c: pareto(c.to_pandas()), r"candidates must be a polars DataFrame"),
    (lambda c: pareto(c, max_rows=3), r"pareto draws one point per estimated candidate: 5 rows > max_rows=3"),
    (lambda c: tradeoff(c, max_rows=1), r"tradeoff draws two rows per row_block value: 4 rows > max_rows=1"),
])
def test_bad_input_is_named(call, match):
    with pytest.raises(OptionError, match=match):
        call(candidates())


def test_real_candidates_render(small):
    cand = small.layout.candidates
    spec = pareto(cand, row_block=small.layout.chosen.row_block).to_dict()
    assert len(layer_data(spec, 2)) == 1
    rows = tradeoff(cand).to_dict()
    assert rows["title"].endswith(f"chosen row_block = {small.layout.chosen.row_block}")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([8, 16, 18, 36]), st.integers(1, 10**6), st.integers(1, 10**6),
                          st.booleans()), min_size=1, max_size=30))
def test_tradeoff_is_the_per_value_minimum(rows):
    base = candidates().head(1)
    cand = pl.concat([base.with_columns(pl.lit(i, dtype=pl.Int32).alias("candidate_id"),
                                        pl.lit(rb).alias("row_block"), pl.lit(cyc).alias("est_cycles"),
                                        pl.lit(mem).alias("peak_live_bytes"), pl.lit(ok).alias("feasible"),
                                        pl.lit(i == 0).alias("chosen"))
                      for i, (rb, cyc, mem, ok) in enumerate(rows)])
    best = tradeoff(cand).hconcat[0].data          # the reduced frame the chart embeds (no spec validation)
    got = dict(best.select("row_block", "best_cycles").iter_rows())
    want = cand.filter("feasible").group_by("row_block").agg(pl.col("est_cycles").min())
    assert got == dict(want.iter_rows())
    assert best.filter("chosen")["row_block"].to_list() == ([rows[0][0]] if rows[0][0] in got else [])
