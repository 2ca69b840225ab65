from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from toolkit import artifacts_compare as ac
from toolkit.errors import OptionError
from toolkit.report import hardware_programs
from toolkit.tables import SUMMARY_RENAMED
from toolkit.viz import cases as vc

ROOT = Path(__file__).resolve().parents[1] / "artifacts" / "joint-placement"
NAMES = ["attention-b1", "attention-fused-b1", "mlp-b2-n3", "mlp-single-b1", "mlp-single-b4", "mlp-small-repeat"]


@pytest.fixture(scope="module")
def cases():
    return ac.load_cases(ROOT)


@pytest.fixture(autouse=True)
def _vega_lite_specs(vega_lite_specs):
    """Charts here are read as Vega-Lite specs (tests/conftest.py)."""


def test_compare_has_one_typed_row_per_case_with_the_manifests_numbers(cases):
    table = ac.compare_cases(cases)
    assert table.height == 6 and table["case"].to_list() == NAMES
    assert dict(table.schema) == ac.COMPARE_SCHEMA
    assert set(ac.COLUMNS) == set(table.columns)
    assert (table["provenance"] == "current").all()   # every committed case is this toolkit's
    hw = dict(hardware_programs().select("workload", "hardware_cycles").iter_rows())
    for row in table.iter_rows(named=True):
        m = json.loads((ROOT / row["case"] / "manifest.json").read_text())
        s = {SUMMARY_RENAMED.get(k, k): v for k, v in m["summary"].items()}   # committed under the old names
        assert row["workload"] == m["workload"] and row["source"] == m["source"] == "simulated"
        assert row["simulated_cycles"] == m["cropped_cycles"]
        assert row["simulated_us"] == pytest.approx(m["cropped_cycles"] / m["clock_hz"] * 1e6)
        assert row["max_abs_error"] == m["max_abs_error"]
        for col in ("lowered_cycles", "peak_sram_bytes", "lowered_launches", "exchange_steps", "tiles_used",
                    "lowered_exchange_cycles"):
            assert row[col] == s[col], (row["case"], col)
        assert row["hardware_cycles"] == hw.get(m["workload"])
        if row["hardware_cycles"] is not None:
            assert row["vs_hardware"] == pytest.approx(m["cropped_cycles"] / hw[m["workload"]])
        assert 0 < row["exchange_sent_bytes"] <= row["exchange_delivered_bytes"]
    assert table.filter(pl.col("case") == "mlp-small-repeat")["hardware_cycles"].item() is None


