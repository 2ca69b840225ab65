"""Every headline number says what it is, where it comes from and how far it is from hardware."""

from __future__ import annotations

import polars as pl
import pytest

import toolkit
from toolkit.report import KINDS, NUMBERS_SCHEMA, hardware_figure, hardware_programs


def test_the_hardware_table_is_the_seeds_and_has_its_sources() -> None:
    hw = hardware_programs()
    assert {"mlp-single-b1", "attention-b1", "siglip-so400m"} <= set(hw["workload"])
    assert hw["hardware_cycles"].min() > 0 and hw["source"].null_count() == 0
    assert hw.filter(pl.col("workload") == "mlp-single-b1")["hardware_cycles"].item() == 128_202


def test_numbers_label_every_figure_and_compare_cycles_with_hardware() -> None:
    c = toolkit.compile("mlp-single-b1")
    n = c.numbers()
    assert dict(n.schema) == NUMBERS_SCHEMA and set(n["kind"]) <= set(KINDS)
    cycles = {r["kind"]: r for r in n.filter(pl.col("quantity") == "cycles").iter_rows(named=True)}
    assert set(cycles) == {"screen estimate", "refined estimate", "lowered estimate", "simulated",
                           "measured on hardware"}
    assert cycles["lowered estimate"]["value"] == c.lowered_cycles()
    assert cycles["simulated"]["value"] == toolkit.profile.crop(c.profile).cropped_cycles
    hw = cycles["measured on hardware"]
    assert hw["value"] == 128_202 and hw["vs_hardware"] is None and "real compiler" in hw["source"]
    assert cycles["simulated"]["vs_hardware"] == pytest.approx(cycles["simulated"]["value"] / 128_202)
    assert n["source"].null_count() == 0 and n["unit"].null_count() == 0
    peaks = n.filter(pl.col("quantity") == "peak SRAM per tile")
    assert set(peaks["kind"]) == {"screen estimate", "placed"} and set(peaks["unit"]) == {"bytes"}


def test_no_hardware_comparison_where_the_options_change_the_graph() -> None:
    assert hardware_figure("mlp-single-b1") is not None
    assert hardware_figure("mlp-single-b1", toolkit.Options(weight_dtype="f16")) is None
    assert hardware_figure("mlp-small-repeat") is None
    c = toolkit.compile("mlp-small-repeat", options={"simulate": False})
    n = c.numbers()
    assert "measured on hardware" not in set(n["kind"]) and "simulated" not in set(n["kind"])
    assert n["vs_hardware"].null_count() == n.height


def test_programs_compare_by_op_and_kind_and_add_up() -> None:
    from toolkit.report import compare_peaks, compare_programs, op_cycles
    a = toolkit.compile("mlp-small-repeat", options={"simulate": False})
    b = toolkit.compile("mlp-small-repeat", options={"row_block": 36, "simulate": False})
    assert op_cycles(a)["cycles"].sum() == a.lowered_cycles()            # repeat instances multiplied in
    t = compare_programs({"a": a, "b": b})
    assert t.columns[:4] == ["op", "kind", "a_cycles", "a_bytes"] and "b_delta_cycles" in t.columns
    assert t["b_cycles"].sum() == b.lowered_cycles()
    assert (t["b_delta_cycles"] == t["b_cycles"] - t["a_cycles"]).all()
    assert t.filter(pl.col("kind") == "exchange")["a_bytes"].sum() == \
        a.schedule.transfers["size_bytes"].sum() * 3                 # three instances of the repeated block
    peaks = compare_peaks([a, b])
    assert peaks.height == a.placement.occupancy["tile"].n_unique() and "c1_delta_bytes" in peaks.columns
    with pytest.raises(toolkit.OptionError, match="at least two compilations"):
        compare_programs([a])


def test_no_hardware_comparison_where_the_graph_switches_change_the_graph() -> None:
    same = toolkit.build_graph("mlp-single-b1").params
    assert hardware_figure("mlp-single-b1", None, same)["hardware_cycles"] == 128_202
    for changed in ({"layernorm": True}, {"batch": 2}, {"biases": True}):
        assert hardware_figure("mlp-single-b1", None, toolkit.build_graph("mlp-single-b1", **changed).params) is None


def test_every_hardware_figure_names_a_graph_and_says_what_is_missing() -> None:
    from toolkit.report import hardware_program
    hw = hardware_programs()
    assert hw["workload"].n_unique() == hw.height and hw["expressible"].any() and (~hw["expressible"]).any()
    missing = hw.filter(~pl.col("expressible"))["missing"]   # the global transposes: which one ran is unknown
    assert missing.str.starts_with("which of the eight global transposes").sum() == 2
    assert hw.filter(pl.col("workload").str.contains("fp8-qk|fp8-pv"))["expressible"].all()
    for row in hw.filter(pl.col("preset").is_in(list(toolkit.graph.PRESETS))).iter_rows(named=True):
        name, overrides, options = hardware_program(row)
        toolkit.build_graph(name, **overrides)   # every graph builds
        toolkit.Options(**{k: v for k, v in options.items() if k != "plans"}, plans=options.get("plans", {}))
    hist = hw.filter(pl.col("workload") == "siglip-mlp-benchmark/control").row(0, named=True)
    assert hardware_program(hist) == ("siglip-mlp-benchmark", {"batch": 1, "blocks": 1}, {
        "weight_dtype": "f16", "plans": {"fc1": "4x92x4/16x92 gathered", "fc2": "4x24x15/60x24 standard"}})


def test_a_benchmark_program_finds_its_own_hardware_figure() -> None:
    """A compile of the hardware's program (its graph and pinned plans) is compared with that program's figure."""
    params = toolkit.build_graph("siglip-mlp-benchmark").params
    plans = {"fc1": "4x92x4/16x92 gathered", "fc2": "4x24x15/60x24 standard"}   # fc1's weights moved
    fig = hardware_figure("siglip-mlp-benchmark", toolkit.Options(weight_dtype="f16", plans=plans), params)
    assert fig is not None and fig["workload"] == "siglip-mlp-benchmark/control" and fig["hardware_cycles"] == 175_140
    resident = {**plans, "fc1": "4x92x4/16x92"}   # another program: no figure of its own
    assert hardware_figure("siglip-mlp-benchmark", toolkit.Options(weight_dtype="f16", plans=resident), params) is None
    other = {"fc1": "4x92x4/16x92 gathered", "fc2": "4x24x15/20x72 standard"}
    assert hardware_figure("siglip-mlp-benchmark", toolkit.Options(plans=other), params)["hardware_cycles"] == 173_442
    assert hardware_figure("siglip-mlp-benchmark", toolkit.Options(plans={"fc1": "2x2x2"}), params) is None
    b4 = toolkit.build_graph("siglip-mlp-benchmark", batch=4, weight_dtype="f8_143").params
    assert hardware_figure("siglip-mlp-benchmark", toolkit.Options(weight_dtype="f8_143"), b4)["workload"] == \
        "mlp-single-b4"
