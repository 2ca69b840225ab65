"""FP8 attention products: the options change the graph, the program and its price, and the check verifies them."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import toolkit
from toolkit.check import check
from toolkit.check.run import build_tables
from toolkit.graph import attention_block
from toolkit.graph.builders import Products
from toolkit.layout.cost import amp_cycles
from toolkit.numerics import encode
from toolkit.target import ipu21

TINY = {"tokens": 8, "width": 32, "heads": 2}


def _tiny(fused: bool, **products: str) -> toolkit.Compilation:
    g = attention_block(**TINY, fused_qkv=fused, products=Products(**products))
    return toolkit.compile(g, options={"tiles": 16, "fused_qkv": fused, "simulate": False})


def _dtypes(g) -> dict[str, str]:
    return dict(zip(g.tensors["name"].to_list(), g.tensors["dtype"].to_list(), strict=True))


def test_early_casts_store_the_operands_as_f143_and_late_ones_leave_them_fp16() -> None:
    late = toolkit.build_graph("attention-b1", qk_dtype="f8_143", pv_dtype="f8_143")
    early = toolkit.build_graph("attention-b1", qk_dtype="f8_143", qk_cast="early", pv_dtype="f8_143",
                                pv_cast="early")
    assert {_dtypes(late)[n] for n in ("attn.q.out", "attn.k.out", "attn.v.out", "attn.softmax.out")} == {"f16"}
    assert {_dtypes(early)[n] for n in ("attn.q.out", "attn.k.out", "attn.v.out", "attn.softmax.out")} == {"f8_143"}
    assert early.params["qk_dtype"] == "f8_143" and early.params["pv_cast"] == "early"
    qk_only = toolkit.build_graph("attention-b1", qk_dtype="f8_143", qk_cast="early")
    assert _dtypes(qk_only)["attn.v.out"] == "f16" and _dtypes(qk_only)["attn.softmax.out"] == "f16"


def test_bad_products_are_refused_by_name() -> None:
    with pytest.raises(toolkit.ModelError, match=r"qk_dtype='bf16' is not legal .* \('f16', 'f8_143'\)") as err:
        toolkit.build_graph("attention-b1", qk_dtype="bf16")
    assert err.value.field == "qk_dtype"
    with pytest.raises(toolkit.ModelError, match=r"fused QKV stores Q, K and V as one tensor") as err:
        toolkit.build_graph("attention-fused-b1", qk_dtype="f8_143", qk_cast="early")
    assert err.value.field == "qk_cast"
    with pytest.raises(toolkit.OptionError, match=r"pv_cast='now' must be one of"):
        toolkit.compile("attention-b1", options={"pv_dtype": "f8_143", "pv_cast": "now"})
    with pytest.raises(toolkit.OptionError, match=r"option qk_dtype=.* applies to a preset name or a Workload"):
        toolkit.compile(attention_block(**TINY), options={"qk_dtype": "f8_143"})


def test_the_fp8_amp_prices_k32_panels_and_the_casts() -> None:
    """Same cell, FP8 AMP: K in 32-deep panels (HARDWARE.md, costs.amp_panel_depth_f8); casts add their rule."""
    t = ipu21()
    f16 = amp_cycles(np.array([64]), np.array([729]), np.array([72]), t, weight_class="standard")[0]
    f8 = amp_cycles(np.array([64]), np.array([729]), np.array([72]), t, weight_class="standard", dtype="f8")[0]
    cast = amp_cycles(np.array([64]), np.array([729]), np.array([72]), t, weight_class="standard", dtype="f8",
                      cast=True, cast_right=True)
    assert f8[0] < f16[0]
    assert cast[0][0] == f8[0] + cast[3][0] and cast[3][0] > 0


@pytest.fixture(scope="module")
def base() -> toolkit.Compilation:
    return toolkit.compile("attention-b1", options={"simulate": False})


@pytest.mark.parametrize("products", [
    {"qk_dtype": "f8_143"}, {"qk_dtype": "f8_143", "qk_cast": "early"},
    pytest.param({"pv_dtype": "f8_143"}, marks=pytest.mark.slow),
    pytest.param({"pv_dtype": "f8_143", "pv_cast": "early"}, marks=pytest.mark.slow),
])
def test_the_options_change_the_program(base, products) -> None:
    c = toolkit.compile("attention-b1", options={"simulate": False, **products})
    op = "attn.scores" if "qk_dtype" in products else "attn.values"

    def product(comp) -> pl.DataFrame:
        oid = comp.graph.ops.filter(pl.col("name") == op)["op_id"].item()
        return comp.schedule.commands.filter((pl.col("op_id") == oid) & pl.col("kernel").str.starts_with("amp"))

    before, after = product(base), product(c)
    assert set(before["kernel"].str.replace("_p32", "")) == {"amp_matmul_f16"}
    assert set(after["kernel"].str.replace("_p32", "")) == {"amp_matmul_f8"}
    # the product's own AMP cycles drop (K32 panels); late casts are priced on the product, early ones upstream
    busy = (after["est_cycles"] - after["cast_cycles"]).max()
    assert busy < (before["est_cycles"] - before["cast_cycles"]).max()
    cast = products.get("qk_cast", products.get("pv_cast", "late"))
    assert (after["cast_cycles"].max() > 0) == (cast == "late")
    if cast == "early":   # operands stored as F143: fewer bytes exchanged into the product, and fewer cycles
        assert c.lowered_cycles() < base.lowered_cycles()


@pytest.mark.parametrize(("fused", "products"), [
    (False, {"qk_dtype": "f8_143"}),
    (False, {"pv_dtype": "f8_143", "pv_cast": "early"}),
    (False, {"qk_dtype": "f8_143", "qk_cast": "early", "pv_dtype": "f8_143"}),
    (True, {"qk_dtype": "f8_143", "pv_dtype": "f8_143"}),
    (True, {"qk_dtype": "f8_143", "qk_cast": "early", "pv_dtype": "f8_143", "pv_cast": "early"}),
])
def test_the_check_passes_fp8_products(fused, products) -> None:
    c = _tiny(fused, **products)
    r = check(c)
    assert r.passed, r.message
    assert r.max_abs_error < 0.1 and r.max_rel_error < 0.05
    kernels = set(c.schedule.commands["kernel"].str.replace("_p32", ""))
    fp16_product = "f16" in (products.get("qk_dtype", "f16"), products.get("pv_dtype", "f16"))
    assert ("amp_matmul_f16" in kernels) == fp16_product   # the projections run FP8 either way


def test_early_casts_are_the_f143_rule_bit_for_bit() -> None:
    """The softmax writes its probabilities as F143 codes at the check's scale: exactly numerics.encode of the
    FP32 result (the check compares what it read with what the producer wrote, bit for bit)."""
    c = _tiny(False, pv_dtype="f8_143", pv_cast="early")
    r = check(c)
    assert r.passed, r.message
    soft = r.operands.filter((pl.col("op") == "attn.softmax") & (pl.col("operand") == "output"))
    read = r.operands.filter((pl.col("op") == "attn.values") & (pl.col("operand") == "input0"))
    assert soft["mismatches"].sum() == 0 and read["mismatches"].sum() == 0 and read["max_abs_error"].max() == 0
    t = build_tables(c.schedule, c.graph)
    p_id = c.graph.tensors.filter(pl.col("name") == "attn.softmax.out")["tensor_id"].item()
    assert (t.obytes[t.otensor == p_id] == 1).all()          # one byte per probability: F143 codes
    x = np.linspace(0, 1, 101)
    assert np.array_equal(encode(x, "f143", -4), encode(x.astype(np.float32), "f143", -4))


def test_an_inner_split_fp8_values_product_writes_partials_and_is_checked() -> None:
    """PV split over keys (its partials reduced, as attention-fused-b1's values=4x1x23): the FP8 kernel's
    partials are not the output tensor."""
    g = attention_block(tokens=64, width=32, heads=2, products=Products(pv_dtype="f8_143"))
    c = toolkit.compile(g, options={"tiles": 16, "fused_qkv": False, "simulate": False,
                                    "plans": {"attn.values": "2x1x2"}})
    values = c.graph.ops.filter(pl.col("name") == "attn.values")["op_id"].item()
    kernels = set(c.schedule.commands.filter(pl.col("op_id") == values)["kernel"])
    assert "reduce" in kernels and any(k.startswith("amp_matmul_f8") for k in kernels)
    r = check(c)
    assert r.passed, r.message