@pytest.mark.parametrize("placed", [True, False])
def test_a_case_written_under_the_old_summary_names_loads_under_today_s(tmp_path, placed):
    """A manifest whose summary says ``est_cycles`` (the lowered estimate, before the names said so) loads with
    ``lowered_cycles``; one that did not place has no placed peak (the old figure counted the objects that
    placed); two names for one figure are refused by name."""
    from toolkit.artifacts import load_case
    from toolkit.errors import FormatError
    case = tmp_path / "mlp-small-repeat"
    shutil.copytree(ROOT / "mlp-small-repeat", case)
    m = json.loads((case / "manifest.json").read_text())
    today = {SUMMARY_RENAMED.get(k, k): v for k, v in m["summary"].items()}
    old = {v: k for k, v in SUMMARY_RENAMED.items()}
    m["summary"] = {old.get(k, k): v for k, v in today.items() if k != "screen_peak_bytes"} | {"placed": placed}
    (case / "manifest.json").write_text(json.dumps(m))
    s = load_case(case).manifest["summary"]
    assert not set(SUMMARY_RENAMED) & set(s)
    assert all(s[new] == today[new] for new in SUMMARY_RENAMED.values())
    assert s["peak_sram_bytes"] == (today["peak_sram_bytes"] if placed else None)
    m["summary"]["lowered_cycles"] = 1
    (case / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(FormatError, match=r"manifest.json: holds both 'est_cycles' .* and 'lowered_cycles'"):
        load_case(case)


def test_exchange_bytes_expand_repeat_instances(cases):
    small = cases["mlp-small-repeat"]
    words = int(small.tables["exchange.summary"]["words"].sum())
    repeats = small.tables["schedule.repeats"].row(0, named=True)
    assert repeats["first_phase"] == 0 and repeats["instances"] == 3
    last = int(small.tables["exchange.summary"]["phase"].max())
    assert last <= repeats["last_phase"]   # every exchange phase lies in the repeated block
    row = ac.compare_cases({"mlp-small-repeat": small}).row(0, named=True)
    assert row["exchange_sent_bytes"] == 3 * words * small.manifest["target"]["word_bytes"]


def test_case_cycles_add_up_to_the_cropped_cycles(cases):
    cycles = ac.case_cycles(cases)
    assert dict(cycles.schema) == ac.CASE_CYCLES_SCHEMA
    assert cycles["case"].unique().sort().to_list() == NAMES
    assert set(cycles["category"]) <= set(ac.GROUPINGS["kind"])
    per_case = cycles.group_by("case").agg(pl.col("per_tile_cycles").sum(), pl.col("share").sum(),
                                           pl.col("cropped_cycles").first(), pl.col("cycles").min())
    for row in per_case.iter_rows(named=True):
        assert row["per_tile_cycles"] == pytest.approx(row["cropped_cycles"])
        assert row["share"] == pytest.approx(1.0)
        assert row["cycles"] >= 0
    manifests = {n: json.loads((ROOT / n / "manifest.json").read_text())["cropped_cycles"] for n in NAMES}
    assert dict(per_case.select("case", "cropped_cycles").iter_rows()) == manifests


def test_case_cycles_by_renderer_category(cases):
    one = ac.case_cycles({"mlp-small-repeat": cases["mlp-small-repeat"]}, by="category")
    assert set(one["category"]) <= set(ac.GROUPINGS["category"])
    assert {"compute", "sync"} <= set(one["category"])
    assert one["per_tile_cycles"].sum() == pytest.approx(one["cropped_cycles"][0])


def test_case_cycles_rejects_an_unknown_grouping(cases):
    with pytest.raises(OptionError, match="by='phase' is not a case_cycles grouping; use one of"):
        ac.case_cycles(cases, by="phase")


def test_check_cases_passes_the_committed_cases_and_says_so():
    checks = ac.check_cases(ROOT)
    assert dict(checks.schema) == ac.CHECK_SCHEMA
    assert checks["case"].to_list() == NAMES and checks["passed"].all()
    assert ac.verdict(checks).startswith("All 6 cases pass")
    # compiled by this toolkit: current, and the verdict says nothing of staleness; another toolkit's case would be
    assert not checks["stale"].any() and (checks["provenance"] == "current").all()
    assert "stale" not in ac.verdict(checks)
    legacy = ac.check_cases(ROOT.parent / "legacy-0.1.0")
    assert legacy["stale"].all() and "are stale, though" in ac.verdict(legacy) and "regenerate" in ac.verdict(legacy)


def test_check_cases_names_a_tampered_file(tmp_path):
    root = tmp_path / "exp"
    shutil.copytree(ROOT / "mlp-small-repeat", root / "mlp-small-repeat")
    log = root / "mlp-small-repeat" / "log.txt"
    log.write_text(log.read_text().replace("batch=1", "batch=4"))
    checks = ac.check_cases(root)
    row = checks.row(0, named=True)
    assert not row["passed"] and row["integrity_problems"] == 1 and row["consistency_problems"] == 1
    assert "log.txt" in row["problems"] and "log says batch=4" in row["problems"]
    text = ac.verdict(checks)
    assert text.startswith("1 of 1 cases fail (mlp-small-repeat)") and "Regenerate" in text


def test_describe_gives_every_column_a_meaning():
    d = ac.describe()
    assert d["column"].to_list() == list(ac.COMPARE_SCHEMA)
    assert d.filter(pl.col("column").str.ends_with("_bytes"))["unit"].unique().to_list() == ["bytes"]
    with pytest.raises(OptionError, match="no description for columns"):
        ac.describe(["nope"])


def test_no_cases_is_an_error(tmp_path):
    with pytest.raises(OptionError, match="no case"):
        ac.load_cases(tmp_path)


@pytest.mark.parametrize("value", list(vc.VALUES))
def test_case_cycles_chart_stacks_categories_with_fixed_colours(cases, value):
    spec = vc.case_cycles_chart(ac.case_cycles(cases), value=value).to_dict()
    assert spec["width"] == vc.WIDTH and spec["mark"]["type"] == "bar"
    scale = spec["encoding"]["color"]["scale"]
    assert scale["domain"] == ["compute", "exchange", "synchronization", "idle"]
    assert scale["range"] == ["#f28e2b", "#4e79a7", "#79706e", "#d7d7d7"]   # toolkit.viz.palette.FIXED
    assert spec["encoding"]["x"]["field"] == value and spec["encoding"]["y"]["sort"] == NAMES
    rows = spec["datasets"][spec["data"]["name"]]
    assert len(rows) == 24 and {r["case"] for r in rows} == set(NAMES)


def test_case_cycles_chart_rejects_an_unknown_value(cases):
    with pytest.raises(OptionError, match="value='cycles' is not a case_cycles column to draw"):
        vc.case_cycles_chart(ac.case_cycles(cases), value="cycles")


def test_cases_vs_hardware_draws_both_numbers(cases):
    spec = vc.cases_vs_hardware(ac.compare_cases(cases), width=500).to_dict()
    assert spec["width"] == 500
    rows = spec["datasets"][spec["data"]["name"]]
    assert len(rows) == 11   # six simulated, five with a hardware figure
    assert spec["encoding"]["color"]["scale"]["domain"] == ["simulated (this toolkit)",
                                                           "measured on hardware (C600)"]
    assert {r["case"] for r in rows if r["number"].startswith("measured")} == set(NAMES) - {"mlp-small-repeat"}
