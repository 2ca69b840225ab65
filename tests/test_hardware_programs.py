"""One hardware measurement, one program: the plan experiments and the hardware figures agree.

``toolkit/data/plan_experiments.csv`` (the plans benchmark's families) and
``toolkit/data/hardware_programs.csv`` (the fidelity benchmark's figures) name
many of the same measurements. Where both give one measurement (same preset,
batch and hardware cycles), they must compile the same program: the same plan
labels and the same simulated cycles. Two encodings of one measurement drifted
apart once (fc1's gathered weights in one, resident in the other: 172,889
against 165,397 cycles for the same 175,140 on hardware).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import toolkit
from toolkit.graph import get_workload
from toolkit.profile import crop
from toolkit.report import hardware_program, hardware_programs

EXPERIMENTS = Path(toolkit.__file__).parent / "data" / "plan_experiments.csv"


def _pairs() -> list[tuple[str, dict, dict]]:
    exp = pl.read_csv(EXPERIMENTS, schema_overrides={"control": pl.Utf8, "note": pl.Utf8})
    hw = hardware_programs().filter(pl.col("expressible"))
    out = []
    for r in exp.iter_rows(named=True):
        same = hw.filter((pl.col("preset") == r["workload"]) & (pl.col("batch") == r["batch"])
                         & (pl.col("hardware_cycles") == r["hardware_cycles"]))
        out += [(f"{r['family']}/{r['member']} = {h['workload']}", r, h) for h in same.iter_rows(named=True)]
    return out


PAIRS = _pairs()


def test_the_shared_measurements_are_found() -> None:
    assert len(PAIRS) >= 25   # every MLP and attention experiment names a figure of the fidelity table


@pytest.mark.slow
@pytest.mark.parametrize(("row", "figure"), [(r, h) for _, r, h in PAIRS], ids=[name for name, _, _ in PAIRS])
def test_a_measurement_compiles_to_one_program_wherever_it_is_named(row: dict, figure: dict) -> None:
    programs = []
    for preset, overrides, options in ((row["workload"], {"batch": row["batch"]}, json.loads(row["options_json"])),
                                       hardware_program(figure)):
        c = toolkit.compile(get_workload(preset, **overrides), options=options)
        programs.append((c.summary()["plans"].item(), int(crop(c.profile).cropped_cycles)))
    assert programs[0] == programs[1]
