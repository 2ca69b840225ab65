import time

import polars as pl
import pytest

import toolkit
from toolkit.errors import ModelError
from toolkit.graph import attention_block, build_graph, encoder_layer, mlp_block, repeat


def _flops(g, name):
    return g.ops.filter(pl.col("name") == name)["flops"].item()


def test_so400m_mlp_b1_flops_by_hand():
    g = build_graph("mlp-single-b1")
    matmuls = g.ops.filter(pl.col("kind") == "matmul")
    assert matmuls["name"].to_list() == ["mlp.fc1", "mlp.fc2"]
    assert matmuls["flops"].sum() == 2 * 729 * 1152 * 4304 * 2
    assert g.ops["kind"].to_list() == ["matmul", "gelu", "matmul"]   # the hardware's Dense-GeLU-Dense
    assert build_graph("mlp-block-b1").ops["kind"].to_list() == ["layernorm", "matmul", "gelu", "matmul", "add"]
    w1 = g.tensors.filter(pl.col("name") == "mlp.fc1.weight")
    assert w1["shape"].item().to_list() == [1152, 4304] and w1["dtype"].item() == "f8_143"
    assert w1["size_bytes"].item() == 1152 * 4304


def test_batch_folds_into_rows():
    g = build_graph("mlp-single-b4")
    assert g.ops.filter(pl.col("name") == "mlp.fc1")["rows"].item() == 4 * 729
    assert _flops(g, "mlp.fc1") == 2 * 4 * 729 * 1152 * 4304


def test_attention_shapes_and_flops():
    g = build_graph("attention-b1")
    assert _flops(g, "attn.q") == 2 * 729 * 1152 * 1152
    scores = g.ops.filter(pl.col("name") == "attn.scores").row(0, named=True)
    assert (scores["rows"], scores["cols"], scores["inner"], scores["groups"]) == (729, 729, 72, 16)
    assert scores["flops"] == 2 * 729 * 729 * 72 * 16
    assert _flops(g, "attn.values") == 2 * 729 * 729 * 72 * 16
    fused = build_graph("attention-fused-b1")
    assert _flops(fused, "attn.qkv") == 3 * _flops(g, "attn.q")
    assert fused.ops.height == g.ops.height - 2


def test_encoder_layer_is_attention_then_mlp():
    g = build_graph("encoder-b8")
    names = g.ops["name"].to_list()
    assert names.index("attn.residual") < names.index("mlp.ln")
    attn = build_graph("attention-block-b1", batch=8)
    mlp = build_graph("mlp-block-b1", batch=8)
    assert g.ops["flops"].sum() == attn.ops["flops"].sum() + mlp.ops["flops"].sum()


def test_repeat_is_symbolic():
    start = time.perf_counter()
    g = toolkit.build_graph("siglip-so400m", batch=8, blocks=27)
    assert time.perf_counter() - start < 1.0
    one = build_graph("encoder-b8")
    assert g.ops.height == one.ops.height  # one block, not 27 copies
    assert g.repeats.height == 1 and g.repeats["instances"].item() == 27
    assert g.tensors.filter(pl.col("role") == "weight")["per_instance"].all()
    assert g.instances().collect().height == 27 * one.ops.height
    assert g.total_flops() == 27 * one.ops["flops"].sum()


def test_repeat_builder_direct():
    g = repeat(mlp_block(tokens=129, width=128, hidden=256), 3)
    r = g.repeats.row(0, named=True)
    assert r["instances"] == 3
    assert g.tensors["role"][r["carried_in"]] == "input"
    assert g.tensors["role"][r["carried_out"]] == "output"


def test_builders_accept_uneven_shapes():
    g = encoder_layer(tokens=129, width=72 * 3, hidden=300, heads=3)
    assert g.params["head_dim"] == 72
    attention_block(tokens=5, width=8, heads=2, fused_qkv=True)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: mlp_block(tokens=0, width=8, hidden=8), "tokens=0 must be a positive integer"),
        (lambda: mlp_block(tokens=4, width=-8, hidden=8), "width=-8 must be a positive integer"),
        (lambda: attention_block(tokens=4, width=10, heads=3), "heads=3 does not divide width=10"),
        (lambda: attention_block(tokens=4, width=12, heads=3, head_dim=5), "head_dim=5 x heads=3"),
        (lambda: build_graph("mlp-single-b3"), "unknown workload 'mlp-single-b3'; did you mean"),
        (lambda: build_graph("mlp-single-b1", batch=0), "batch=0 must be a positive integer"),
        (lambda: build_graph("siglip-base", blocks=-1), "blocks=-1 must be a positive integer"),
        (lambda: build_graph("siglip-base", heads=7), "heads=7 does not divide width=768"),
        (lambda: build_graph("siglip-base", depth=7), "unknown workload field 'depth'"),
        (lambda: repeat(mlp_block(tokens=4, width=8, hidden=8), 0), "blocks=0"),
    ],
)
def test_bad_shapes_raise_model_error(call, match):
    with pytest.raises(ModelError, match=match) as info:
        call()
    assert info.value.field is not None


