"""Where weights are stored against where the AMP reads them, and the kernel costs of older ipu-stack builds."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import toolkit
from toolkit.costs import kernel_cycles
from toolkit.errors import OptionError
from toolkit.graph.builders import mlp_block
from toolkit.layout.cost import compute_class
from toolkit.target import KERNEL_BUILDS, ipu21, with_kernel_build


def _matmuls(weight_dtype: str, fc2: str) -> pl.DataFrame:
    g = mlp_block(tokens=24, width=64, hidden=96, weight_dtype=weight_dtype)
    c = toolkit.compile(g, options={"plans": {"fc1": "2x3x2", "fc2": fc2}, "tiles": 24, "simulate": False})
    fc2_id = c.graph.ops.filter(pl.col("name").str.ends_with("fc2"))["op_id"].item()
    return c.schedule.commands.filter((pl.col("op_id") == fc2_id) & pl.col("kernel").str.starts_with("amp"))


def test_fp16_weights_stored_standard_are_read_from_interleaved_compute_storage() -> None:
    """ipu-stack materializes FP16 weights into interleaved compute storage whatever input class a plan asks
    for (its MLP sweep: the standard-input down projection ran the same GEMM kernels): the same kernels and
    cycles as the interleaved plan, and the weight objects are interleaved."""
    std, inter = _matmuls("f16", "2x2x3 standard"), _matmuls("f16", "2x2x3 interleaved")
    assert set(std["weight_class"]) == {"interleaved"}
    assert std["est_cycles"].to_list() == inter["est_cycles"].to_list()
    assert compute_class("standard", "f16") == "interleaved"


def test_fp8_weights_are_read_from_the_class_they_are_stored_in() -> None:
    std, inter = _matmuls("f8_143", "2x2x3 standard"), _matmuls("f8_143", "2x2x3 interleaved")
    assert set(std["weight_class"]) == {"standard"} and set(inter["weight_class"]) == {"interleaved"}
    assert std["est_cycles"].sum() > inter["est_cycles"].sum()
    assert compute_class("standard", "f8") == "standard"


def test_the_2026_09_06_build_prices_its_documented_worker_loops() -> None:
    """docs/MLP_LAYOUT_SWEEP.md: reduction 282 + 6 ceil(n / 48) (9 + 6 (P - 1)), aligned GELU
    300 + 558 ceil(n / 96); the current build keeps HARDWARE.md's rules."""
    old, now = with_kernel_build(ipu21(), "2026-09-06"), with_kernel_build(ipu21(), "current")
    assert now == ipu21()
    n, p = np.array([2208, 96, 4800]), np.array([4, 2, 28])
    frame = pl.DataFrame({"kernel": "reduce", "dtype": "f16", "weight_class": None, "rows": 1, "cols": n,
                          "inner": p}, schema_overrides={"weight_class": pl.String})
    want = [282 + 6 * math.ceil(e / 48) * (9 + 6 * (k - 1)) for e, k in zip(n, p, strict=True)]
    assert kernel_cycles(frame, old).to_list() == want
    assert kernel_cycles(frame, now).to_list() == [282 + 6 * math.ceil(e / 48) * (11 + 2 * (k - 1))
                                                   for e, k in zip(n, p, strict=True)]
    gelu = pl.DataFrame({"kernel": "gelu", "dtype": "f16", "weight_class": None, "rows": 1,
                         "cols": [96, 960, 4608], "inner": 0}, schema_overrides={"weight_class": pl.String})
    assert kernel_cycles(gelu, old).to_list() == [300 + 558 * math.ceil(e / 96) for e in (96, 960, 4608)]
    # off the 16-element grid (the historical fc1 result, 46 x 47): the old main loop was two-lane already, so
    # its 48-pair blocks cost 558 as aligned ones do; the later kernel's pair path is cheaper than that
    odd = gelu.with_columns(pl.Series("rows", [46] * 3), pl.Series("cols", [47] * 3)).head(1)
    assert kernel_cycles(odd, old).item() == 300 + 558 * math.ceil(46 * 47 / 96)
    assert kernel_cycles(odd, now).item() < kernel_cycles(odd, old).item()


