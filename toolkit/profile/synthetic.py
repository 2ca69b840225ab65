"""Synthetic bulk-synchronous profiles for tests and benchmarks (vectorized numpy, no per-sample Python)."""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit import tables
from toolkit.profile.model import WRAP, Profile

KERNELS = ("amp_gemm_fp16", "layernorm", "gelu", "softmax", "add", "cast_fp8")
OPERATIONS = ("mlp.fc1", "mlp.gelu", "mlp.fc2", "attn.qkv", "attn.softmax", "attn.out", "norm1", "residual")


def synthetic_profile(tiles: int = 4, samples_per_tile: int = 10, seed: int = 0, *, base_cycle: int | None = None,
                      clock_hz: float = 1.5e9, source: str = "simulated") -> Profile:
    """A BSP-shaped profile: an initial sync barrier, then phases of compute, exchange, sync on every tile.

    Each phase ends on every tile at the same cycle (the slowest tile's work plus
    a sync), so barrier waits and stragglers are realistic. Exchange samples
    carry a send and a receive activity; every seventh compute sample carries an
    ``invocations`` metadata row. ``base_cycle`` sets the raw counter of the
    first phase (default random); counters are stored modulo 2**32, so a base
    near 2**32 gives a profile whose counters wrap.
    """
    rng = np.random.default_rng(seed)
    n = max(int(samples_per_tile), 1)
    phases = (n - 1 + 2) // 3
    base = int(rng.integers(0, WRAP)) if base_cycle is None else int(base_cycle)
    compute = rng.integers(200, 4000, size=(tiles, phases))
    exchange = rng.integers(100, 1200, size=(tiles, phases))
    sync = 600
    length = (compute + exchange).max(axis=0) + sync
    phase_start = base + np.concatenate([[0], np.cumsum(length)[:-1]])
    phase_end = phase_start + length
    # sample k >= 1 is step (k - 1) % 3 of phase (k - 1) // 3
    k = np.arange(1, n)
    ph, step = (k - 1) // 3, (k - 1) % 3
    c, x = compute[:, ph], exchange[:, ph]
    s0 = phase_start[ph][None, :]
    start = np.where(step == 0, s0, np.where(step == 1, s0 + c, s0 + c + x))
    end = np.where(step == 0, s0 + c, np.where(step == 1, s0 + c + x, phase_end[ph][None, :]))
    first_start = base - rng.integers(50, 3000, size=(tiles, 1))
    start = np.concatenate([first_start, start], axis=1)
    end = np.concatenate([np.full((tiles, 1), base), end], axis=1)
    kind_code = np.concatenate([[2], np.array([1, 0, 2])[step]])
    phase = np.concatenate([[0], ph + 1])
    op_code = phase % len(OPERATIONS)
    kernel_code = np.where(kind_code == 1, phase % len(KERNELS), -1)
    tile = np.repeat(np.arange(tiles, dtype=np.int64), n)
    sample = np.tile(np.arange(n, dtype=np.int64), tiles)
    kind = pl.Series(tables.SAMPLE_KINDS).gather(np.tile(kind_code, tiles))
    operation = pl.Series(OPERATIONS).gather(np.tile(op_code, tiles))
    kernel_names = pl.Series([*KERNELS, ""])
    kernel = kernel_names.gather(np.tile(np.where(kernel_code < 0, len(KERNELS), kernel_code), tiles))
    is_exchange = np.tile(kind_code == 0, tiles)
    xdur = (end - start).ravel()
    samples = tables.frame({
        "tile": tile, "sample": sample, "local_index": sample, "phase": np.tile(phase, tiles),
        "epoch": np.tile(phase // 16, tiles), "operation": operation, "kind": kind, "kernel": kernel,
        "start_cycle": start.ravel() % WRAP, "end_cycle": end.ravel() % WRAP,
        "exchange_event_cycles": np.where(is_exchange, xdur // 2, 0),
    }, tables.SAMPLES_SCHEMA, what="samples")
    rows = np.flatnonzero(is_exchange)
    d = xdur[rows]
    send_end = d // 2 + rng.integers(0, 2, len(rows)) * (d // 4)
    activities = tables.frame({
        "tile": np.repeat(tile[rows], 2), "sample": np.repeat(sample[rows], 2),
        "kind": pl.Series(["send", "receive"]).gather(np.tile([0, 1], len(rows))),
        "fanout": np.ravel(np.column_stack([rng.integers(1, 4, len(rows)), np.zeros(len(rows), np.int64)])),
        "paired": np.ravel(np.column_stack([rng.random(len(rows)) < 0.25, np.zeros(len(rows), bool)])),
        "start_cycle": np.ravel(np.column_stack([np.zeros(len(rows), np.int64), d // 4])),
        "end_cycle": np.ravel(np.column_stack([send_end, d])),
    }, tables.ACTIVITIES_SCHEMA, what="activities")
    mrows = np.flatnonzero(np.tile(kind_code == 1, tiles) & (sample % 7 == 1))
    metadata = tables.frame({
        "tile": tile[mrows], "sample": sample[mrows], "name": "invocations",
        "value": pl.Series((1 + mrows % 3).astype(np.int64)).cast(pl.String),
    }, tables.METADATA_SCHEMA, what="metadata")
    return Profile(samples=samples, activities=activities, metadata=metadata, clock_hz=clock_hz,
                   schema_version=5, source=source)
