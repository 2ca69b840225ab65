"""One table of the hardware's programs: every figure once, the experiment families a view of it.

``toolkit/data/hardware_programs.csv`` is the only table of measured whole
programs; ``toolkit.report.plan_experiments()`` (the plans benchmark's
families) is a view of it, so one measurement can never be described twice
(two encodings of the 175,140-cycle control once drifted apart: fc1's weights
gathered in one, resident in the other, 0.944 against 0.991 of hardware).
"""

from __future__ import annotations

import json
from importlib import resources

import polars as pl
import pytest

from toolkit.errors import OptionError
from toolkit.graph import PRESETS
from toolkit.report import EXPERIMENTS_SCHEMA, hardware_program, hardware_programs, plan_experiments


def test_there_is_one_table_of_measured_programs() -> None:
    data = resources.files("toolkit").joinpath("data")
    tables = sorted(p.name for p in data.iterdir() if p.name.endswith(".csv"))
    assert "plan_experiments.csv" not in tables and "hardware_programs.csv" in tables
    hw = hardware_programs()
    assert hw["workload"].is_unique().all()
    # one measurement, one row: no two rows describe the same graph and program
    keys = [json.dumps(hardware_program(r), sort_keys=True) + str(r["hardware_cycles"])
            for r in hw.iter_rows(named=True)]
    assert len(set(keys)) == len(keys)


def test_the_families_are_a_view_of_the_table() -> None:
    exp = plan_experiments()
    assert exp.schema == pl.Schema(EXPERIMENTS_SCHEMA)
    hw = hardware_programs()
    by_name = {r["workload"]: r for r in hw.iter_rows(named=True)}
    for r in exp.iter_rows(named=True):
        row = by_name[r["workload"]]
        assert (r["options"], r["hardware_cycles"], r["preset"]) == (row["options"], row["hardware_cycles"],
                                                                      row["preset"])
        assert r["family"] in row["families"].split(";")
    # every family has exactly one control, and it is expressible
    controls = exp.filter(pl.col("control")).group_by("family").agg(pl.len(), pl.col("expressible").all())
    assert set(controls["family"]) == set(exp["family"])
    assert controls["len"].to_list() == [1] * controls.height and controls["expressible"].all()
    # the shared control is one row in three families
    control = exp.filter(pl.col("workload") == "siglip-mlp-benchmark/control")
    assert set(control["family"]) == {"result-grid", "staging", "mapping"} and control["control"].all()
    assert {"fp8-products", "fp8-products-27", "memory-class", "attention-products", "orientation"} <= set(
        exp["family"])


def test_a_family_is_selected_by_name_or_refused() -> None:
    assert set(plan_experiments("staging")["family"]) == {"staging"}
    with pytest.raises(OptionError, match=r"unknown experiment family 'stagin'.*known: .*staging"):
        plan_experiments("stagin")


def test_the_seed_figures_name_their_own_preset_with_no_options() -> None:
    hw = hardware_programs()
    for name in ("mlp-single-b1", "mlp-single-b4", "mlp-b2-n3", "attention-b1", "attention-fused-b1"):
        row = hw.filter(pl.col("workload") == name).row(0, named=True)
        preset, _, options = hardware_program(row)
        assert preset == name and options == {}
        assert PRESETS[name].weight_dtype == "f8_143" and not PRESETS[name].biases


def test_a_rows_ipu_stack_lines_say_the_program_its_options_say() -> None:
    """Where the table gives a program as ipu-stack's lines too, they are the lines our options write for it
    (the program the lines build is the options' program; the bridge benchmark, bench_lines, simulates both)."""
    from toolkit.layout.ipu_stack import member_labels, member_lines
    rows = hardware_programs().filter(pl.col("lines") != "")
    assert rows.height >= 14
    for r in rows.iter_rows(named=True):
        preset, overrides, options = hardware_program(r)
        lines = r["lines"].split(";")
        written, _ = member_lines(preset, options, batch=overrides["batch"])
        assert written == [line.replace(":batch-1:", ":streamed:") for line in lines], r["workload"]
        labels = member_labels(preset, lines, options, batch=overrides["batch"])   # and back: the same lines
        assert member_lines(preset, {**options, "plans": labels}, batch=overrides["batch"])[0] == written
