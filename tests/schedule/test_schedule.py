import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolkit
from toolkit.errors import InvalidIRError
from toolkit.graph import attention_block, mlp_block
from toolkit.layout.plans import LayoutParams
from toolkit.schedule import schedule
from toolkit.schedule.verify import verify_schedule
from toolkit.testing import graphs, layout_params

T = toolkit.ipu21()


def test_golden_2x2_matmul_on_4_tiles():
    # a 2-token MLP with width 16 and hidden 32 on 4 tiles: every op's grid is tiny and checkable by hand
    g = mlp_block(tokens=2, width=16, hidden=32)
    s = schedule(g, LayoutParams(row_block=1, row_shard=2), T, tiles=4)
    verify_schedule(s)
    # ln | sync exchange fc1 | gelu | sync exchange fc2 | sync exchange residual
    assert s.phases["kind"].to_list() == ["compute", "sync", "exchange", "compute", "compute", "sync", "exchange",
                                           "compute", "sync", "exchange", "compute"]
    # the residual stream's two row blocks live on the last tiles (homes 2 and 3)
    assert s.commands.filter(pl.col("op_id") == 0)["tile"].to_list() == [2, 3]
    # fc1: 2 row blocks x 2 column panels (32 hidden = 2 groups of 16), one command per tile
    fc1 = s.commands.filter(pl.col("op_id") == 1)
    assert fc1["tile"].to_list() == [0, 1, 2, 3]
    assert fc1["rows"].to_list() == [1, 1, 1, 1] and fc1["cols"].to_list() == [16] * 4
    x = s.transfers.filter(pl.col("phase") == 2)
    # row 0's LayerNorm output is one multicast (tile 2 -> tiles 0 and 1); row 1 goes 3 -> 2, and 3 copies locally
    assert x.select("transfer_id", "source", "destination").rows() == [(0, 2, 0), (0, 2, 1), (1, 3, 2)]
    assert x["size_bytes"].unique().to_list() == [16 * 2]
    # fc2 gathers each row's two hidden panels; the residual brings fc2's rows home
    assert s.transfers.filter(pl.col("phase") == 6).select("source", "destination").rows() == [(1, 0), (2, 1), (3, 1)]
    assert s.transfers.filter(pl.col("phase") == 9).select("source", "destination").rows() == [(0, 2), (1, 3)]
    assert s.commands.filter(pl.col("kernel") == "copy").height == 2


def test_one_attention_head():
    g = attention_block(tokens=8, width=16, heads=1)
    s = schedule(g, LayoutParams(row_block=4), T, tiles=8)
    verify_schedule(s)
    scores = s.commands.filter(pl.col("op_id") == 4)
    assert scores.height == 2 and scores["cols"].to_list() == [8, 8] and scores["inner"].to_list() == [16, 16]


def test_repeat_is_one_symbolic_block():
    g = toolkit.build_graph("mlp-block-small-repeat")
    one = toolkit.build_graph("mlp-block-small-repeat", blocks=1)
    p = LayoutParams(row_block=36)
    s3, s1 = schedule(g, p, T, tiles=64), schedule(one, p, T, tiles=64)
    assert s3.phases.height == s1.phases.height          # symbolic: not 3x the phases
    assert s3.summary()["phases"] == 3 * s1.phases.height  # expanded lazily
    assert s3.objects.filter(pl.col("kind") == "weight")["repeat_count"].unique().to_list() == [3]
    rel = s3.relocations
    assert rel["instance"].n_unique() == 3
    assert rel.group_by("object_id").len()["len"].unique().to_list() == [3]


def test_transfers_reference_staging_objects():
    c = toolkit.compile("mlp-single-b1", options={"row_block": 36, "inner_split": 1})
    s = c.schedule
    stage = s.objects.filter(pl.col("kind") == "staging")
    assert stage.height == s.transfers.select("phase", "destination").unique().height
    assert s.transfers["staging_object"].is_in(stage["object_id"].implode()).all()
    assert stage["size_bytes"].max() <= T.staging_window_bytes


