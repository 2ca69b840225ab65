import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolkit
from toolkit.errors import InfeasibleError, OptionError
from toolkit.layout import search_layouts
from toolkit.layout.cost import amp_cycles
from toolkit.options import Options, as_options


def test_amp_cell_cost_is_the_hardware_panel_formula():
    t = toolkit.ipu21()
    # one K16 x C16 panel with 36 rows: 294 call + (4 x 36 + 160) + 11 launch (HARDWARE.md section 1)
    cyc, calls, launches, cast = amp_cycles(36, 16, 16, t, weight_class="interleaved")
    assert calls == 1 and launches == 1 and cast == 0 and cyc == 294 + 144 + 160 + 11
    std, _, _, _ = amp_cycles(36, 16, 16, t, weight_class="standard")
    assert std > cyc
    # FP8: one K32 x C16 panel holds 32 deep, so K = 32 is still one panel; the FP16 left panel is cast first
    f8, _, l8, cast8 = amp_cycles(36, 16, 32, t, weight_class="interleaved", dtype="f8", cast=True)
    assert l8 == 1 and cast8 == 288 + 36 * 32 * 2 // 8 and f8 == 294 + 144 + 160 + 11 + cast8
    # inner_block splits the inner dimension into calls; each call pays the call and the launch again
    two, calls2, launches2, _ = amp_cycles(36, 16, 32, t, weight_class="interleaved", inner_block=16)
    assert calls2 == 2 and launches2 == 2 and two == 2 * (294 + 144 + 160 + 11)


def test_candidates_frame_and_choice():
    g = toolkit.build_graph("mlp-small-repeat")
    r = search_layouts(g, toolkit.ipu21(), Options())
    c = r.candidates
    assert c.height > 20 and c["chosen"].sum() == 1 and c["beam"].sum() >= 1
    assert set(c["row_block"].unique()) >= {8, 36, 96}
    best = c.filter(pl.col("chosen")).row(0, named=True)
    assert best["feasible"] and best["tiles_used"] <= 64
    assert c.filter(~pl.col("feasible"))["reject_reason"].null_count() == 0
    assert c["pareto"].any()


def test_pin_restricts_the_search():
    g = toolkit.build_graph("mlp-single-b1")
    r = search_layouts(g, toolkit.ipu21(), Options(row_block=18, inner_split=1, weight_class="interleaved"))
    assert r.candidates["row_block"].unique().to_list() == [18]
    assert r.chosen.row_block == 18


def test_unsatisfiable_pin_raises_infeasible_with_reason():
    g = toolkit.build_graph("encoder-b8")
    with pytest.raises(InfeasibleError, match=r"no layout candidate fits .* pins \{'row_block': 96, 'row_shard': 64"):
        search_layouts(g, toolkit.ipu21(), Options(row_block=96, row_shard=64, inner_split=1))


def test_options_reject_unknown_and_bad_values():
    with pytest.raises(OptionError, match="unknown option 'row_blok'; did you mean 'row_block'"):
        as_options({"row_blok": 18})
    with pytest.raises(OptionError, match="row_block=0 must be a positive integer"):
        as_options({"row_block": 0})
    with pytest.raises(OptionError, match="weight_class='fast'"):
        Options(weight_class="fast")
    with pytest.raises(OptionError, match="inner_block=40 is not a multiple"):
        Options(inner_block=40)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6), st.booleans()), min_size=1, max_size=30))
def test_pareto_front_matches_the_pairwise_definition(points):
    from toolkit.layout.search import pareto_front
    c = pl.DataFrame(points, schema=["est_cycles", "peak_live_bytes", "feasible"], orient="row")
    cyc, mem, ok = (c[k].to_numpy() for k in ("est_cycles", "peak_live_bytes", "feasible"))
    dom = ((cyc[None, :] <= cyc[:, None]) & (mem[None, :] <= mem[:, None])
           & ((cyc[None, :] < cyc[:, None]) | (mem[None, :] < mem[:, None])) & ok[None, :])
    assert pareto_front(c).to_list() == (ok & ~dom.any(axis=1)).tolist()
