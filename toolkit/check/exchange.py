"""Exchange phases of the functional check: every transfer's slice gathered from its source object into one
byte stream, staged receives written pass by pass through the receiving tile's staging window, then every receive
scattered into its destination object's rectangle (the plan is built once per symbolic phase; iterated sources
shift per repeat instance).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from toolkit.check.run import Tables, iterated_sources
from toolkit.check.sram import Sram, check_runs, copy_runs, rect_runs
from toolkit.errors import InvalidIRError


@dataclass(slots=True)
class ExchangePlan:
    """Byte runs of one exchange phase: gather into a stream, then per staging pass (window in, window out,
    direct receives, destinations of the receives completed in that pass)."""

    src_flat: np.ndarray
    stream_pos: np.ndarray
    src_len: np.ndarray
    stream_bytes: int
    recv_bytes: int
    passes: list[dict[str, tuple[np.ndarray, ...]]]
    src_obj: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # source object of each run


def instance_shift(src_obj: np.ndarray, sram: Sram, repeat_index) -> np.ndarray | int:
    """Byte shift of runs read from iterated objects (gathered weights) in one repeat instance: ``i * stride``."""
    if not len(src_obj):   # no iterated source in the phase (see _iterated)
        return 0
    return sram.stride[src_obj] * repeat_index(src_obj)


def exchange_rows(schedule, passes: pl.DataFrame | None) -> dict[int, tuple[pl.DataFrame, pl.DataFrame | None]]:
    """Exchange phase -> (its receive rows: transfers with their slice rectangles, its staging passes), from one
    join and one partition of the whole program (not one scan of every table per phase)."""
    rows = schedule.transfers.join(schedule.slices, on=["transfer_id", "destination"], how="left")
    by_phase = {int(k[0]): v for k, v in rows.partition_by("phase", as_dict=True).items()}
    staged = ({} if passes is None or not passes.height
              else {int(k[0]): v for k, v in passes.partition_by("phase", as_dict=True).items()})
    phases = schedule.phases.filter(pl.col("kind") == "exchange")["phase"].to_list()
    return {int(ph): (by_phase.get(int(ph), rows.clear()), staged.get(int(ph))) for ph in phases}


def plan_exchange(phase: int, rows: pl.DataFrame, passes: pl.DataFrame | None, t: Tables, sram: Sram) -> ExchangePlan:
    """Byte runs of one exchange phase from its receive rows and staging passes (:func:`exchange_rows`)."""
    rows = rows.sort("transfer_id", "destination")
    if rows["g0"].null_count():
        msg = f"exchange phase {phase}: transfers without a slice rectangle in schedule.slices"
        raise InvalidIRError(msg)
    dims = np.stack([(rows[b] - rows[a]).to_numpy() for a, b in (("g0", "g1"), ("r0", "r1"), ("c0", "c1"))], 1)
    size = rows["size_bytes"].to_numpy().astype(np.int64)
    elems = dims.prod(axis=1)
    eb = np.where(elems > 0, size // np.maximum(elems, 1), 1)
    tid = rows["transfer_id"].to_numpy()
    _, first, u_of_row = np.unique(tid, return_index=True, return_inverse=True)
    src = rows["src_object"].to_numpy()[first]
    src_start = sram.start0[src] + rows["src_offset"].to_numpy()[first]
    tsize = size[first]
    tstart = np.cumsum(tsize) - tsize
    piece, sflat, slen, packed = rect_runs(src_start, dims[first], t.odims[src, 1], t.odims[src, 2], eb[first])
    check_runs(sram, sflat, slen, f"exchange phase {phase} sources")
    rstart = np.cumsum(size) - size
    dst = rows["dst_object"].to_numpy()
    dst_start = sram.start0[dst] + rows["dst_offset"].to_numpy()
    dpiece, dflat, dlen, dpacked = rect_runs(dst_start, dims, t.odims[dst, 1], t.odims[dst, 2], eb)
    check_runs(sram, dflat, dlen, f"exchange phase {phase} destinations")
    frags = _fragments(phase, passes, tid, rows["destination"].to_numpy(), size)
    done = np.zeros(len(tid), dtype=np.int64)          # pass in which each receive completes
    np.maximum.at(done, frags["row"], frags["pass"])
    staged = frags["staging_object"] >= 0
    so = frags["staging_object"][staged]
    end = frags["staging_offset"][staged] + frags["size"][staged]
    if np.any(end > sram.size[so]):
        k = int(np.argmax(end > sram.size[so]))
        msg = (f"exchange phase {phase}: a staged fragment ends at byte {int(end[k])} of staging object "
               f"{int(so[k])} on tile {int(sram.tile[so[k]])}, which has only {int(sram.size[so[k]])} bytes")
        raise InvalidIRError(msg)
    stage = np.full(len(staged), -1, dtype=np.int64)
    stage[staged] = sram.start0[so] + frags["staging_offset"][staged]
    check_runs(sram, stage[staged], frags["size"][staged], f"exchange phase {phase} staging")
    r, boff = frags["row"], frags["byte_offset"]
    spos, rpos = tstart[u_of_row[r]] + boff, rstart[r] + boff
    plan_passes = []
    for p in np.unique(np.concatenate([frags["pass"], done])):
        f = frags["pass"] == p
        w, d = f & staged, f & ~staged
        rows_done = np.isin(dpiece, np.nonzero(done == p)[0])
        plan_passes.append({
            "window": (spos[w], stage[w], rpos[w], frags["size"][w]),
            "direct": (spos[d], rpos[d], frags["size"][d]),
            "deliver": (rstart[dpiece[rows_done]] + dpacked[rows_done], dflat[rows_done], dlen[rows_done]),
        })
    return ExchangePlan(src_flat=sflat, stream_pos=tstart[piece] + packed, src_len=slen,
                        stream_bytes=int(tsize.sum()), recv_bytes=int(size.sum()), passes=plan_passes,
                        src_obj=iterated_sources(src[piece], sram))


def _fragments(phase: int, passes: pl.DataFrame | None, tid: np.ndarray, dest: np.ndarray,
               size: np.ndarray) -> dict[str, np.ndarray]:
    """Received fragments of the phase's receive rows: row, pass, byte offset, size, staging object and offset.

    From the exchange's staging passes; a receive the passes do not list arrives whole, directly, in pass 0.
    """
    key = pl.DataFrame({"transfer_id": tid, "tile": dest, "row": np.arange(len(tid))}).cast(
        {"transfer_id": pl.Int64, "tile": pl.Int32})
    cols = ("row", "pass", "byte_offset", "size_bytes", "staging_object", "staging_offset")
    if passes is not None and passes.height:
        ps = (passes.join(key, on=["transfer_id", "tile"], how="inner")
              .select(*cols).with_columns(pl.col("staging_object", "staging_offset").fill_null(-1)))
    else:
        ps = pl.DataFrame(schema=dict.fromkeys(cols, pl.Int64))
    missing = np.setdiff1d(np.arange(len(tid)), ps["row"].to_numpy())
    extra = pl.DataFrame({"row": missing, "pass": np.zeros_like(missing), "byte_offset": np.zeros_like(missing),
                          "size_bytes": size[missing], "staging_object": np.full_like(missing, -1),
                          "staging_offset": np.full_like(missing, -1)})
    ps = pl.concat([ps.cast(pl.Int64), extra.cast(pl.Int64)]).sort("pass", "row", "byte_offset")
    out = {c: ps[c].to_numpy() for c in cols}
    out["size"] = out.pop("size_bytes")
    return out


def run_exchange(p: ExchangePlan, sram: Sram, shift: np.ndarray | int = 0, scratch: np.ndarray | None = None) -> None:
    """Run one exchange phase; ``shift`` (:func:`instance_shift`) moves reads of iterated sources to the instance.

    ``scratch`` (at least ``stream_bytes + recv_bytes``) holds the byte stream and the receive buffer, so phase
    after phase reuses one buffer instead of mapping fresh pages.
    """
    if scratch is None or scratch.size < p.stream_bytes + p.recv_bytes:
        scratch = np.empty(p.stream_bytes + p.recv_bytes, dtype=np.uint8)
    stream, recv = scratch[:p.stream_bytes], scratch[p.stream_bytes:p.stream_bytes + p.recv_bytes]
    copy_runs(sram.flat, p.src_flat + shift, stream, p.stream_pos, p.src_len)
    for step in p.passes:
        spos, stage, rpos, ln = step["window"]      # staged fragments land in the window, then are copied out
        copy_runs(stream, spos, sram.flat, stage, ln)
        copy_runs(sram.flat, stage, recv, rpos, ln)
        spos, rpos, ln = step["direct"]             # direct receives
        copy_runs(stream, spos, recv, rpos, ln)
        rpos, dflat, dlen = step["deliver"]         # receives complete in this pass reach their objects
        copy_runs(recv, rpos, sram.flat, dflat, dlen)
