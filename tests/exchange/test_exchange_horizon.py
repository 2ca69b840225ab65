"""The exchange horizon model: cutovers, physical rows, paired sends, strided runs and staging passes."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from toolkit.costs import cutover_cycles, tile_horizon_cycles, tile_rows
from toolkit.exchange import lower_exchanges
from toolkit.exchange.horizon import activity_spans, phase_horizons, tile_horizons
from toolkit.target import ipu21

IPU = ipu21()
C = IPU.costs


def transfers(rows: list[tuple], **extra) -> pl.DataFrame:
    """(transfer_id, phase, source, destination, size_bytes, dst_offset) rows into one object per tile."""
    cols = ("transfer_id", "phase", "source", "destination", "size_bytes", "dst_offset")
    df = pl.DataFrame({c: [r[i] for r in rows] for i, c in enumerate(cols)})
    return df.with_columns(pl.lit(9).alias("dst_object"), pl.lit(3).alias("src_object"),
                           *(pl.lit(v).alias(k) for k, v in extra.items()))


def test_physical_rows_and_latency() -> None:
    # 46 rows of 2 paired tiles per 92-tile column; the arrival latency grows 2 events per row
    assert tile_rows([0, 1, 2, 91, 92, 93, 1471], IPU).tolist() == [0, 0, 1, 45, 0, 0, 45]
    assert cutover_cycles([0, 45], IPU).tolist() == [C.exchange_arrival_cycles + C.exchange_receive_cycles,
                                                      C.exchange_arrival_cycles + 90 + C.exchange_receive_cycles]
    # the longer lane wins: a tile receiving 100 words in 2 cutovers and sending 300 is send-bound
    assert tile_horizon_cycles(100, 2, 300, 1, 0, IPU).item() == 300 + C.exchange_send_cycles


def test_sources_interleaved_or_chained() -> None:
    # tile 4 receives 2 x 64 words from each of tiles 0 and 2: each source's runs chain, so 2 cutovers
    t = transfers([(1, 0, 0, 4, 256, 0), (2, 0, 0, 4, 256, 256), (3, 0, 2, 4, 256, 512), (4, 0, 2, 4, 256, 768)])
    ex = lower_exchanges(t, IPU)
    th = tile_horizons(ex.groups, ex.passes, IPU).filter(tile=4).row(0, named=True)
    assert (th["recv_words"], th["cutovers"]) == (256, 2)
    assert th["horizon"] == 256 + 2 * cutover_cycles(2, IPU)   # tile 4 sits in physical row 2
    # the same bytes with the second source's runs apart (a pointer gap) cost one cutover more
    gap = transfers([(1, 0, 0, 4, 256, 0), (2, 0, 0, 4, 256, 256), (3, 0, 2, 4, 256, 1024), (4, 0, 2, 4, 256, 1536)])
    ex2 = lower_exchanges(gap, IPU)
    assert tile_horizons(ex2.groups, ex2.passes, IPU).filter(tile=4)["cutovers"].item() == 3


def test_paired_sends_only_when_the_partner_is_idle() -> None:
    # tile 0 sends 400 words to tiles 2 and 4 (not a partner pair); its partner, tile 1, sends nothing: the send is
    # paired, half the events; the receives are not
    t = transfers([(1, 0, 0, 2, 1600, 0), (1, 0, 0, 4, 1600, 0)])
    th = tile_horizons(*(lambda e: (e.groups, e.passes))(lower_exchanges(t, IPU)), IPU)
    assert th.filter(tile=0).select("paired", "send_words").row(0) == (True, 200)
    assert th.filter(tile=2).select("recv_words", "recv_events").row(0) == (400, 400)
    busy = pl.concat([t, transfers([(2, 0, 1, 5, 8, 0)])])
    ex = lower_exchanges(busy, IPU)
    assert tile_horizons(ex.groups, ex.passes, IPU).filter(tile=0).select("paired", "send_words").row(0) == (
        False, 400)


@pytest.mark.parametrize(("dests", "size", "paired"), [((2, 3), 1600, True), ((2, 3, 6, 7), 1600, True),
                                                       ((2, 3, 6), 1600, False), ((2, 4), 1600, False),
                                                       ((2, 3), 1604, False)])
def test_a_transfer_to_whole_partner_pairs_is_paired_64_bit(dests: tuple, size: int, paired: bool) -> None:
    """ipu-stack's Paired64 width: every destination's partner (tile XOR 1) also a destination and a whole number
    of 8-byte units; then its sender and every receiver take half its words in events, and the sender holds its
    partner's transmit lane for them (tile 1 sends 10 words of its own: its lane carries 10 + the borrowed 200)."""
    words = size // 4
    t = transfers([(1, 0, 0, d, size, 0) for d in dests] + [(2, 0, 1, 9, 40, 0)])
    th = tile_horizons(*(lambda e: (e.groups, e.passes))(lower_exchanges(t, IPU)), IPU)
    events = words // 2 if paired else words
    for d in dests:
        assert th.filter(tile=d).select("recv_words", "recv_events").row(0) == (words, events)
    assert th.filter(tile=0)["send_words"].item() == events
    assert th.filter(tile=1)["send_words"].item() == 10 + (events if paired else 0)


