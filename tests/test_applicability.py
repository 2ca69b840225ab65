"""Every option and workload switch changes the program or is refused / warned by name (issue 38).

Table-driven over ``dataclasses.fields(Options)`` and ``dataclasses.fields(Workload)``: a new option or switch
fails here until it has a row in ``toolkit.layout.applicability`` and a sample value below. Only graphs are
built (``toolkit.pipeline.checked_graph``, what ``compile`` runs before the layout search); nothing compiles.
"""

from __future__ import annotations

import dataclasses
import warnings

import pytest

import toolkit
from toolkit.errors import ModelError, NoEffectWarning, OptionError, ToolkitError
from toolkit.graph import Workload, build_graph
from toolkit.layout.applicability import OPTIONS, SWITCHES, graph_features
from toolkit.options import Options
from toolkit.pipeline import checked_graph

# small graphs of every kind, named by what they have (independent of the presets' names)
SMALL = {"tokens": 129, "width": 128, "hidden": 256}
BARE = {"weight_dtype": "f16", "biases": False, "layernorm": False, "residual": False, "host_layout": True}
GRAPHS = {
    "mlp": Workload(name="mlp", kind="mlp", **SMALL),                          # FP8, LayerNorm, residual
    "mlp-bare": Workload(name="mlp-bare", kind="mlp", **SMALL, **BARE),        # the hardware's Dense-GeLU-Dense
    "attention": Workload(name="attention", kind="attention", **SMALL, heads=2, search_qkv=False,
                          compute_tiles=48),
    "attention-bare": Workload(name="attention-bare", kind="attention", **SMALL, heads=2, search_qkv=False,
                               projection=False, **BARE),
    "encoder": Workload(name="encoder", kind="encoder", **SMALL, heads=2),   # both QKV forms searched
    "vit": "siglip-vit",
}
MLPS = {"mlp", "mlp-bare"}
F16 = {"mlp-bare", "attention-bare"}        # F16 weights, no LayerNorm, no residual add

#: per option: a legal non-default setting (with what it needs beside it) and the graphs it cannot apply to
#: ("refused") or where it is legal but idle ("warned"); everywhere else it is accepted silently
OPTION_CASES: dict[str, tuple[dict, set[str], set[str]]] = {
    "row_block": ({"row_block": 16}, set(), set()),
    "stream_block": ({"stream_block": 8}, F16, set()),
    "row_shard": ({"row_shard": 1}, set(), set()),
    "panel_groups": ({"panel_groups": 1}, set(), set()),
    "inner_split": ({"inner_split": 2}, set(), set()),
    "inner_block": ({"inner_block": 32}, set(), set()),
    "weight_class": ({"weight_class": "standard"}, set(), set()),
    "fused_qkv": ({"fused_qkv": True}, MLPS, set()),
    "row_blocks": ({"row_blocks": (16, 32)}, set(), set()),
    "inner_splits": ({"inner_splits": (1, 2)}, set(), set()),
    "beam_width": ({"beam_width": 2}, set(), set()),
    "tiles": ({"tiles": 64}, set(), set()),
    "placement_time_limit": ({"placement_time_limit": 1.0}, set(), set()),
    "plans": ({"plans": {"fc2": "1x2x1"}}, set(), set()),   # matched to ops by resolve_pins (test_pins.py)
    "tile_mapping": ({"tile_mapping": "block-8-2"}, set(), set()),
    "plan_search": ({"plan_search": False}, set(), set()),
    "weight_dtype": ({"weight_dtype": "f8_152"}, set(), set()),
    "early_casts": ({"early_casts": False}, F16, set()),
    "qk_dtype": ({"qk_dtype": "f8_143"}, MLPS, set()),
    "qk_cast": ({"qk_dtype": "f8_143", "qk_cast": "early"}, MLPS, set()),
    "pv_dtype": ({"pv_dtype": "f8_143"}, MLPS, set()),
    "pv_cast": ({"pv_dtype": "f8_143", "pv_cast": "early"}, MLPS, set()),
    "partials": ({"partials": "f32"}, set(), set()),
    "qk_preparation": ({"qk_preparation": "separate"}, MLPS, set()),
    "attention_products": ({"attention_products": "independent"}, MLPS, set()),
    "attention": ({"attention": "streaming"}, MLPS, set()),
    "key_block": ({"key_block": 32}, MLPS, set(GRAPHS) - MLPS),   # without attention="streaming" it does nothing
    "kernel_build": ({"kernel_build": "2026-09-06"}, set(), set()),
    "stream_weights": ({"stream_weights": "gathered"}, F16, set()),
    "simulate": ({"simulate": False}, set(), set()),
    "check": ({"check": True}, set(), set()),
    "seed": ({"seed": 3}, set(), set(GRAPHS)),   # it seeds the check only
}

