"""The exchange stage on scheduled preset workloads (skipped until the schedule stage is importable)."""

from __future__ import annotations

import polars as pl
import pytest

from toolkit.exchange import lower_exchanges, verify_exchange
from toolkit.target import ipu21

schedule_mod = pytest.importorskip("toolkit.schedule")
presets = pytest.importorskip("toolkit.graph.presets")
plans = pytest.importorskip("toolkit.layout.plans")


def lowered(name: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    target = ipu21()
    transfers = schedule_mod.schedule(presets.build_graph(name), plans.LayoutParams(), target).transfers
    ex = lower_exchanges(transfers, target)
    verify_exchange(ex, transfers, target)
    return transfers, ex.summary


@pytest.mark.parametrize("name", ["mlp-small-repeat", pytest.param("encoder-b8", marks=pytest.mark.slow)])
def test_unicast_phases_meet_the_bound(name: str) -> None:
    _, summary = lowered(name)
    unicast = summary.filter(pl.col("multicast_groups") == 0)
    assert (unicast["steps"] == unicast["lower_bound"]).all()
    assert (summary["steps"] >= summary["lower_bound"]).all()