def test_workloads_frame_lists_every_preset():
    w = toolkit.workloads()
    assert set(w["name"]) >= {
        "siglip-so400m", "siglip-base", "mlp-small-repeat", "mlp-single-b1", "mlp-single-b4", "attention-b1",
        "attention-fused-b1", "mlp-b2-n3", "encoder-b8",
    }
    assert w.filter(pl.col("name") == "mlp-small-repeat")["compute_tiles"].item() == 64


def _names(g) -> list[str]:
    return g.ops["name"].to_list()


def test_mlp_benchmark_is_dense_gelu_dense_without_biases_layernorm_or_residual():
    g = toolkit.build_graph("siglip-mlp-benchmark")
    assert g.ops["kind"].value_counts().sort("kind").rows() == [("gelu", 1), ("matmul", 2)]
    assert not any(n.endswith(".bias") for n in g.tensors["name"])
    x = g.tensors.filter(pl.col("role") == "input")
    assert x["host_layout"].to_list() == [True] and x["tensor_id"].item() in g.ops["inputs"][0]
    assert g.tensors.filter(pl.col("role") == "output")["name"].item() == "mlp.fc2.out"
    assert toolkit.build_graph("siglip-mlp-benchmark", batch=4).ops["rows"][0] == 4 * 729


def test_attention_benchmark_has_no_layernorm_projection_or_residual():
    g = toolkit.build_graph("siglip-attention-benchmark")
    assert _names(g) == ["attn.q", "attn.k", "attn.v", "attn.scores", "attn.softmax", "attn.values"]
    fused = toolkit.build_graph("siglip-attention-benchmark", fused_qkv=True)
    assert _names(fused)[0] == "attn.qkv" and fused.ops["inputs"][0].len() == 2   # x and the weight, no bias


@pytest.mark.parametrize(("switch", "gone"), [("biases", ".bias"), ("layernorm", ".ln"),
                                               ("residual", ".residual")])
def test_each_switch_removes_its_ops_and_the_rest_still_connects(switch, gone):
    full = toolkit.build_graph("encoder-b8", batch=1)
    g = toolkit.build_graph("encoder-b8", batch=1, **{switch: False})
    names = [*g.ops["name"], *g.tensors["name"]]
    assert any(gone in n for n in [*full.ops["name"], *full.tensors["name"]])
    assert not any(gone in n for n in names)
    produced = set(g.ops["output"]) | set(g.tensors.filter(pl.col("role").is_in(["input", "weight"]))["tensor_id"])
    assert set(g.ops["inputs"].explode()) <= produced   # every op reads a produced tensor


def test_without_layernorm_the_first_linear_reads_the_block_input():
    g = toolkit.build_graph("mlp-block-b1", layernorm=False, residual=False)
    x = g.tensors.filter(pl.col("role") == "input")["tensor_id"].item()
    assert _names(g) == ["mlp.fc1", "mlp.gelu", "mlp.fc2"] and g.ops["inputs"][0][0] == x
    assert g.tensors.filter(pl.col("role") == "input")["host_layout"].item() is False


@pytest.mark.parametrize(("overrides", "match"), [
    ({"projection": False}, r"projection=False makes no sense for workload 'mlp-single-b1' of kind 'mlp'"),
    ({"biases": "no"}, r"biases='no' must be true or false"),
])
def test_switches_refused_by_name(overrides, match):
    with pytest.raises(ModelError, match=match):
        toolkit.build_graph("mlp-single-b1", **overrides)


def test_only_an_input_is_host_placed():
    from toolkit.graph import DType, GraphBuilder, Role
    with pytest.raises(ModelError, match="host_layout=True but role 'weight'"):
        GraphBuilder("g").tensor("w", (4, 4), DType.F16, Role.WEIGHT, host_layout=True)
