"""Exchange work: payload at the link rate against control work, per tile and per group (HARDWARE.md section 4)."""

from __future__ import annotations

import numpy as np

from toolkit.costs.kernels import _cdiv
from toolkit.target import Target


def exchange_cycles(payload_bytes, control, target: Target) -> np.ndarray:
    """One tile's exchange work: ``max(payload / 4 B per cycle, control)`` (HARDWARE.md section 4).

    ``control`` is the tile's control work in cycles (:func:`control_cycles`).
    Fragments are nearly free on hardware (two exchanges with 134 and 244
    fragments were scheduled 4 cycles apart), so there is no per-fragment charge.
    """
    return np.maximum(_cdiv(payload_bytes, target.exchange_bytes_per_cycle), np.asarray(control, dtype=np.int64))


def control_cycles(sends, receives, resets, target: Target) -> np.ndarray:
    """Exchange control work: 2 cycles per send, 2 per receive, 1 per pointer reset (HARDWARE.md section 4)."""
    c = target.costs
    return (np.asarray(sends, np.int64) * c.exchange_send_cycles + np.asarray(receives, np.int64)
            * c.exchange_receive_cycles + np.asarray(resets, np.int64) * c.exchange_reset_cycles)


def group_cycles(words, packets, target: Target) -> np.ndarray:
    """One exchange group (one source's fragment to its destinations in one step).

    ``max(payload at 4 B/cycle, control)``: the source issues one send per
    packet and every destination one receive per packet, each with one
    pointer reset, and the two ends run at once, so the control work is
    ``2 packets + 1`` cycles on either end.
    """
    payload = np.asarray(words, dtype=np.int64) * target.word_bytes
    return exchange_cycles(payload, control_cycles(packets, 0, 1, target), target)


def phase_overhead_cycles(target: Target) -> int:
    """Cycles an exchange phase runs past its scheduled horizon (measured 230-280 per phase)."""
    return int(target.costs.exchange_phase_cycles)


# -- the exchange horizon: how the real scheduler lays out one tile's part of a phase ---------------------------
def tile_rows(tiles, target: Target) -> np.ndarray:
    """Physical exchange row of each tile: ``(tile mod column tiles) // row tiles`` (46 rows of 2 paired tiles per
    92-tile column on ipu21; ipu-stack MLP_LAYOUT_ALTERNATIVES.md's 46x2 mapping grid)."""
    c = target.costs
    return (np.asarray(tiles, dtype=np.int64) % c.exchange_column_tiles) // c.exchange_row_tiles


def max_tile_row(target: Target) -> int:
    """The highest physical row a tile of ``target`` sits in (the busiest tile of a phase is taken to be there
    when only the phase's busiest load is known, as in the layout screen)."""
    return int(tile_rows(min(target.tiles, target.costs.exchange_column_tiles) - 1, target))


def cutover_cycles(rows, target: Target) -> np.ndarray:
    """Receive cutover: a receive that does not continue the previous one's source and pointer waits for that
    payload to land before selecting its source, then its own payload arrives ``52 + 2 x row`` events later
    (ipu-stack EXCHANGE_INSTRUCTION_REFERENCE.md; the scheduler's receiver offset rule), plus the receive
    controls it issues (``costs.exchange_receive_cycles``)."""
    c = target.costs
    return (c.exchange_arrival_cycles + c.exchange_arrival_row_cycles * np.asarray(rows, dtype=np.int64)
            + c.exchange_receive_cycles)


def tile_horizon_cycles(recv_words, cutovers, send_words, sends, rows, target: Target, runs=0) -> np.ndarray:
    """One tile's span of an exchange phase (or staging pass) as the scheduler lays it out.

    The receive lane takes one 32-bit word per event and pays :func:`cutover_cycles` for every cutover (the
    first receive is one: its payload also arrives that late); the send lane takes its words (a paired 64-bit
    send counts half its words) plus the send controls, and ``costs.exchange_run_cycles`` more for each of its
    ``runs`` strided partial-panel runs (transfers cutting an AMP panel, sent row by row). The tile's span is
    the longer lane: sends and receives run at once (HARDWARE.md section 4).
    """
    c = target.costs
    recv = np.asarray(recv_words, np.int64) + np.asarray(cutovers, np.int64) * cutover_cycles(rows, target)
    send = (np.asarray(send_words, np.int64) + np.asarray(sends, np.int64) * c.exchange_send_cycles
            + np.asarray(runs, np.int64) * c.exchange_run_cycles)
    return np.maximum(recv, send)
