"""Swapped Q / K projections unpack their results for the scores, separately or grouped on disjoint owners; the
attention then packs Q on every scores cell and prepares K and V on panel owners, as the real compiler does."""

from __future__ import annotations

import polars as pl
import pytest

import toolkit
from toolkit.costs import cycles
from toolkit.errors import OptionError
from toolkit.graph import attention_block
from toolkit.layout.cost import unpack_cycles
from toolkit.target import ipu21

TINY = {"tokens": 32, "width": 64, "heads": 2}
SWAPPED = {x: "2x4x2/2x4 swapped" for x in "qkv"}   # one result owner per cell: the other inner tile is free


def _compile(prep: str, plans: dict[str, str] | None = None, **extra) -> toolkit.Compilation:
    g = attention_block(**TINY, fused_qkv=False)
    names = {op.rsplit(".", 1)[-1]: op for op in g.ops["name"].to_list()}
    pins = {names[k]: v for k, v in (SWAPPED if plans is None else plans).items()}
    return toolkit.compile(g, options={"tiles": 32, "fused_qkv": False, "plans": pins, "qk_preparation": prep,
                                       "simulate": False, **extra})


def _unpacks(c: toolkit.Compilation) -> pl.DataFrame:
    names = dict(zip(c.graph.ops["op_id"].to_list(), c.graph.ops["name"].to_list(), strict=True))
    return (c.schedule.commands.filter(pl.col("kernel") == "unpack")
            .with_columns(pl.col("op_id").replace_strict(names, return_dtype=pl.String).alias("op")))


def test_the_unpack_rule_is_the_worker_rule_on_16_column_micro_panels() -> None:
    c = ipu21().costs
    # 16 tokens x 116 features (the 46 x 10 result grid's owner): 2 row passes of 64 column pairs
    assert int(cycles("unpack", ipu21(), rows=16, cols=116)) == c.unpack_call_cycles + 2 * (100 + 64 * 90) == 12_020
    assert int(unpack_cycles(16, 116, ipu21())) == 12_020 + c.launch_cycles
    assert int(cycles("unpack", ipu21(), rows=12, cols=113)) == int(cycles("unpack", ipu21(), rows=1, cols=128))
    assert int(cycles("unpack", ipu21(), rows=13, cols=16)) == 300 + 2 * (100 + 8 * 90)
    assert int(cycles("unpack", ipu21(), rows=0, cols=16)) == 0
    # the hardware figure that isolates one: grouping the Q and K unpacks saved one phase, 12,576 cycles
    # (docs/QKV_PREPARATION.md), i.e. one 16 x 116 unpack and the phase's 600-cycle sync
    assert abs(12_020 + ipu21().costs.sync_cycles - 12_576) / 12_576 < 0.01


def test_separate_unpacks_q_and_k_each_in_its_own_phase_and_never_v() -> None:
    c = _compile("separate")
    u = _unpacks(c)
    assert set(u["op"].str.split(".").list.last()) == {"q", "k"}
    phases = c.schedule.phases
    for op, grp in u.group_by("op"):
        last = phases.filter(pl.col("name") == op[0])["phase"].max()
        assert grp["phase"].unique().to_list() == [last]   # the projection's own last compute phase
    per = u.group_by("op").agg((pl.col("rows") * pl.col("cols")).sum().alias("elements"))
    assert per["elements"].to_list() == [TINY["tokens"] * TINY["width"]] * 2   # every Q and K element once


def test_grouped_runs_both_unpacks_in_one_phase_on_disjoint_owners() -> None:
    sep, grp = _compile("separate"), _compile("grouped")
    u = _unpacks(grp)
    assert u["phase"].n_unique() == 1
    q, k = (set(u.filter(pl.col("op").str.ends_with(x))["tile"].to_list()) for x in (".q", ".k"))
    assert q and k and not q & k
    phase_max = u.group_by("tile").agg(pl.col("est_cycles").sum())["est_cycles"].max()
    assert phase_max == u["est_cycles"].max()   # no tile runs two unpacks
    assert grp.summary()["lowered_cycles"][0] < sep.summary()["lowered_cycles"][0]


