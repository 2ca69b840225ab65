"""The whole SigLIP vision model (``siglip-vit``): its graph, its repeated region between a prologue and an
epilogue, and that it compiles, places, simulates and checks."""

import polars as pl
import pytest

import toolkit
from toolkit.errors import ModelError
from toolkit.graph import GraphBuilder, build_graph
from toolkit.graph.ir import DType, Role
from toolkit.graph.vit import vit_model
from toolkit.layout.plans import LayoutParams
from toolkit.layout.screen import screen


def _op(g, name):
    return g.ops.filter(pl.col("name") == name).row(0, named=True)


def _shape(g, name):
    return g.tensors.filter(pl.col("name") == name)["shape"].item().to_list()


def _small(blocks=2, batch=1):
    """ipu-stack's --vit-small: a 28 x 28 image (4 tokens), width 144, two heads of 72, MLP 288."""
    return vit_model(width=144, hidden=288, heads=2, image=28, batch=batch, blocks=blocks)


def test_siglip_vit_ops_and_shapes_b1():
    g = build_graph("siglip-vit")
    assert g.params["kind"] == "vit" and g.params["tokens"] == 729 and g.params["blocks"] == 27
    # ipu-stack's single-layer graph: 13 GEMMs (separate projections), 4 LayerNorms, 2 attentions
    assert g.ops.filter(pl.col("rule") == "linear").height == 13
    assert g.ops.filter(pl.col("kind") == "layernorm").height == 4
    assert g.ops.filter(pl.col("rule") == "scores").height == 2
    assert _shape(g, "patches") == [729, 588]                      # 27 x 27 patches of 14 x 14 x 3
    embed = _op(g, "embed")
    assert (embed["rows"], embed["inner"], embed["cols"]) == (729, 588, 1152)
    assert _shape(g, "embed.weight") == [588, 1152]
    assert _shape(g, "pos.table") == [729, 1152]
    pos = _op(g, "pos")
    assert pos["kind"] == "add" and pos["inputs"][0] == embed["output"]
    # the MAP head: one query per image against the 729 tokens, 16 heads of 72
    sc = _op(g, "map.attn.scores")
    assert (sc["rows"], sc["cols"], sc["inner"], sc["groups"]) == (1, 729, 72, 16)
    va = _op(g, "map.attn.values")
    assert (va["rows"], va["cols"], va["inner"], va["groups"]) == (1, 72, 729, 16)
    assert _op(g, "map.attn.q")["rows"] == 1 and _op(g, "map.attn.k")["rows"] == 729
    assert _op(g, "map.attn.k")["inputs"][0] == _op(g, "final_ln")["output"]
    assert _shape(g, "map.probe") == [1, 1152]
    assert _op(g, "map.mlp.fc1")["cols"] == 4304 and _op(g, "map.mlp.fc2")["cols"] == 1152
    # no LayerNorm before and no residual around the MAP attention; the MLP's residual adds the pooled token
    assert g.ops.filter(pl.col("name").is_in(["map.attn.ln", "map.attn.residual"])).height == 0
    res = _op(g, "map.mlp.residual")
    assert res["inputs"][0] == _op(g, "map.attn.proj")["output"]
    out = g.tensors.filter(pl.col("role") == "output")
    assert out["name"].to_list() == ["map.mlp.residual.out"] and out["shape"].item().to_list() == [1, 1152]


def test_fused_qkv_fuses_the_head_kv_as_ipu_stack_does():
    g = build_graph("siglip-vit", fused_qkv=True)
    assert g.ops.filter(pl.col("rule") == "linear").height == 10     # ipu-stack's fused graph: 10 GEMMs
    assert _shape(g, "attn.qkv.weight") == [1152, 3456] and _shape(g, "map.attn.kv.weight") == [1152, 2304]
    kv = _op(g, "map.attn.kv")["output"]
    assert _op(g, "map.attn.scores")["inputs"] == [_op(g, "map.attn.q")["output"], kv]
    assert _op(g, "map.attn.values")["inputs"][1] == kv


def test_siglip_vit_batch2_folds_images_and_shares_the_tables():
    g = build_graph("siglip-vit", batch=2)
    assert _shape(g, "patches") == [2 * 729, 588]
    assert _shape(g, "pos.table") == [729, 1152]                  # one table, broadcast over the images
    assert _op(g, "map.attn.scores")["groups"] == 2 * 16
    assert _shape(g, "map.attn.scores.out") == [32, 1, 729]
    assert g.tensors.filter(pl.col("role") == "output")["shape"].item().to_list() == [2, 1152]