#: per workload switch: a legal non-default setting (over the graph's own), the graphs refusing it and the
#: graphs warning of it; shape fields size the graph and have no case
SWITCH_CASES: dict[str, tuple[dict, set[str], set[str]]] = {
    "batch": ({"batch": 2}, set(), set()),
    "blocks": ({"blocks": 2}, set(), set()),
    "fused_qkv": ({"fused_qkv": True}, MLPS, {"encoder", "vit"}),   # searched both ways there: a start only
    "search_qkv": ({"search_qkv": False}, MLPS, set()),
    "compute_tiles": ({"compute_tiles": 64}, set(), set()),
    "weight_dtype": ({"weight_dtype": "f8_152"}, set(), set()),
    "early_casts": ({"early_casts": False}, F16, set()),
    "biases": ({"biases": False}, {"vit"}, set()),
    "layernorm": ({"layernorm": False}, {"vit"}, set()),
    "residual": ({"residual": False}, {"vit"}, set()),
    "projection": ({"projection": False}, MLPS | {"vit"}, set()),
    "host_layout": ({"host_layout": True}, {"vit"}, set()),
    "image": ({"image": 378}, GRAPHS.keys() - {"vit"}, set()),
    "patch": ({"patch": 14}, GRAPHS.keys() - {"vit"}, set()),
    "qk_dtype": ({"qk_dtype": "f8_143"}, MLPS, set()),
    "qk_cast": ({"qk_dtype": "f8_143", "qk_cast": "early"}, MLPS, set()),
    "pv_dtype": ({"pv_dtype": "f8_143"}, MLPS, set()),
    "pv_cast": ({"pv_dtype": "f8_143", "pv_cast": "early"}, MLPS, set()),
}


def _outcome(build) -> tuple[str, ToolkitError | Warning | None]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            build()
        except ToolkitError as err:
            return "refused", err
    ours = [w.message for w in seen if issubclass(w.category, NoEffectWarning)]
    return ("warned", ours[0]) if ours else ("accepted", None)


def test_every_option_and_switch_declares_what_it_acts_on() -> None:
    """A new option or Workload field fails here until it has an applicability row and a case in this file."""
    options = [f.name for f in dataclasses.fields(Options)]
    assert sorted(OPTIONS) == sorted(options), "option without an applicability row (or a stale row)"
    assert sorted(OPTION_CASES) == sorted(options), "option without a case in OPTION_CASES"
    switches = [f.name for f in dataclasses.fields(Workload)]
    assert sorted(SWITCHES) == sorted(switches), "workload field without an applicability row"
    assert sorted(SWITCH_CASES) == sorted(n for n in switches if not SWITCHES[n].shape)


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("name", sorted(OPTION_CASES))
def test_each_option_applies_or_is_refused_or_warned_by_name(name: str, graph: str) -> None:
    given, refused, warned = OPTION_CASES[name]
    expected = "refused" if graph in refused else "warned" if graph in warned else "accepted"
    got, said = _outcome(lambda: checked_graph(GRAPHS[graph], given))
    assert got == expected, (name, graph, said)
    if got == "refused":
        assert isinstance(said, OptionError) and said.field in given, said
        assert f"{said.field}=" in str(said) and "changes nothing" in str(said), said
    if got == "warned":
        assert f"option {name}=" in str(said), said


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("name", sorted(SWITCH_CASES))
def test_each_workload_switch_applies_or_is_refused_or_warned_by_name(name: str, graph: str) -> None:
    given, refused, warned = SWITCH_CASES[name]
    expected = "refused" if graph in refused else "warned" if graph in warned else "accepted"
    base = GRAPHS[graph]
    got, said = _outcome(lambda: checked_graph(build_graph(base, **given)))
    assert got == expected, (name, graph, said)
    if got == "refused":
        assert isinstance(said, ModelError) and said.field in given, said
        assert f"{said.field}=" in str(said), said
    if got == "warned":
        assert f"switch {name}=" in str(said), said


