"""toolkit.evidence: the plan kinds of a layout, the measured programs behind them and the band they give, the same
in numbers(), layout.candidates, the compile CLI's output and the layout explorer's table."""

from __future__ import annotations

import polars as pl
import pytest

import toolkit
from toolkit.evidence import EXTRAPOLATION, band, compilation_kinds, evidence, evidence_table, plan_kinds
from toolkit.graph import build_graph, get_workload
from toolkit.layout.gemm import parse_plan
from toolkit.layout.plans import LayoutParams

CONTROL = "siglip-mlp-benchmark/control"
CONTROL_OPTIONS = {"plans": {"fc1": "4x92x4/16x92 gathered", "fc2": "4x24x15/60x24 standard"},
                   "weight_dtype": "f16"}
CONTROL_KINDS = ["linear normal rows f16 interleaved complete gathered",
                 "linear normal rows f16 standard complete resident"]
UNMEASURED = "linear swapped 2d f8 standard batched gathered"


def test_plan_kinds_of_the_pinned_control_plans() -> None:
    g = build_graph(get_workload("siglip-mlp-benchmark"), weight_dtype="f16")
    params = LayoutParams(plans=(("mlp.fc1", parse_plan("4x92x4/16x92 gathered")),
                                 ("mlp.fc2", parse_plan("4x24x15/60x24 standard"))))
    k = plan_kinds(g, params)
    assert k["op"].to_list() == ["mlp.fc1", "mlp.fc2"] and k["kind"].to_list() == CONTROL_KINDS
    staged = LayoutParams(plans=(("mlp.fc1", parse_plan("4x92x4/8x184 gathered streamed")),
                                 ("mlp.fc2", parse_plan("4x24x15 batched4"))))
    assert plan_kinds(g, staged)["kind"].to_list() == ["linear normal 2d f16 interleaved streamed gathered",
                                                      "linear normal columns f16 interleaved batched resident"]


def test_the_committed_table_stands_behind_the_measured_control() -> None:
    t = evidence_table()
    assert t.height and set(CONTROL_KINDS) <= set(t["kind"])
    ev = evidence(CONTROL_KINDS)
    assert not ev["evidence"].startswith(EXTRAPOLATION) and ev["evidence_programs"] >= 1
    residuals = t.filter(pl.col("workload") == CONTROL)["residual"].unique()
    assert residuals.len() == 1 and ev["band_low"] <= residuals[0] <= ev["band_high"]
    held = evidence(CONTROL_KINDS, calibrated=True)
    assert held["evidence_programs"] == ev["evidence_programs"] and held["band_low"] < held["band_high"]


def test_a_plan_kind_no_program_measured_is_an_extrapolation_with_a_wider_band() -> None:
    ev = evidence([*CONTROL_KINDS, UNMEASURED])
    assert ev["evidence"].startswith(EXTRAPOLATION) and UNMEASURED in ev["evidence"]
    assert ev["evidence_programs"] == 0
    measured = evidence(CONTROL_KINDS)
    assert ev["band_high"] - ev["band_low"] > measured["band_high"] - measured["band_low"]


def test_the_band_widens_when_few_programs() -> None:
    lo3, hi3 = band([0.0, 0.01, 0.02])
    lo9, hi9 = band([0.0, 0.01, 0.02] * 3)
    assert hi3 - lo3 > hi9 - lo9 > 0.04
    table = pl.DataFrame({"workload": ["a", "b"], "kind": ["k", "k"], "residual": [0.01, 0.4], "pinned": [True, False],
                          "held_out_residual": [0.02, 0.4]})
    ev = evidence(["k"], table=table)   # a searched program's row never stands behind a kind
    assert ev["evidence_programs"] == 1 and ev["band_low"] < 0.01 < ev["band_high"] < 0.1


@pytest.fixture(scope="module")
def control() -> toolkit.Compilation:
    return toolkit.compile(get_workload("siglip-mlp-benchmark"), options=CONTROL_OPTIONS)


def test_numbers_candidates_cli_and_explorer_agree_on_evidence(control) -> None:
    from toolkit.cli.compile import _footnotes, band_line
    from toolkit.widgets.layout import TABLE_COLUMNS, band_note, compared_row
    c = control
    assert compilation_kinds(c)["kind"].to_list() == CONTROL_KINDS
    want = evidence(CONTROL_KINDS)
    n = c.numbers()
    row = n.filter(pl.col("evidence").is_not_null())
    assert row.height == 1 and row["kind"].item() == "simulated" and row["quantity"].item() == "cycles"
    got = row.select("evidence", "band_low", "band_high").row(0, named=True)
    assert got == {k: want[k] for k in got}
    chosen = c.layout.candidates.filter(pl.col("chosen")).row(0, named=True)
    assert {k: chosen[k] for k in got} == got and chosen["evidence_programs"] == want["evidence_programs"]
    printed = " ".join(_footnotes(n, c.workload))
    line = band_line(row.row(0, named=True))
    assert f"{100 * got['band_low']:+.1f}% .. {100 * got['band_high']:+.1f}%" in line
    assert " ".join(line.split()) in " ".join(printed.split())   # the footnote, wrapped to the terminal
    explorer = compared_row(c).row(0, named=True)
    assert {k: explorer[k] for k in got} == got and {"band_low", "band_high", "evidence"} <= set(TABLE_COLUMNS)
    assert f"{100 * got['band_low']:+.1f}%" in band_note(explorer)


def test_a_search_chosen_unmeasured_plan_is_labelled_extrapolation_everywhere() -> None:
    c = toolkit.compile("mlp-small-repeat")
    kinds = compilation_kinds(c)["kind"].to_list()
    measured = set(evidence_table()["kind"])
    ev = c.numbers().filter(pl.col("evidence").is_not_null()).row(0, named=True)
    if set(kinds) <= measured:
        pytest.skip(f"every plan kind of mlp-small-repeat's chosen layout is measured: {kinds}")
    assert ev["evidence"].startswith(EXTRAPOLATION)
    assert c.layout.candidates.filter(pl.col("chosen"))["evidence"].item() == ev["evidence"]
    from toolkit.widgets.layout import band_note, compared_row
    assert "extrapolation" in band_note(compared_row(c).row(0, named=True))