def test_repeat_region_has_a_prologue_and_an_epilogue():
    g = build_graph("siglip-vit")
    rep = g.repeats.row(0, named=True)
    layer = g.ops.filter(pl.col("block") == "layer")
    assert (rep["block"], rep["instances"]) == ("layer", 27)
    assert (rep["first_op"], rep["last_op"]) == (layer["op_id"].min(), layer["op_id"].max())
    assert layer["name"].to_list()[0] == "attn.ln" and layer["name"].to_list()[-1] == "mlp.residual"
    assert layer.height == layer["op_id"].max() - layer["op_id"].min() + 1      # one contiguous region
    main = g.ops.filter(pl.col("block") == "main")["name"].to_list()
    assert main[:2] == ["embed", "pos"] and main[2] == "final_ln" and main[-1] == "map.mlp.residual"
    tid = dict(zip(g.tensors["name"].to_list(), g.tensors["tensor_id"].to_list(), strict=True))
    assert rep["carried_in"] == tid["pos.out"] and rep["carried_out"] == tid["mlp.residual.out"]
    weights = g.tensors.filter(pl.col("role") == "weight")
    per = weights.filter(pl.col("per_instance"))
    assert set(per["block"].to_list()) == {"layer"}                 # only the region's weights repeat
    assert not weights.filter(pl.col("name").is_in(["embed.weight", "pos.table", "map.mlp.fc1.weight"]))[
        "per_instance"].any()
    inst = g.instances().collect()
    assert inst.height == 27 * layer.height + len(main)
    one = build_graph("siglip-vit", blocks=1)
    layer_flops = int(layer["flops"].sum())
    assert g.total_flops() - one.total_flops() == 26 * layer_flops


def test_repeat_region_errors_name_the_field():
    with pytest.raises(ModelError, match="image=30 is not a multiple of patch=14"):
        vit_model(width=144, hidden=288, heads=2, image=30)
    with pytest.raises(ModelError, match="blocks=0"):
        build_graph("siglip-vit", blocks=0)
    b = GraphBuilder("g")
    x = b.tensor("x", (4, 8), DType.F16, Role.INPUT)
    with pytest.raises(ModelError, match="has no ops"):
        b.repeat_region("layer", 2, x, lambda b_, t: t)
    b.repeat_region("layer", 2, x, lambda b_, t: _add(b_, t))
    with pytest.raises(ModelError, match="at most one"):
        b.repeat_region("again", 2, x, lambda b_, t: _add(b_, t))


def _add(b, t):
    from toolkit.graph.builders import add_layernorm
    return add_layernorm(b, t, f"ln{b.next_op}", 4, 8)


def test_screen_counts_the_prologue_and_epilogue_once():
    """Estimated cycles grow by one layer per instance; ops outside the region are counted once."""
    p = LayoutParams(row_block=8)
    est = []
    for n in (1, 2, 3):
        g = _small(blocks=n)
        ops = list(g.ops.iter_rows(named=True))
        tensors = {r["tensor_id"]: r for r in g.tensors.iter_rows(named=True)}
        reps = dict(zip(g.repeats["block"].to_list(), g.repeats["instances"].to_list(), strict=True))
        e = screen(ops, tensors, reps, g.params, p, toolkit.ipu21(), 64, {("ops", False): ops})
        est.append(e["interleaved"]["est_cycles"])
    layer = est[2] - est[1]
    assert layer > 0 and est[1] - est[0] == layer
    assert est[0] > layer          # the prologue and the epilogue (embedding, MAP head) add to one layer


@pytest.mark.parametrize(("batch", "fused"), [(1, False), (2, True)])
def test_small_vit_compiles_places_simulates_and_checks(batch, fused):
    """Batch 2 also checks the position table broadcast over the images and one probe row per image; fused, the
    head's K and V slices of one tensor."""
    c = toolkit.compile(_small(blocks=2, batch=batch), options={"tiles": 64, "check": True, "fused_qkv": fused})
    assert c.placement.fits
    assert toolkit.profile.crop(c.profile).cropped_cycles > 0
    # the region is scheduled once and run per instance; the epilogue's phases come after it, once
    reps = c.schedule.repeats.row(0, named=True)
    ph = c.schedule.phases
    assert reps["instances"] == 2
    assert ph.filter(pl.col("block") == "main")["phase"].max() > reps["last_phase"]
    assert ph.filter(pl.col("block") == "main")["phase"].min() < reps["first_phase"]
    epochs = c.profile.samples.filter(pl.col("operation") == "mlp.fc1")["epoch"].unique().sort().to_list()
    assert epochs == [0, 1]
    assert c.profile.samples.filter(pl.col("operation") == "map.mlp.fc1")["epoch"].unique().to_list() == [0]
    steps = c.exchange.summary.join(ph.select("phase", "block"), on="phase")
    once, per = (int(steps.filter(pl.col("block") == b)["steps"].sum()) for b in ("main", "layer"))
    assert c.summary()["exchange_steps"].item() == once + 2 * per     # the region's steps count per instance
    assert c.check.passed, c.check.message
    assert c.check.outputs["tensor"].to_list() == ["map.mlp.residual.out"]


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 2])
def test_siglip_vit_27_layers_place_and_simulate(batch):
    c = toolkit.compile(toolkit.build_graph("siglip-vit", batch=batch))
    assert c.placement.fits
    assert c.schedule.repeats["instances"].to_list() == [27]
    assert c.schedule.phases.filter(pl.col("name") == "mlp.fc1").height >= 1
    cycles = toolkit.profile.crop(c.profile).cropped_cycles
    hardware = {1: 10_088_124, 2: 16_065_444}[batch]    # docs/FP8_QK_FULL_MODEL_2026_09_13.md
    assert 0.7 < cycles / hardware < 1.2