@pytest.mark.parametrize(("c0", "c1", "runs"), [(0, 16, 0), (0, 48, 0), (16, 48, 0), (0, 24, 92), (24, 48, 92),
                                                (0, 47, 0)])
def test_strided_runs_are_pieces_cutting_a_panel_of_their_source_block(c0: int, c1: int, runs: int) -> None:
    # a 92-row FP16 piece of a 92 x 48 (or 47, the block's end) source block: cutting a 16-column panel means one
    # strided run per row, each costing the sender costs.exchange_run_cycles
    width = 47 if c1 == 47 else 48
    size = 92 * (c1 - c0) * 2
    t = transfers([(1, 0, 0, 2, size, 0)], tensor_id=0)
    slices = pl.DataFrame({"transfer_id": [1], "destination": [2], "g0": [0], "g1": [1], "r0": [0], "r1": [92],
                           "c0": [c0], "c1": [c1]})
    segments = pl.DataFrame({"object_id": [3], "tensor_id": [0], "g0": [0], "g1": [1], "r0": [0], "r1": [92],
                             "c0": [0], "c1": [width]})
    ex = lower_exchanges(t, IPU, slices=slices, segments=segments)
    assert ex.groups["runs"].sum() == runs
    plain = lower_exchanges(t, IPU)
    assert plain.groups["runs"].sum() == 0   # without the rectangles no transfer is known to cut a panel
    th = tile_horizons(ex.groups, ex.passes, IPU).filter(tile=0).row(0, named=True)
    words = size // 4
    assert th["horizon"] >= runs * C.exchange_run_cycles + -(-words // 2)


def test_staging_passes_run_one_after_another_with_a_sync() -> None:
    small = IPU.replace(staging_window_bytes=64)
    t = transfers([(1, 0, 0, 4, 64, 0), (2, 0, 2, 4, 64, 64)], staging_object=7)
    ex = lower_exchanges(t, small)
    assert ex.summary["passes"].item() == 2
    th = tile_horizons(ex.groups, ex.passes, small)
    ph = phase_horizons(th, small).row(0, named=True)
    one = 16 + cutover_cycles(2, small).item()
    assert ph["horizon"] == 2 * one + C.sync_cycles
    assert ph["est_cycles"] == ex.summary["est_cycles"].item() == ph["horizon"] + C.exchange_phase_cycles
    spans = activity_spans(ex.groups, ex.passes, small)
    assert sorted(spans["recv_end"].tolist()) == [one, 2 * one + C.sync_cycles]


def test_the_gemm_screen_prices_strided_result_pieces_as_the_lowering_does() -> None:
    # fc1 of the so400m MLP on 4x92x4: a 2 x 2 result grid cuts each 47/48-column partial into 23/24-column pieces
    # (not whole 16-column panels), so every row of a remote piece is a strided run; a 4 x 1 grid keeps whole rows
    from toolkit.graph import build_graph
    from toolkit.layout.gemm_screen import gemm_estimates
    from toolkit.layout.search import _prepare

    ops, tensors, reps = _prepare(build_graph("mlp-single-b1", weight_dtype="f16"))
    fc1 = next(o for o in ops if o["name"].endswith("fc1"))
    est = gemm_estimates(fc1, tensors, reps, np.array([4, 4]), np.array([92, 92]), np.array([4, 4]),
                         np.array([4, 2]), np.array([1, 2]), "f16", None, IPU, IPU.tiles)
    rows_4x1, rows_2x2 = -(-183 // 4 // 1), -(-183 // 4 // 2)   # piece rows: 46 and 92
    runs = 3 * rows_2x2                                          # three remote pieces of 92 strided rows
    assert rows_4x1 == 46
    assert est["exchange"][1] - est["exchange"][0] >= runs * C.exchange_run_cycles - 3 * cutover_cycles(45, IPU)
