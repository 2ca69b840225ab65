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