def test_attention_options_on_an_mlp_name_the_workload_and_why() -> None:
    for name, value in (("qk_dtype", "f8_143"), ("pv_dtype", "f8_143"), ("attention_products", "qk-only"),
                        ("qk_preparation", "separate"), ("fused_qkv", False)):
        with pytest.raises(OptionError, match=rf"option {name}={value!r} changes nothing: workload "
                                              rf"'mlp-bare' has no attention \({name} sets ") as err:
            checked_graph(GRAPHS["mlp-bare"], {name: value})
        assert (err.value.field, err.value.value) == (name, value)


def test_compile_refuses_before_the_search() -> None:
    with pytest.raises(OptionError, match=r"workload 'siglip-mlp-benchmark' has no attention"):
        toolkit.compile("siglip-mlp-benchmark", options={"qk_dtype": "f8_143", "simulate": False})


def test_a_product_cast_on_an_fp16_product_is_refused() -> None:
    """Options refuse ``qk_cast='early'`` with ``qk_dtype='f16'`` themselves; a Workload is refused once built."""
    with pytest.raises(OptionError, match=r"qk_cast='early' places the F143 cast .* qk_dtype='f16'"):
        Options(qk_cast="early")
    with pytest.raises(ModelError, match=r"switch pv_cast='early' changes nothing: workload 'attention' has no "
                                         r"FP8 values product \(pv_dtype='f8_143'\)") as err:
        checked_graph(build_graph(GRAPHS["attention"], pv_cast="early"))
    assert err.value.field == "pv_cast"


def test_idle_settings_are_warned_by_name() -> None:
    for given, said in (({"row_block": 16, "row_blocks": (16, 32)}, r"option row_blocks=\(16, 32\) .* row_block=16 "
                                                                     r"is pinned"),
                        ({"inner_split": 2, "inner_splits": (1, 2)}, r"option inner_splits=.* inner_split=2 is "
                                                                     r"pinned"),
                        ({"row_shard": 2, "plan_search": False}, r"option plan_search=False .* pinning row_shard"),
                        ({"fused_qkv": False}, r"option fused_qkv=False .* already separate"),
                        ({"tile_mapping": "identity"}, r"option tile_mapping='identity' .* what None does"),
                        ({"tiles": 48}, r"option tiles=48 .* workload 'attention''s own compute_tiles")):
        with pytest.warns(NoEffectWarning, match=said):
            checked_graph(GRAPHS["attention"], given)


def test_graph_features_are_read_off_the_graph() -> None:
    names = {g: sorted(f.name for f in graph_features(build_graph(GRAPHS[g]))) for g in ("mlp-bare", "attention")}
    assert names["mlp-bare"] == ["LINEAR", "MATMUL"]
    assert names["attention"] == ["ATTENTION", "CAST_PRODUCER", "FP8_WEIGHTS", "LAYERNORM", "LINEAR", "MATMUL",
                                  "STREAM"]


def test_an_early_v_cast_beside_fp16_qk_on_fused_qkv_says_why_it_cannot_be_said() -> None:
    """One fused projection, one output tensor, one dtype: V cannot be F143 while Q and K stay FP16."""
    fused = Workload(name="fused", kind="attention", **SMALL, heads=2, fused_qkv=True, search_qkv=False)
    with pytest.raises(ModelError, match=r"fused QKV stores Q, K and V as one tensor, so it cannot cast V early "
                                         r"while Q and K stay FP16 .* a tensor has one dtype, .* cast the FP8 "
                                         r"product late") as err:
        checked_graph(fused, {"pv_dtype": "f8_143", "pv_cast": "early"})
    assert err.value.field == "pv_cast"
    graph = checked_graph(fused, {"pv_dtype": "f8_143", "pv_cast": "late"})   # the product casts V's panels
    assert graph.params["pv_dtype"] == "f8_143"


def test_the_cli_refuses_by_name_too() -> None:
    """``-o`` options reach the graph through a Workload (a built Graph refused every graph-rebuilding option)."""
    from typer.testing import CliRunner

    from toolkit.cli import app
    runner = CliRunner()
    r = runner.invoke(app, ["compile", "siglip-mlp-benchmark", "-o", "qk_dtype=f8_143"])
    assert r.exit_code == 2 and "workload 'siglip-mlp-benchmark' has no attention" in r.output, r.output
    r = runner.invoke(app, ["compile", "siglip-mlp-benchmark", "-o", "plans=fc1=4x92x4,fc1=4x92x2"])
    assert r.exit_code == 2 and "op 'mlp.fc1' pinned twice: 'fc1=4x92x2' and 'fc1=4x92x4'" in r.output, r.output
