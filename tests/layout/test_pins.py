"""Plan pins resolve to a clear set of ops, or are refused by name (issues 38 and 40 items 4 and 11).

``pin_plans`` is what the search starts from (no candidate is screened), so most cases here are cheap; two
run the search on a small graph.
"""

from __future__ import annotations

import pytest

from toolkit.errors import InfeasibleError, OptionError
from toolkit.graph import Workload, build_graph
from toolkit.layout import search_layouts
from toolkit.layout.pins import pin_plans
from toolkit.options import as_options
from toolkit.target import ipu21

SMALL_ENCODER = Workload(name="encoder", kind="encoder", tokens=129, width=128, hidden=256, heads=2,
                         compute_tiles=64)
LINE = "0:4x92x4:4x1:48:interleaved:normal:complete:direct"   # op 0 of the MLP: mlp.fc1


def _pins(workload, plans, **options):
    graph = build_graph(workload) if isinstance(workload, str | Workload) else workload
    return pin_plans(graph, ipu21(), as_options({"plans": plans, **options}))


@pytest.mark.parametrize(("plans", "first", "second"), [
    (["fc1=4x92x4", "fc1=4x92x2"], "fc1=4x92x2", "fc1=4x92x4"),
    ({"fc1": "4x92x4", "mlp.fc1": "4x92x2"}, "fc1=4x92x4", "mlp.fc1=4x92x2"),
    ([LINE, "fc1=4x92x4"], LINE, "fc1=4x92x4"),
])
def test_an_op_pinned_twice_is_refused_naming_both_entries(plans, first, second) -> None:
    with pytest.raises(OptionError, match=rf"op 'mlp.fc1' pinned twice: '{first}' and '{second}'; keep one") as e:
        _pins("siglip-mlp-benchmark", plans)
    assert e.value.op == "mlp.fc1" and e.value.field == "plans"


def test_a_short_name_over_ops_of_different_shapes_is_refused_with_the_full_names() -> None:
    """siglip-vit's ``fc1`` is the encoder's (729 rows) and the MAP head's (one row per image)."""
    with pytest.raises(OptionError, match=r"plans key 'fc1' matches ops of different shapes: 'mlp.fc1' \(729 x "
                                          r"4304, inner 1152\), 'map.mlp.fc1' \(1 x 4304, inner 1152\); .* pin each "
                                          r"by its full name \('mlp.fc1=4x92x4', 'map.mlp.fc1=4x92x4'") as err:
        _pins("siglip-vit", {"fc1": "4x92x4"})
    assert err.value.field == "plans.fc1"


def test_the_pins_frame_says_which_ops_a_name_matched() -> None:
    _, graphs, pins, frame = _pins("siglip-vit", {"mlp.fc1": "4x92x4", "k": "4x24x4"})
    assert list(graphs) == [False]   # 'k' is an op of the separate-QKV form only
    assert sorted(frame.select("entry", "op").rows()) == [
        ("k=4x24x4", "attn.k"), ("k=4x24x4", "map.attn.k"), ("mlp.fc1=4x92x4", "mlp.fc1")]
    assert [name for name, _ in pins[False]] == ["attn.k", "map.attn.k", "mlp.fc1"]


def test_a_pin_that_matches_no_op_lists_the_plannable_ops() -> None:
    with pytest.raises(OptionError, match=r"plans names op 'fc3' \(entry 'fc3=4x92x4'\), which no op .* \(did you "
                                          r"mean 'fc2' or 'fc1'\?\); the plannable ops: 'mlp.fc1', 'mlp.fc2'"):
        _pins("siglip-mlp-benchmark", {"fc3": "4x92x4"})


def test_a_fused_qkv_pin_keeps_the_fused_form_when_fused_is_only_a_graph_switch() -> None:
    """The defect: build_graph(..., fused_qkv=True) searched both forms and dropped the 'attn.qkv' pin."""
    graph = build_graph(SMALL_ENCODER, fused_qkv=True)
    _, graphs, pins, frame = _pins(graph, {"attn.qkv": "2x4x1"})
    assert list(graphs) == [True] and dict(pins[True])["attn.qkv"].label() == "2x4x1"
    assert frame["op"].to_list() == ["attn.qkv"]
    _, graphs, _, _ = _pins(graph, {"attn.q": "2x4x1"})
    assert list(graphs) == [False]
    with pytest.raises(OptionError, match=r"plans pin ops of both QKV forms: .*'qkv=2x4x1' only the fused-QKV "
                                          r"graph's \(attn.qkv\); no graph has both"):
        _pins(graph, {"q": "2x4x1", "qkv": "2x4x1"})


def test_the_search_takes_the_pinned_form() -> None:
    graph = build_graph(SMALL_ENCODER, fused_qkv=True)
    result = search_layouts(graph, ipu21(), as_options({"plans": {"qkv": "2x4x1"}, "row_blocks": (48,),
                                                        "beam_width": 1}))
    assert result.chosen.fused_qkv and result.candidates["fused_qkv"].all()
    assert dict(result.chosen.plans)["attn.qkv"].label() == "2x4x1"
    assert result.frames()["pins"]["op"].to_list() == ["attn.qkv"]


def test_an_infeasible_pin_names_the_op_the_plan_and_why() -> None:
    """The defect: ``-o plans=fc1=2x2x1`` named a global-grid candidate and knobs nobody set."""
    graph = build_graph("siglip-mlp-benchmark")
    with pytest.raises(InfeasibleError, match=r"plan 2x2x1 pinned for op 'mlp.fc1' \('fc1=2x2x1'\) cannot fit one "
                                              r"tile even alone: it needs 7,374,432 B per tile \(weights 4,962,512 B, "
                                              r"transient 2,411,920 B\) > 555,952 B") as err:
        search_layouts(graph, ipu21(), as_options({"plans": "fc1=2x2x1", "row_blocks": (48,)}))
    assert (err.value.field, err.value.value, err.value.op) == ("plans.fc1", "2x2x1", "mlp.fc1")


def test_a_pin_of_the_form_not_searched_says_why() -> None:
    graph = build_graph(SMALL_ENCODER)
    with pytest.raises(OptionError, match=r"plans names op 'qkv' .*: 'attn.qkv' exist only with fused QKV, and "
                                          r"option fused_qkv=False is pinned"):
        _pins(graph, {"qkv": "2x4x1"}, fused_qkv=False)
    fixed = build_graph(SMALL_ENCODER, fused_qkv=True, search_qkv=False)
    with pytest.raises(OptionError, match=r"'attn.q' exist only with separate QKV, and workload 'encoder' keeps "
                                          r"its QKV form \(search_qkv=False\)"):
        _pins(fixed, {"attn.q": "2x4x1"})


def test_a_pin_of_a_form_that_cannot_be_built_says_so() -> None:
    """An early V cast beside FP16 QK has no fused form, so the search tries separate QKV alone."""
    graph = build_graph(SMALL_ENCODER, pv_dtype="f8_143", pv_cast="early")
    with pytest.raises(OptionError, match=r"plans names op 'qkv' .*: the fused-QKV form of workload 'encoder', "
                                          r"which might have it, cannot be built \(fused QKV stores Q, K and V"):
        _pins(graph, {"qkv": "2x4x1"})