def test_kernel_build_is_an_option_and_refused_by_name() -> None:
    g = mlp_block(tokens=24, width=64, hidden=96, weight_dtype="f16")
    opts = {"plans": {"fc1": "2x3x2", "fc2": "2x2x3"}, "tiles": 24, "simulate": False}
    now = toolkit.compile(g, options=opts)
    old = toolkit.compile(g, options={**opts, "kernel_build": "2026-09-06"})
    assert old.target.costs.reduce_partial_cycles == KERNEL_BUILDS["2026-09-06"]["reduce_partial_cycles"]
    red = pl.col("kernel") == "reduce"
    assert old.schedule.commands.filter(red)["est_cycles"].sum() > now.schedule.commands.filter(red)[
        "est_cycles"].sum()
    with pytest.raises(OptionError, match=r"kernel_build='2026-09-08' must be one of") as e:
        toolkit.compile(g, options={**opts, "kernel_build": "2026-09-08"})
    assert (e.value.field, e.value.value) == ("kernel_build", "2026-09-08")


def test_builders_take_a_dtype_by_name_and_refuse_an_unknown_one() -> None:
    from toolkit.errors import ModelError
    g = mlp_block(tokens=4, width=32, hidden=32, weight_dtype="f16")
    assert set(g.tensors.filter(pl.col("role") == "weight")["dtype"]) == {"f16"}
    with pytest.raises(ModelError, match=r"dtype 'f17'; use one of") as e:
        mlp_block(tokens=4, width=32, hidden=32, weight_dtype="f17")
    assert (e.value.field, e.value.value) == ("dtype", "f17")


def test_fp16_weights_stored_standard_are_materialized_in_the_preamble() -> None:
    """The standard-class input of an F16 weight is copied into its interleaved compute storage (the copy rule,
    one command per shard on its own tile) in a preamble phase before the initial sync; the AMP reads the copy.
    On hardware that conversion falls outside the renderer's interval (MLP_LAYOUT_SWEEP.md: standard input ran
    faster with the same GEMM work): a tile with no shard to copy starts the cropped interval after it."""
    from toolkit.profile import crop
    from toolkit.schedule.program import PREAMBLE
    from toolkit.simulate.run import INITIAL_SYNC
    g = mlp_block(tokens=24, width=64, hidden=96, weight_dtype="f16")
    runs = {}
    for cls in ("standard", "interleaved"):
        runs[cls] = toolkit.compile(g, options={"plans": {"fc1": "2x3x2", "fc2": f"2x2x3 {cls}"}, "tiles": 24})
    c = runs["standard"]
    pre = c.schedule.phases.filter(pl.col("block") == PREAMBLE)
    assert pre.height == 1 and pre["phase"].item() == 0 and pre["name"].item().endswith("fc2")
    copies = c.schedule.commands.filter(pl.col("phase") == 0)
    assert set(copies["kernel"]) == {"copy"}
    w = c.schedule.objects.filter(pl.col("kind") == "weight")
    compute = w.filter(pl.col("name").str.ends_with(".interleaved"))
    moved = compute["tensor_id"].unique().implode()
    stored = w.filter(pl.col("tensor_id").is_in(moved) & (pl.col("class") == "standard"))
    assert set(compute["class"]) == {"interleaved"} and copies.height == compute.height == stored.height
    size = stored["size_bytes"].max()
    assert copies["est_cycles"].max() == 288 + -(-size // 8)
    amp = [r.schedule.commands.filter(pl.col("kernel").str.starts_with("amp"))["est_cycles"].to_list()
           for r in runs.values()]
    assert amp[0] == amp[1]
    s = c.profile.samples.sort("tile", "sample")
    first = s.group_by("tile", maintain_order=True).first()
    copying = set(copies["tile"])
    assert (first.filter(pl.col("tile").is_in(list(copying)))["phase"] == 0).all()
    idle = first.filter(~pl.col("tile").is_in(list(copying)))
    assert idle.height and (idle["operation"] == INITIAL_SYNC).all()
    assert crop(c.profile).origin_cycle == idle["start_cycle"].min() == copies["est_cycles"].max()