def test_verify_catches_a_dropped_transfer():
    g = mlp_block(tokens=4, width=32, hidden=64)
    s = schedule(g, LayoutParams(row_block=2), T, tiles=8)
    broken = type(s)(**{**s.frames(), "transfers": s.transfers.slice(1)})
    with pytest.raises(InvalidIRError, match=r"nothing wrote|not filled exactly"):
        verify_schedule(broken)


def test_verify_catches_a_use_outside_lifetime():
    g = mlp_block(tokens=4, width=32, hidden=64)
    s = schedule(g, LayoutParams(row_block=2), T, tiles=8)
    objs = s.objects.with_columns(pl.when(pl.col("kind") == "activation").then(pl.col("first") + 100)
                                  .otherwise(pl.col("first")).alias("first"))
    broken = type(s)(**{**s.frames(), "objects": objs})
    with pytest.raises(InvalidIRError, match="outside its lifetime"):
        verify_schedule(broken)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g=graphs(), p=layout_params(), tiles=st.integers(1, 64))
def test_random_small_graphs_verify(g, p, tiles):
    s = schedule(g, p, T, tiles=tiles)
    verify_schedule(s)
    assert s.commands["tile"].max() < tiles
    assert (s.objects["last"] >= s.objects["first"]).all()
    assert s.summary()["phases"] == s.phases.height * max([1, *g.repeats["instances"].to_list()])


def test_folded_replicas_on_one_tile_get_separate_transfers():
    # 8-row blocks and 2-group panels fold several cells onto one tile of 64: a multicast may reach
    # two replicas on the same tile, which must become two transfers (no destination listed twice)
    g = toolkit.build_graph("mlp-small-repeat")
    s = schedule(g, LayoutParams(row_block=8, panel_groups=2), T, tiles=64)
    verify_schedule(s)
    assert s.transfers.group_by("transfer_id", "destination").len()["len"].max() == 1


def test_inner_split_reduce_scatters_the_panel_over_its_split_tiles():
    # fc1 of a 2-token MLP: inner 32 split in 2 (two tiles per 32-column panel); each split tile sums a 16-column
    # slice of both partials, so the reduce receives half a panel, not both whole partials
    g = mlp_block(tokens=2, width=32, hidden=32)
    s = schedule(g, LayoutParams(row_block=2, inner_split=2, panel_groups=2), T, tiles=8)
    verify_schedule(s)
    fc1 = s.commands.filter(pl.col("op_id") == 1)
    amp = fc1.filter(pl.col("kernel") == "amp_matmul_f8")   # FP8 weights: the FP8 AMP, FP16 partials
    red = fc1.filter(pl.col("kernel") == "reduce")
    assert (amp["dtype"] == "f8").all() and (amp["weight_class"] == "interleaved").all()
    assert amp.height == 2 and amp["cols"].to_list() == [32, 32] and amp["inner"].to_list() == [16, 16]
    assert red.height == 2 and red["cols"].to_list() == [16, 16] and red["inner"].to_list() == [2, 2]
    assert sorted(red["tile"].to_list()) == sorted(amp["tile"].to_list())   # both split tiles reduce
    partials = s.transfers.filter(pl.col("phase") == red["phase"][0] - 1)
    # each split tile sends the other one the half it reduces: 2 rows x 16 columns of FP16 partials
    assert partials.height == 2 and partials["size_bytes"].to_list() == [2 * 16 * 2] * 2
    out = s.objects.filter(pl.col("name") == "mlp.fc1.out")
    assert out["size_bytes"].to_list() == [2 * 16 * 2] * 2
    # the reduction is priced by the FP16 rule: 282 + 6 ceil(32 / 48) (11 + 2) + launch
    assert red["est_cycles"].to_list() == [282 + 6 * 13 + T.costs.launch_cycles] * 2
    # FP32 partials only when asked: twice the bytes on the wire and in memory
    s32 = schedule(g, LayoutParams(row_block=2, inner_split=2, panel_groups=2, partials="f32"), T, tiles=8)
    verify_schedule(s32)
    assert set(s32.commands.filter(pl.col("op_id") == 1)["kernel"].unique()) == {"amp_matmul_f8_p32", "reduce"}
    p32 = s32.transfers.filter(pl.col("phase") == red["phase"][0] - 1)
    assert p32["size_bytes"].to_list() == [2 * 16 * 4] * 2
