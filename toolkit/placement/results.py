"""Result frames of :func:`toolkit.placement.place`: typed frames, occupancy and failure explanations."""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.placement import _tiles as T
from toolkit.tables import FAILURES_SCHEMA, OCCUPANCY_SCHEMA, empty


def arrays(rep: pl.DataFrame) -> dict[str, np.ndarray]:
    tiles = rep["tile"].to_numpy()
    bounds = np.flatnonzero(np.diff(tiles)) + 1
    ptr = np.concatenate([[0], bounds, [len(tiles)]]).astype(np.int64)
    width = max(int(rep["regions"].list.len().to_numpy().max(initial=1)), 1)
    pref = np.full((rep.height, width), -1, np.int64)
    for k in range(width):
        pref[:, k] = rep["regions"].list.get(k, null_on_oob=True).fill_null(-1).to_numpy()
    arr = {c: rep[c].to_numpy().astype(np.int64) for c in ("phase", "first", "last", "size", "align", "count")}
    arr.update(excl=rep["excl"].to_numpy(), exec=rep["exec"].to_numpy(), pref=pref, ptr=ptr)
    return arr


def typed(columns: dict[str, np.ndarray], schema) -> pl.DataFrame:
    """A frame straight from numpy columns already in (or cast to) the schema's dtypes."""
    np_types = {pl.Int32: np.int32, pl.Int64: np.int64}
    return pl.DataFrame({c: np.asarray(columns[c]).astype(np_types[t], copy=False) for c, t in schema.items()})


def occupancy(req: pl.DataFrame, res: dict[str, np.ndarray], rep_of_tile: np.ndarray, tile_ids: np.ndarray,
               geo) -> pl.DataFrame:
    """Occupancy of each representative tile, repeated for every tile of its signature (tile order)."""
    a = arrays(req)
    t_idx, out = T.occupancy(a["ptr"], a["first"], a["last"], res["address"], res["extent"],
                             req["interleaved"].to_numpy(), res["region"], geo.target.memory_start,
                             geo.target.load_limit)
    bounds = np.searchsorted(t_idx, np.arange(len(a["ptr"])))
    length = np.diff(bounds)[rep_of_tile]
    idx = np.repeat(bounds[:-1][rep_of_tile] - np.concatenate([[0], np.cumsum(length)[:-1]]), length)
    idx += np.arange(len(idx))
    names = ["event", "live_bytes", "standard_bytes", "interleaved_bytes", "region0_bytes", "region1_bytes",
             "free_bytes", "largest_free_bytes"]
    cols = {n: out[idx, k] for k, n in enumerate(names)}
    return typed({"tile": np.repeat(tile_ids, length), **cols}, OCCUPANCY_SCHEMA)


def failures(req: pl.DataFrame, sig_of_rep: np.ndarray, ok: np.ndarray, proven: np.ndarray,
              tiles_of_rep: dict[int, np.ndarray], geo) -> pl.DataFrame:
    """One row per failing tile (explained once per distinct tile, repeated for the others)."""
    if ok.all():
        return empty(FAILURES_SCHEMA)
    rep_tiles = req["tile"].unique(maintain_order=True).to_list()
    rows: list[tuple] = []
    for r in np.flatnonzero(~ok):
        part = req.filter(pl.col("tile") == rep_tiles[r])
        row = _explain(part, geo, bool(proven[r]))
        rows.extend((int(t), *row) for t in tiles_of_rep[int(sig_of_rep[r])])
    return pl.DataFrame(rows, schema=FAILURES_SCHEMA, orient="row").sort("tile")


def _explain(part: pl.DataFrame, geo, searched: bool) -> tuple:
    """Failure row for one tile: the busiest event, live bytes, the largest objects and a proof if any."""
    first = part["first"].to_numpy()
    last = part["last"].to_numpy()
    total = np.where(part["count"].to_numpy() > 1, part["size"].to_numpy() * part["count"].to_numpy(),
                     part["size"].to_numpy())
    events = np.unique(first)
    live = (first[None, :] <= events[:, None]) & (last[None, :] >= events[:, None])
    live_bytes = (live * total[None, :]).sum(axis=1)
    inter = part["interleaved"].to_numpy()
    inter_bytes = (live * (total * inter)[None, :]).sum(axis=1)
    k = int(np.argmax(live_bytes))
    ids = part["req_id"].to_numpy()[live[k]]
    largest = ids[np.argsort(-total[live[k]], kind="stable")][:3].tolist()
    if live_bytes.max() > geo.capacity:
        proven, reason = True, (f"{int(live_bytes[k])} bytes are live at event {int(events[k])}, above the "
                                f"{geo.capacity} bytes of tile memory")
    elif inter_bytes.max() > geo.interleaved_capacity:
        j = int(np.argmax(inter_bytes))
        k = j
        proven, reason = True, (f"{int(inter_bytes[j])} interleaved bytes are live at event {int(events[j])}, "
                                f"above the {geo.interleaved_capacity} bytes of the interleaved regions")
    elif searched:
        proven, reason = True, (f"the exact search exhausted every canonical placement; {int(live_bytes[k])} of "
                                f"{geo.capacity} bytes live at event {int(events[k])}")
    else:
        proven, reason = False, (f"greedy orders and the bounded search found no placement; {int(live_bytes[k])} "
                                 f"of {geo.capacity} bytes live at event {int(events[k])} (not proven infeasible)")
    return (int(events[k]), int(live_bytes[k]), geo.capacity, largest, proven, reason)
