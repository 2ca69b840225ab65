"""Staged reductions: the epochs take fixed partial groups, as the hardware's bounded reduction groups do."""

from __future__ import annotations

import polars as pl
import pytest

import toolkit
from toolkit.graph.builders import mlp_block
from toolkit.layout.gemm import parse_plan
from toolkit.layout.plans import LayoutParams
from toolkit.schedule import schedule

IPU = toolkit.ipu21()


@pytest.mark.parametrize(("staging", "epochs"), [("batched2", 3), ("streamed", 5)])
def test_an_epochs_senders_send_all_their_pieces(staging, epochs) -> None:
    """k = 6 partials per cell, each reduced on one of 6 result tiles: in every epoch only the partials of that
    epoch's group send (at most N + 1 per cell), and one of them sends all its k - 1 pieces, so no epoch spreads
    one piece over every inner tile of a cell (ipu-stack MLP_LAYOUT_ALTERNATIVES.md: epochs of ~one partial)."""
    g = mlp_block(tokens=24, width=32, hidden=47)
    p = LayoutParams(row_block=24, stream_block=1, plans=(("mlp.fc1", parse_plan("1x1x1")),
                                                          ("mlp.fc2", parse_plan(f"2x2x6/12x2 {staging}"))))
    s = schedule(g, p, IPU, tiles=32)
    fc2 = int(g.ops.filter(pl.col("name") == "mlp.fc2")["op_id"].item())
    phases = s.phases.filter((pl.col("op_id") == fc2) & (pl.col("kind") == "exchange"))["phase"].sort()[-epochs:]
    sends = (s.transfers.filter(pl.col("phase").is_in(phases.implode()))
             .group_by("phase", "source").len().with_columns((pl.col("source") // 6).alias("cell")))
    per_cell = sends.group_by("phase", "cell").agg(pl.len().alias("senders"), pl.col("len").max().alias("most"))
    n = 1 if staging == "streamed" else 2
    assert per_cell.height == epochs * 4
    assert per_cell["senders"].max() <= n + 1
    if n > 1:
        assert (per_cell["most"] == 5).all()
    else:   # streamed: epoch e's senders are partials e and e + 1, max(5 - e, e + 1) pieces
        assert per_cell.group_by("phase").agg(pl.col("most").max())["most"].sort().to_list() == [3, 4, 4, 5, 5]
