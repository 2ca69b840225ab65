"""N-way comparison charts, read through ``to_dict()``: keys, compared names, widths, errors."""

from __future__ import annotations

import polars as pl
import pytest

import toolkit
from toolkit.errors import OptionError
from toolkit.profile import compare
from toolkit.profile.synthetic import synthetic_profile
from toolkit.viz import delta_chart, peak_delta_heatmap

TARGET = toolkit.ipu21()


def programs(n: int = 3, ops: int = 30) -> pl.DataFrame:
    """A compare_programs-shaped frame: n compilations, ``ops`` ops x 2 kinds, known deltas."""
    key = pl.DataFrame({"op": [f"op{i}" for i in range(ops) for _ in (0, 1)],
                        "kind": ["compute", "exchange"] * ops})
    names = [f"c{i}" for i in range(n)]
    cols = {f"{name}_cycles": [1000 + 10 * j * r for r in range(2 * ops)] for j, name in enumerate(names)}
    cols |= {f"{name}_bytes": [100 * (j + 1) * (r % 2) for r in range(2 * ops)] for j, name in enumerate(names)}
    out = key.with_columns(**{k: pl.Series(v) for k, v in cols.items()})
    return out.with_columns(*((pl.col(f"{n}_cycles") - pl.col("c0_cycles")).alias(f"{n}_delta_cycles")
                              for n in names[1:]))


def rows(spec: dict) -> list[dict]:
    return next(iter(spec["datasets"].values()))


def test_delta_chart_n_way_top_rows_fixed_width():
    spec = delta_chart(programs(n=4), top=10).to_dict()
    data = rows(spec)
    assert {r["compared"] for r in data} == {"c1", "c2", "c3"}   # every later compilation against the first
    keys = spec["encoding"]["y"]["sort"]
    assert len(keys) == 10 and keys[0] == "op29 · exchange"       # the largest change first
    assert {r["key"] for r in data} == set(keys)
    assert spec["width"] == 640
    assert spec["title"][0] == "change in cycles (lowered estimate) against c0, per op · phase kind"
    assert spec["title"][1].startswith("the 10 largest of 60 rows")
    assert all(r["delta"] == 10 * int(r["compared"][1]) * (2 * int(r["key"].split(" ")[0][2:])
                                                            + (r["key"].endswith("exchange"))) for r in data)


def test_delta_chart_bytes_is_computed_from_the_bytes_columns():
    data = rows(delta_chart(programs(n=3, ops=5), metric="bytes").to_dict())
    assert {(r["key"].split(" · ")[1], r["compared"], r["delta"]) for r in data} == {
        ("compute", "c1", 0), ("compute", "c2", 0), ("exchange", "c1", 100), ("exchange", "c2", 200)}


def test_delta_chart_on_profile_comparison():
    a, b, c = (synthetic_profile(tiles=6, samples_per_tile=8, seed=s) for s in (1, 2, 3))
    frame = compare(a, b, c, by="kernel", names=["a", "b", "c"])
    spec = delta_chart(frame).to_dict()
    assert spec["encoding"]["y"]["title"] == "kernel"
    assert {r["compared"] for r in rows(spec)} <= {"b", "c"}


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"metric": "seconds"}, r"metric='seconds' is not a comparison metric"),
    ({"top": 0}, r"top=0 must be a positive number"),
])
def test_delta_chart_bad_options(kwargs, match):
    with pytest.raises(OptionError, match=match):
        delta_chart(programs(), **kwargs)


def test_delta_chart_needs_two_compared():
    with pytest.raises(OptionError, match="a delta needs two or more"):
        delta_chart(programs().select("op", "kind", "c0_cycles"))
    with pytest.raises(OptionError, match="no '<name>_cycles' columns"):
        delta_chart(pl.DataFrame({"op": ["a"]}))


def test_peak_delta_heatmap_one_panel_per_later_compilation():
    tiles = pl.Series("tile", range(TARGET.tiles), dtype=pl.Int32)
    frame = pl.DataFrame({"tile": tiles, "a_peak_bytes": 1000, "b_peak_bytes": tiles * 2, "c_peak_bytes": 500})
    frame = frame.with_columns((pl.col("b_peak_bytes") - pl.col("a_peak_bytes")).alias("b_delta_bytes"),
                               (pl.col("c_peak_bytes") - pl.col("a_peak_bytes")).alias("c_delta_bytes"))
    spec = peak_delta_heatmap(frame, TARGET).to_dict()
    data = rows(spec)
    assert len(data) == 2 * TARGET.tiles and {r["compared"] for r in data} == {"b", "c"}
    assert spec["facet"]["column"]["field"] == "compared"
    assert 2 * spec["spec"]["width"] <= 640   # both panels inside the notebook width
    domain = spec["spec"]["encoding"]["color"]["scale"]["domain"]
    assert domain == [-1942, 1942]   # symmetric about zero: tile 1471 holds 2942 - 1000 more
    with pytest.raises(OptionError, match="no '<name>_delta_bytes' columns"):
        peak_delta_heatmap(frame.select("tile", "a_peak_bytes", "b_peak_bytes"), TARGET)


