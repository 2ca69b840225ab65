import polars as pl
import pytest

import toolkit
from toolkit.errors import InfeasibleError, OptionError
from toolkit.layout import search_layouts
from toolkit.layout.cost import amp_cycles
from toolkit.options import Options, as_options


def test_amp_microblock_cost_matches_design():
    t = toolkit.ipu21()
    # one 16 x 16 microblock with 36 rows: 294 call + (ceil(16*36/4) + ceil(940/4)) + 11 launch
    cyc, calls, launches = amp_cycles(36, 16, 16, t, interleaved=True)
    assert calls == 1 and launches == 1 and cyc == 294 + 144 + 235 + 11
    std, _, _ = amp_cycles(36, 16, 16, t, interleaved=False)
    assert std > cyc


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