def test_normal_projections_unpack_nothing() -> None:
    c = _compile("grouped", {k: v.replace(" swapped", "") for k, v in SWAPPED.items()})
    assert _unpacks(c).height == 0
    assert c.schedule.commands.filter(pl.col("kernel").str.starts_with("rearrange")).height == 0
    assert c.schedule.objects.filter(pl.col("name").str.ends_with(".panels")).height == 0


@pytest.mark.parametrize("grids", [{}, {"scores": "2x2x1", "values": "2x1x2"}])
def test_transposed_operands_are_prepared_as_the_real_compiler_does(grids: dict) -> None:
    """Q: every scores cell rearranges its own query rows into the AMP's left order before its GEMM; K: moved onto
    64 x 16 panels (one per owner) and rearranged there into the transposed-right order; V: moved onto whole-key
    16-column panels and copied from there (ipu-stack's materialized attention, docs/QKV_PREPARATION.md)."""
    c = _compile("separate", {**SWAPPED, **grids}, check=True)
    assert c.check.passed, c.check.message
    cmd, ph = c.schedule.commands, c.schedule.phases
    names = dict(zip(c.graph.ops["op_id"].to_list(), c.graph.ops["name"].to_list(), strict=True))
    op = {n.rsplit(".", 1)[-1]: i for i, n in names.items()}
    scores = cmd.filter((pl.col("op_id") == op["scores"]) & pl.col("kernel").str.starts_with("amp"))
    left = cmd.filter(pl.col("kernel") == "rearrange_left")
    assert left["op_id"].unique().to_list() == [op["scores"]] and left.height == scores.height
    assert sorted(left.select("phase", "tile").rows()) == sorted(scores.select("phase", "tile").rows())
    hd, heads = TINY["width"] // TINY["heads"], TINY["heads"]
    assert left["cols"].unique().to_list() == [hd] and int(left["rows"].sum()) == TINY["tokens"] * heads * (
        2 if grids else 1)   # a 2 x 2 grid reads every query row on both key shards
    right = cmd.filter(pl.col("kernel") == "rearrange_right")
    assert right.height == heads * -(-hd // 16) and right["cols"].unique().to_list() == [16]
    assert right["tile"].n_unique() == right.height   # one panel per owner
    assert right["phase"].max() < scores["phase"].min()
    panels = c.schedule.objects.filter(pl.col("name").str.ends_with(".panels"))
    by = panels.group_by("tensor_id").agg(pl.len(), pl.col("size_bytes").sum())
    assert sorted(by["len"].to_list()) == [heads * -(-hd // 16)] * 2
    assert by["size_bytes"].unique().to_list() == [TINY["tokens"] * TINY["width"] * 2]   # every K / V element once
    v_prep = ph.filter((pl.col("op_id") == op["values"]) & (pl.col("kind") == "exchange"))
    assert v_prep.height >= 2   # the panels' exchange, then the product's own


@pytest.mark.parametrize("prep", ["separate", "grouped"])
def test_the_check_passes_with_unpacked_and_moved_owners(prep: str) -> None:
    c = _compile(prep, check=True)
    assert c.check.passed, c.check.message


def test_a_bad_preparation_is_refused_by_name() -> None:
    with pytest.raises(OptionError, match="qk_preparation='batched'") as e:
        _compile("batched")
    assert e.value.field == "qk_preparation"


def test_a_fused_projection_unpacks_its_q_and_k_columns_only() -> None:
    g = attention_block(**TINY, fused_qkv=True)
    qkv = next(op for op in g.ops.iter_rows(named=True) if op["rule"] == "linear")
    c = toolkit.compile(g, options={"tiles": 32, "fused_qkv": True, "plans": {qkv["name"]: "2x4x2/2x4 swapped"},
                                    "simulate": False, "check": True})
    u = _unpacks(c)
    assert u["op"].unique().to_list() == [qkv["name"]]
    assert int((u["rows"] * u["cols"]).sum()) == TINY["tokens"] * 2 * TINY["width"]   # Q and K, not V
    assert c.check.passed, c.check.message