def test_titles_fit_their_chart_and_one_line_stays_a_string():
    """VegaFusion fails on a one-element title list with a ';' in it; long titles wrap to the chart's width."""
    from toolkit.viz.text import TITLE_CHAR_PX, fit_title
    assert fit_title("a; b", 300) == "a; b"
    long = fit_title(["head", "chosen: " + "; ".join(f"op{i}=10x24x6" for i in range(30))], 560)
    assert long[0] == "head" and len(long) > 2
    assert all(len(line) * TITLE_CHAR_PX <= 560 for line in long)
    assert " ".join(long[1:]).split() == ("chosen: " + "; ".join(f"op{i}=10x24x6" for i in range(30))).split()


def _ticks_clear(spec: dict, width: int = 640) -> list[int]:
    """The delta axis's tick values: 0 among them, labelled, none hidden, and far enough apart that the widest
    label clears its neighbours (Vega hid the overlapping ones, the zero among them)."""
    from toolkit.viz.text import LABEL_CHAR_PX
    x = spec["encoding"]["x"]
    ticks = x["axis"]["values"]
    assert 0 in ticks and "0 (no change)" in x["axis"]["labelExpr"] and x["axis"]["labelOverlap"] is False
    assert x["scale"]["domain"] == [ticks[0], ticks[-1]]
    widest = max(len("0 (no change)") if t == 0 else len(f"{t:,}") for t in ticks) * LABEL_CHAR_PX
    if len(ticks) > 1:
        assert width * (ticks[1] - ticks[0]) / (ticks[-1] - ticks[0]) >= widest
    deltas = [r["delta"] for r in rows(spec)]
    assert ticks[0] <= min(deltas) and max(deltas) <= ticks[-1]
    return ticks


@pytest.mark.parametrize("scale", [1, 37, 1_000, 250_000, 40_000_000])
def test_every_delta_axis_labels_its_zero_and_no_label_is_hidden(scale: int) -> None:
    frame = programs(n=3, ops=6).with_columns(pl.col("c2_cycles") * -scale, pl.col("c1_cycles") * scale)
    for metric in ("cycles", "bytes"):
        _ticks_clear(delta_chart(frame, metric=metric).to_dict())


def test_every_delta_chart_says_what_its_numbers_are_and_their_scope() -> None:
    a, b = (synthetic_profile(tiles=6, samples_per_tile=8, seed=s) for s in (1, 2))
    kernels = delta_chart(compare(a, b, by="kernel", names=["a", "b"])).to_dict()
    assert kernels["title"][0] == "change in work cycles (summed over tiles) against a, per kernel"
    assert kernels["encoding"]["x"]["title"] == "work cycles (summed over tiles) minus a's"
    phases = delta_chart(compare(a, b, by="phase", names=["a", "b"])).to_dict()
    assert phases["title"][0].startswith("change in span cycles (first start to last end) against a")
    program = delta_chart(programs()).to_dict()
    assert program["title"][0] == "change in cycles (lowered estimate) against c0, per op · phase kind"
    assert delta_chart(programs(), metric="bytes").to_dict()["encoding"]["x"]["title"] == \
        "bytes exchanged (lowered) minus c0's"


def test_a_program_comparison_counts_a_missing_op_as_zero_in_its_delta_as_its_chart_draws_it() -> None:
    """The table said null where the delta chart drew the whole cost (as compare() once did for kernels)."""
    from toolkit.report import compare_programs
    with_ln = toolkit.compile("mlp-block-small-repeat", options={"row_block": 36})
    without = toolkit.compile(toolkit.build_graph("mlp-block-small-repeat", layernorm=False), options={"row_block": 36})
    frame = compare_programs({"a": with_ln, "b": without})
    ln = frame.filter(pl.col("op") == "mlp.ln").row(0, named=True)
    assert ln["b_cycles"] is None and ln["b_delta_cycles"] == -ln["a_cycles"] != 0
    drawn = {r["key"]: r["delta"] for r in rows(delta_chart(frame).to_dict())}
    table = {f"{r['op']} · {r['kind']}": r["b_delta_cycles"] for r in frame.iter_rows(named=True)}
    assert drawn == {k: v for k, v in table.items() if k in drawn} and drawn["mlp.ln · compute"] == ln["b_delta_cycles"]
