"""Streaming (FlashAttention) attention: the option, the graph pass, the kernels' prices, the check's F32 state."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import toolkit
from toolkit.check.kernels import KernelContext, attention_stream
from toolkit.costs import cycles
from toolkit.errors import ModelError, OptionError
from toolkit.graph import build_graph
from toolkit.graph.builders import attention_block
from toolkit.graph.streaming import stream_attention
from toolkit.layout.streaming import key_blocks, stream_cycles
from toolkit.options import Options
from toolkit.target import ipu21


def _tiny(tokens: int = 40, width: int = 32, heads: int = 1):
    return attention_block(tokens=tokens, width=width, heads=heads, biases=False, layernorm=False, residual=False,
                           projection=False)


def test_options_validate_attention_and_key_block():
    assert Options(attention="streaming", key_block=32).key_block == 32
    with pytest.raises(OptionError, match="attention='flash' must be one of"):
        Options(attention="flash")
    for bad in (0, 40, -16):
        with pytest.raises(OptionError, match=f"key_block={bad} must be a positive multiple of 16"):
            Options(key_block=bad)
    with pytest.raises(OptionError, match="attention_products='independent' puts attention products on grids"):
        Options(attention="streaming", attention_products="independent")
    with pytest.raises(OptionError, match="qk_dtype='f8_143' runs an attention product on the FP8 AMP"):
        Options(attention="streaming", qk_dtype="f8_143")


def test_streaming_refused_by_name_without_attention():
    with pytest.raises(OptionError, match="attention='streaming' changes nothing: workload 'mlp-small-repeat' has "
                                          "no attention") as err:   # refused before any work (layout.applicability)
        toolkit.compile("mlp-small-repeat", options={"attention": "streaming"})
    assert err.value.field == "attention"
    with pytest.raises(ModelError, match="attention='streaming' applies to attention, but workload 'mlp-small-rep"):
        stream_attention(build_graph("mlp-small-repeat"), 64)   # the graph pass names it too


def test_graph_pass_keeps_a_fused_qkv_tensor_once():
    s = stream_attention(build_graph("attention-fused-b1"), 64)
    att = s.ops.filter(pl.col("kind") == "attention").row(0, named=True)
    assert len(att["inputs"]) == 1 and s.tensors["name"][att["inputs"][0]] == "attn.qkv.out"


def test_tiny_fused_streaming_compile_passes_the_check():
    g = attention_block(tokens=40, width=32, heads=2, fused_qkv=True, biases=False, layernorm=False,
                        residual=False, projection=False)
    c = toolkit.compile(g, options={"attention": "streaming", "key_block": 16, "check": True, "tiles": 16})
    assert c.placement.fits and c.check.passed, c.check.message


def test_graph_pass_fuses_scores_softmax_values():
    g = build_graph("siglip-vit")
    s = stream_attention(g, 64)
    assert set(s.ops["rule"]) >= {"attention"} and not set(s.ops["rule"]) & {"scores", "values"}
    assert s.ops.filter(pl.col("kind") == "softmax").height == 0
    assert s.ops.height == g.ops.height - 2 * 2            # two attentions, each three ops -> one
    assert s.tensors.height == g.tensors.height - 2 * 2    # their scores and probabilities are gone
    assert s.total_flops() == g.total_flops()
    assert s.params["attention"] == "streaming" and s.params["key_block"] == 64
    assert s.ops["op_id"].to_list() == list(range(s.ops.height))
    rep = s.repeats.row(0, named=True)
    assert s.ops.filter(pl.col("op_id") == rep["last_op"])["name"].item() == "mlp.residual"


def test_merge_costs_match_ipu_stack_fixtures():
    # crates/ipu-codegen/src/kernel/cost.rs attention_row_models_match_hardware: 7-8 rows x 72 values
    t = ipu21()
    for kernel, want in (("merge_first", 2430), ("merge_update", 3378), ("merge_last", 3438)):
        assert cycles(kernel, t, rows=np.array([7, 8]), cols=72).tolist() == [want, want]


def test_stream_cycles_sum_the_block_kernels():
    t = ipu21()
    priced = stream_cycles(np.array([8]), 72, 729, 64, t)
    assert priced["cycles"].shape == (12, 1)                      # 11 full blocks and a 25-key tail
    assert np.diff(key_blocks(729, 64)).tolist() == [64] * 11 + [25]
    assert priced["cycles"][0, 0] < priced["cycles"][1, 0]        # a first merge is cheaper than an update


def test_check_rule_blocks_equal_exact_attention():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(1, 1, 8, 16)), rng.normal(size=(1, 1, 40, 16)), rng.normal(size=(1, 1, 40, 16))
    ctx = KernelContext(head_dim=16, partials="f32")
    state = None
    bounds = key_blocks(40, 16)
    for j in range(len(bounds) - 1):
        ins = [q, k[:, :, bounds[j]:bounds[j + 1]], v[:, :, bounds[j]:bounds[j + 1]]]
        state = attention_stream(ins + ([state] if state is not None else []), [], ctx, last=j == len(bounds) - 2)
    z = q[0, 0] @ k[0, 0].T / 4.0
    p = np.exp(z - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(state[0, 0], (p / p.sum(axis=1, keepdims=True)) @ v[0, 0], rtol=1e-12)


def test_tiny_streaming_compile_passes_the_check():
    c = toolkit.compile(_tiny(), options={"attention": "streaming", "key_block": 16, "check": True, "tiles": 16})
    assert c.placement.fits and c.check.passed, c.check.message
    out = c.check.outputs.row(0, named=True)
    assert c.check.max_abs_error <= 2**-7 * out["max_abs_expected"]
    cmds = c.schedule.commands
    blocks = cmds.filter(pl.col("kernel").str.starts_with("attention_stream"))
    assert blocks.group_by("tile").len()["len"].max() == 3      # 40 keys in blocks of 16: three rounds
    assert blocks.filter(pl.col("kernel") == "attention_stream_last").height == blocks.height // 3
    names = c.schedule.objects["name"]
    assert not names.str.contains("scores.out").any()           # no scores matrix is ever held


def test_streaming_peak_below_materialized_on_the_same_plan():
    g = _tiny(tokens=512, width=128, heads=2)
    peaks = {}
    for form in ("materialized", "streaming"):
        c = toolkit.compile(g, options={"attention": form, "attention_products": "shared-rows", "tiles": 16,
                                        "row_block": 64, "simulate": False})
        assert c.placement.fits
        peaks[form] = int(c.placement.occupancy["live_bytes"].max())
    assert peaks["streaming"] < peaks["materialized"]


def test_sweep_grid_key_attention():
    from toolkit.sweep.points import sweep_points
    points = sweep_points(["siglip-attention-benchmark"], {"attention": ["materialized", "streaming"],
                                                          "key_block": [64]}, ipu21())
    assert sorted(p.options.attention for p in points) == ["materialized", "streaming"]
    assert len({p.id for p in points}) == 2
    with pytest.raises(OptionError, match="key_block=24 must be a positive multiple of 16"):
        sweep_points(["siglip-attention-benchmark"], {"attention": ["streaming"], "key_block": [24]}, ipu21())


def test_ipu_stack_command_names_the_flash_strategy():
    from toolkit.layout.ipu_stack import ipu_stack_args
    g = stream_attention(build_graph("attention-fused-b1"), 64)
    args, _warnings = ipu_stack_args(g.params, "attention", g.ops.to_dicts(), (), "interleaved", -4)
    assert "--attention-strategy" in args and args[args.index("--attention-strategy") + 1] == "flash"
    assert "--fuse-qkv" in args


def test_each_form_finds_its_own_hardware_figure():
    from toolkit.report import hardware_figure, hardware_program, hardware_programs
    hw = hardware_programs()
    for workload, cycles_ in (("siglip-attention-benchmark/shared-rows", 320_256),
                              ("siglip-attention-benchmark/streaming", 355_320)):
        preset, overrides, options = hardware_program(hw.filter(pl.col("workload") == workload).row(0, named=True))
        params = build_graph(preset, **overrides).params
        assert hardware_figure(preset, Options(**options), params)["hardware_cycles"] == cycles_
