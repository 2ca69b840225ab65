"""A line builds what ipu-stack builds from it: the MLP alternatives' control pasted as ipu-stack prints it is our
own syntax's program for it (fc1's weights stored once and gathered, the K x 1 result grids), and a member's
options turn into its lines and back."""

from __future__ import annotations

import pytest

import toolkit
from toolkit.graph import get_workload
from toolkit.layout.constraints import constraint_plan, read_constraint, stored_weights
from toolkit.layout.gemm import parse_plan
from toolkit.layout.ipu_stack import member_labels, member_lines
from toolkit.profile import crop

#: ipu-stack scripts/mlp-layout-alternatives.py's control, as it prints it (docs/MLP_LAYOUT_ALTERNATIVES.md)
CONTROL_LINES = ["0:4x92x4:4x1:48:interleaved:normal:complete:direct",
                 "2:4x24x15:15x1:48:standard:normal:complete:direct"]
CONTROL = {"weight_dtype": "f16", "plans": {"fc1": "4x92x4/16x92 gathered", "fc2": "4x24x15/60x24 standard"}}


def test_the_control_lines_read_as_the_control_plans() -> None:
    up, down = (read_constraint(line) for line in CONTROL_LINES)
    fc1, fc2 = constraint_plan(up, 729, 4304), constraint_plan(down, 729, 1152)
    assert (fc1.weights, fc2.weights) == ("gathered", "resident")
    assert fc1.result_split(46, 182) == parse_plan(CONTROL["plans"]["fc1"]).result_split(46, 182) == (4, 1)
    assert fc2.result_split(48, 182) == parse_plan(CONTROL["plans"]["fc2"]).result_split(48, 182) == (15, 1)


@pytest.mark.parametrize(("memory", "orientation", "m", "store"), [
    ("interleaved", "normal", 4, "gathered"), ("standard", "normal", 4, "resident"),
    ("interleaved", "swapped", 10, "resident"), ("interleaved", "normal", 1, "resident")])
def test_the_store_follows_the_line_not_the_op(memory, orientation, m, store) -> None:
    assert stored_weights(memory, orientation, m) == store


def test_a_member_turns_into_its_lines_and_back() -> None:
    lines, lost = member_lines("siglip-mlp-benchmark", CONTROL, batch=1)
    assert (lines, lost) == (CONTROL_LINES, [])
    labels = member_labels("siglip-mlp-benchmark", lines, CONTROL, batch=1)
    assert labels == {"mlp.fc1": "4x92x4 gathered interleaved", "mlp.fc2": "4x24x15 standard"}
    assert member_lines("siglip-mlp-benchmark", {**CONTROL, "plans": labels}, batch=1)[0] == CONTROL_LINES
    staged = {**CONTROL, "plans": {"fc1": "4x92x4/8x184 gathered", "fc2": "4x24x15/20x72 standard batched7"}}
    assert member_lines("siglip-mlp-benchmark", staged, batch=1)[0] == [
        "0:4x92x4:2x2:48:interleaved:normal:complete:direct", "2:4x24x15:5x3:48:standard:normal:batch-7:direct"]
    # a store ipu-stack would not build from the line is said, not silently dropped
    resident = {**CONTROL, "plans": {"fc1": "4x92x4/16x92", "fc2": "4x24x15/60x24 standard"}}
    assert any("weights=resident" in w for w in member_lines("siglip-mlp-benchmark", resident, batch=1)[1])


@pytest.mark.slow
def test_the_control_pasted_as_lines_is_our_syntax_program() -> None:
    """Within 2 % (docs/MLP_LAYOUT_ALTERNATIVES.md's control, 175,140 cycles on the hardware)."""
    def cycles(options):
        return int(crop(toolkit.compile(get_workload("siglip-mlp-benchmark", batch=1), options=options).profile)
                   .cropped_cycles)
    ours, pasted = cycles(CONTROL), cycles({**CONTROL, "plans": CONTROL_LINES})
    assert abs(pasted / ours - 1) <= 0.02, (pasted, ours)
    assert 0.95 <= pasted / 175_140 <= 1.05
