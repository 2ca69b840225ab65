"""The cost model: cycles of kernel commands and exchange phases, from Target constants.

Vectorized over cells: every function takes numpy columns. The AMP estimate is
``ipu-stack``'s: calls = ceil(K / ib) x ceil(cols / cb); each call costs
``294 + (ib / 16) x (ceil(cb x rows / 4) + ceil((cb / 16) x G / 4))`` with G
the weight-feed term (940 interleaved, 1063 standard; FP32 partials use
rows x 4 and G = 2 x 1063). Elementwise kernels cost an overhead plus cycles
per element spread over the workers.
"""

from __future__ import annotations

import numpy as np

from toolkit.target import Target

VECTOR_CYCLES_PER_ELEMENT = {"layernorm": 3.0, "gelu": 4.0, "softmax": 4.0, "add": 1.0, "cast": 1.0, "copy": 0.5,
                             "reduce": 1.0}


def _ceil_div(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    return -(-np.asarray(a) // b)


def amp_calls(cols: np.ndarray, inner: np.ndarray, *, inner_block: int | None = None) -> tuple[np.ndarray, ...]:
    """Column block, inner block and call count per cell (one call covers the whole column panel)."""
    cb = _ceil_div(cols, 16) * 16
    ib = _ceil_div(inner, 16) * 16 if inner_block is None else np.minimum(_ceil_div(inner, 16) * 16, inner_block)
    calls = _ceil_div(inner, ib) * _ceil_div(cols, cb)
    return cb, ib, calls


def amp_cycles(rows: np.ndarray, cols: np.ndarray, inner: np.ndarray, target: Target, *, interleaved: bool,
               fp32: bool = False, inner_block: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, calls, worker launches) of one AMP matmul per cell.

    Each 16 x 16 microblock of a call loads a coefficient block and launches
    the workers, so worker launches = calls x (cb / 16) x (ib / 16).
    """
    c = target.costs
    cb, ib, calls = amp_calls(cols, inner, inner_block=inner_block)
    if fp32:
        row_term = _ceil_div(cb * rows * c.amp_fp32_row_factor, 4)
        feed = c.amp_fp32_feed
    else:
        row_term = _ceil_div(cb * rows, 4)
        feed = c.amp_feed_interleaved if interleaved else c.amp_feed_standard
    per_call = c.amp_call_cycles + (ib // 16) * (row_term + _ceil_div((cb // 16) * feed, 4))
    return calls * (per_call + c.launch_cycles), calls, calls * (cb // 16) * (ib // 16)


def vector_cycles(kind: str, elements: np.ndarray, target: Target) -> np.ndarray:
    c = target.costs
    per = VECTOR_CYCLES_PER_ELEMENT[kind]
    return c.launch_cycles + c.vector_overhead_cycles + np.ceil(np.asarray(elements) * per / target.workers).astype(
        np.int64)


def copy_cycles(size_bytes: np.ndarray, target: Target) -> np.ndarray:
    return target.costs.local_copy_cycles + _ceil_div(size_bytes, target.costs.load_bytes_per_cycle_standard)


def exchange_cycles(max_tile_bytes: np.ndarray, max_tile_fragments: np.ndarray, target: Target) -> np.ndarray:
    """Estimate of one exchange phase: the busiest tile's bytes at the link rate plus fragment overheads."""
    return (_ceil_div(max_tile_bytes, target.exchange_bytes_per_cycle)
            + np.asarray(max_tile_fragments) * target.costs.exchange_fragment_cycles)
