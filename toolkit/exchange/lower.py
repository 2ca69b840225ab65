"""Exchange lowering: transfers -> groups, packets, staging passes, steps and plan rows.

Reads top to bottom: check the transfers, cut them into window-sized groups
(:mod:`toolkit.exchange.packets`), packetize the groups, put every receiving
tile's staged bytes into passes, assign steps per (phase, pass) with
:func:`toolkit.exchange.steps.colour_groups` (steps of pass ``p`` come before
those of pass ``p + 1``), then emit plan rows and a per-phase summary.

Plan row: ``plan_row_words`` 32-bit words per participating tile per group (one
send row for the source, one receive row per destination). Offsets are relative
to the row's object (``object_id`` column) and are relocated once placement
knows its address.

====  ==============  =====================================================
word  send row        receive row
====  ==============  =====================================================
0     0 (send)        1 (receive)
1     step            step
2     destination     source tile
      (0xFFFFFFFF
      for multicast)
3     words           words
4     0xFFFFFFFF      staging offset in the window (0xFFFFFFFF: direct)
5     source offset   destination offset (bytes, within the object)
6     packets         packets
7     fanout          fanout
8     flags: bit 0 staged, bit 1 first fragment, bit 2 last fragment, bits 8.. pass
====  ==============  =====================================================

The ``words`` column holds the nine defined words as a fixed-width array; a
target with a larger ``plan_row_words`` stores zeros past them (sizes use
``plan_row_words``). Identical rows are deduplicated by a 64-bit FNV-1a digest
of their words.

Cycle model (``est_cycles`` per phase): :mod:`toolkit.exchange.horizon` (every
tile's receive lane pays its words and one arrival latency per receive cutover,
its send lane its words; the busiest tile of each staging pass, a sync between
passes, plus the measured per-phase overrun ``costs.exchange_phase_cycles``).
The steps are the plan rows' order, not the timing. ``lower_bound`` is the sum
over passes of each pass's lane bound (what the step assignment must meet, and
meets exactly on unicast); ``unstaged_bound`` is the lane bound of the phase's
groups ignoring passes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import polars as pl

from toolkit import tables
from toolkit.errors import OptionError
from toolkit.exchange.horizon import phase_horizons, tile_horizons
from toolkit.exchange.packets import (
    dense_rank_sorted,
    fragment,
    packets_of,
    passes_of,
    sort_order,
)
from toolkit.exchange.steps import colour_groups, lane_bound
from toolkit.exchange.transfers import check_transfers
from toolkit.tables import BIG, ID, STR, frame
from toolkit.target import Target

ROW_FIELDS = 9
NONE_WORD = 0xFFFFFFFF
ROLE_SEND, ROLE_RECEIVE = 0, 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """Every exchange phase lowered: groups, packets, staging passes, plan rows, summary."""

    groups: pl.DataFrame   # STEPPED_GROUPS_SCHEMA: one row per group, with pass and step
    packets: pl.DataFrame  # PACKETS_SCHEMA
    passes: pl.DataFrame   # PASSES_SCHEMA: one row per (group, receiving tile)
    rows: pl.DataFrame     # ROWS_SCHEMA: one plan row per participating tile per group
    summary: pl.DataFrame  # SUMMARY_SCHEMA: one row per phase
    schedule_fingerprint: str | None = None   # of the schedule lowered (toolkit.schedule.lineage); None: unknown

    def __repr__(self) -> str:
        return tables.short_repr(self)


STEPPED_GROUPS_SCHEMA = {
    "phase": ID, "group": BIG, "transfer_id": BIG, "fragment": ID, "source": ID, "fanout": ID,
    "byte_offset": BIG, "size_bytes": BIG, "words": BIG, "packets": ID, "src_offset": BIG,
    "src_object": BIG, "runs": ID, "pass": ID, "step": ID,
}
ROWS_SCHEMA = {
    "phase": ID, "tile": ID, "group": BIG,
    "role": STR,                       # send | receive
    "step": ID, "pass": ID,
    "object_id": BIG,                  # the object word 5's offset is relative to
    "words": pl.Array(pl.UInt32, 9),   # the 9 defined 32-bit words (words past them are zero)
    "digest": pl.UInt64,               # FNV-1a over the words; equal digests share one stored row
}
SUMMARY_SCHEMA = {
    "phase": ID, "passes": ID, "transfers": BIG, "groups": BIG, "multicast_groups": BIG,
    "packets": BIG, "words": BIG, "delivered_words": BIG, "steps": BIG, "lower_bound": BIG,
    "unstaged_bound": BIG, "rows": BIG, "unique_rows": BIG, "est_cycles": BIG,
}


def lower_exchanges(transfers: pl.DataFrame, target: Target, slices: pl.DataFrame | None = None,
                    segments: pl.DataFrame | None = None) -> Exchange:
    """Lower every exchange phase of ``transfers`` (TRANSFERS_SCHEMA) for ``target``.

    ``slices`` and ``segments`` (optional, together: the schedule's tensor rectangle of every transfer and of
    every object) tell the exchange horizon which transfers cut an AMP panel of their source object
    (:func:`strided_runs`); without them no transfer does.
    """
    if target.plan_row_words < ROW_FIELDS:
        msg = (f"plan_row_words={target.plan_row_words} is too small: an exchange plan row has "
               f"{ROW_FIELDS} fields; use at least {ROW_FIELDS}")
        raise OptionError(msg, field="plan_row_words", value=target.plan_row_words)
    t = check_transfers(transfers, target)
    groups = fragment(t, target)
    groups = groups.with_columns(pl.Series("runs", _group_runs(t, groups, slices, segments, target), dtype=ID))
    packets = packets_of(groups, target)
    passes = passes_of(t, groups, target)
    gpass = np.zeros(groups.height, dtype=np.int64)
    gpass[passes["group"].to_numpy()] = passes["pass"].to_numpy()
    step, bounds = _assign(groups, passes, gpass)
    groups = groups.with_columns(pl.Series("pass", gpass, dtype=ID), pl.Series("step", step, dtype=ID))
    rows = _plan_rows(groups, passes, step)
    summary = _summary(t, groups, packets, passes, rows, bounds, target)
    return Exchange(groups=groups, packets=packets, passes=passes, rows=rows, summary=summary)


def strided_runs(rect: pl.DataFrame, target: Target) -> np.ndarray:
    """Strided partial-panel runs of each transfer: ``rect`` has its rectangle (``g0 .. c1``), its bytes
    (``size_bytes``) and its source object's columns (``s0, s1``).

    The hardware keeps a matmul's result block in AMP-left order: 32-byte panel rows (16 FP16 or 32 FP8
    columns) from the block's first column, panel after panel. A piece whose columns start, or end short of the
    block's end, inside a panel leaves row by row, one strided run per row (MLP_LAYOUT_ALTERNATIVES.md's fc1
    result 2x2: 92 x 24 pieces of 48-column blocks); a piece of whole panels goes one run per panel.
    """
    g = (rect["g1"] - rect["g0"]).to_numpy()
    r = (rect["r1"] - rect["r0"]).to_numpy()
    c0, c1 = (rect["c0"] - rect["s0"]).to_numpy(), (rect["c1"] - rect["s0"]).to_numpy()
    width = (rect["s1"] - rect["s0"]).to_numpy()
    elem_bytes = np.maximum(rect["size_bytes"].to_numpy() // np.maximum(g * r * (c1 - c0), 1), 1)
    panel = np.maximum(target.costs.exchange_panel_row_bytes // elem_bytes, 1)
    cut = (c0 % panel != 0) | ((c1 % panel != 0) & (c1 != width))
    return np.where(cut, g * r, 0).astype(np.int64)


def _group_runs(t: pl.DataFrame, groups: pl.DataFrame, slices: pl.DataFrame | None,
                segments: pl.DataFrame | None, target: Target) -> np.ndarray:
    """Strided runs of every group: its transfer's (:func:`strided_runs`) in proportion to the group's bytes."""
    if slices is None or segments is None or groups.height == 0 or slices.height == 0:
        return np.zeros(groups.height, np.int64)
    seg = segments.select(pl.col("object_id").alias("src_object"), pl.col("c0").alias("s0"),
                          pl.col("c1").alias("s1"), pl.col("r0").alias("_sr0"), pl.col("r1").alias("_sr1"))
    rect = (slices.select("transfer_id", "g0", "g1", "r0", "r1", "c0", "c1").unique("transfer_id", keep="first")
            .join(t.select("transfer_id", "size_bytes", "src_object").unique("transfer_id", keep="first"),
                  on="transfer_id")
            .join(seg, on="src_object", how="inner")   # the source segment holding the piece
            .filter((pl.col("c0") >= pl.col("s0")) & (pl.col("c1") <= pl.col("s1"))
                    & (pl.col("r0") >= pl.col("_sr0")) & (pl.col("r1") <= pl.col("_sr1")))
            .unique("transfer_id", keep="first"))
    lookup = pl.DataFrame({"transfer_id": rect["transfer_id"], "_runs": strided_runs(rect, target),
                           "_size": rect["size_bytes"]})
    g = groups.select("transfer_id", "size_bytes").join(lookup, on="transfer_id", how="left", maintain_order="left")
    total = g["_size"].fill_null(1).to_numpy().clip(1)
    return -(-g["_runs"].fill_null(0).to_numpy() * g["size_bytes"].to_numpy() // total)


def _assign(groups: pl.DataFrame, passes: pl.DataFrame, gpass: np.ndarray) -> tuple[np.ndarray, pl.DataFrame]:
    """Steps per group: colour each (phase, pass) on its own, then offset passes in order within the phase."""
    n = groups.height
    gphase = groups["phase"].to_numpy()
    gsrc = groups["source"].to_numpy().astype(np.int64)
    grank = dense_rank_sorted(gphase)                     # groups are in phase order
    rgroup = passes["group"].to_numpy()
    rtile = passes["tile"].to_numpy().astype(np.int64)
    npass = int(gpass.max()) + 1 if n else 1
    gkey = grank * npass + gpass
    gorder = sort_order([gkey])                           # (phase, pass, group)
    rorder = sort_order([gkey[rgroup]])                   # stable: keeps (tile, group) order within a problem
    gk, rk = gkey[gorder], gkey[rgroup[rorder]]
    gcut = np.flatnonzero(np.r_[True, gk[1:] != gk[:-1], True]) if n else np.zeros(1, dtype=np.int64)
    keys = gk[gcut[:-1]]
    rcut = np.searchsorted(rk, np.r_[keys, np.iinfo(np.int64).max])
    local = np.zeros(n, dtype=np.int64)
    nsteps = np.zeros(len(keys), dtype=np.int64)
    bound = np.zeros(len(keys), dtype=np.int64)
    seen: dict[bytes, tuple] = {}
    for i in range(len(keys)):  # one colouring per (phase, pass): the passes are independent problems
        gsl = gorder[gcut[i]:gcut[i + 1]]
        rsl = rorder[rcut[i]:rcut[i + 1]]
        dense = rgroup[rsl] - gsl[0] if gsl[-1] - gsl[0] == len(gsl) - 1 else np.searchsorted(gsl, rgroup[rsl])
        problem = (dense, gsrc[gsl], rtile[rsl])
        digest = hashlib.blake2b(b"|".join(a.astype(np.int64).tobytes() for a in problem), digest_size=16).digest()
        hit = seen.get(digest)
        if hit is None or not all(np.array_equal(a, b) for a, b in zip(hit[0], problem, strict=True)):
            hit = seen[digest] = (problem, colour_groups(*problem), lane_bound(*problem))
        local[gsl] = hit[1]     # identical problems (repeated phases) are coloured once
        nsteps[i] = int(hit[1].max()) + 1
        bound[i] = hit[2]
    kphase = keys // npass
    new_phase = np.r_[True, kphase[1:] != kphase[:-1]] if len(keys) else np.zeros(0, dtype=bool)
    csum = np.cumsum(nsteps)
    start = np.flatnonzero(new_phase)
    offset = csum - nsteps - (csum[start] - nsteps[start])[np.cumsum(new_phase) - 1]
    slot = np.zeros(n, dtype=np.int64)
    slot[gorder] = np.repeat(np.arange(len(keys)), np.diff(gcut))
    step = local + offset[slot] if n else local
    first_group = gorder[gcut[:-1]]
    per_pass = pl.DataFrame({"phase": gphase[first_group].astype(np.int64), "pass": keys % npass,
                             "steps": nsteps, "lower_bound": bound})
    return step, per_pass


def _plan_rows(groups: pl.DataFrame, passes: pl.DataFrame, step: np.ndarray) -> pl.DataFrame:
    ng = groups.height
    g = {c: groups[c].to_numpy().astype(np.int64) for c in ("phase", "group", "source", "fanout", "words", "packets",
                                                            "src_offset", "fragment", "pass")}
    gtid = groups["transfer_id"].to_numpy()
    last = np.r_[gtid[1:] != gtid[:-1], True][:ng]
    rgrp = passes["group"].to_numpy()
    rtile = passes["tile"].to_numpy()
    r_staged = passes["staged_bytes"].to_numpy() > 0
    staged_any = np.zeros(ng, dtype=bool)
    staged_any[rgrp[r_staged]] = True
    flags_g = ((g["fragment"] == 0).astype(np.int64) << 1) | (last.astype(np.int64) << 2) | (g["pass"] << 8)
    # a unicast send names its destination; look it up from the receive rows
    single_dest = np.full(ng, NONE_WORD, dtype=np.int64)
    uni = g["fanout"][rgrp] == 1
    single_dest[rgrp[uni]] = rtile[uni]
    nr = len(rgrp)
    send = np.stack([np.full(ng, ROLE_SEND), step, single_dest, g["words"], np.full(ng, NONE_WORD),
                     g["src_offset"], g["packets"], g["fanout"], flags_g | staged_any], axis=1)
    words = np.empty((ng + nr, ROW_FIELDS), dtype=np.uint32)
    words[:ng] = send
    recv = words[ng:]
    r_stag_off = passes["staging_offset"].fill_null(NONE_WORD).to_numpy()
    r_dst_off = passes["dst_offset"].to_numpy()
    r_flags = flags_g[rgrp] | r_staged
    recv[:, 0] = ROLE_RECEIVE
    recv[:, 1] = step[rgrp]
    recv[:, 2] = g["source"][rgrp]
    recv[:, 3] = g["words"][rgrp]
    recv[:, 4] = r_stag_off
    recv[:, 5] = r_dst_off
    recv[:, 6] = g["packets"][rgrp]
    recv[:, 7] = g["fanout"][rgrp]
    recv[:, 8] = r_flags
    # FNV-1a per row; a receive row's first four words are its group's, so hash that prefix once per group
    prefix = _fnv1a(np.stack([np.full(ng, ROLE_RECEIVE), step, g["source"], g["words"]], axis=1))
    digest = np.r_[_fnv1a(send), _fnv1a_more(prefix[rgrp], [r_stag_off, r_dst_off, g["packets"][rgrp],
                                                             g["fanout"][rgrp], r_flags])]
    phase = np.r_[g["phase"], g["phase"][rgrp]]
    tile = np.r_[g["source"], rtile].astype(np.int64)
    rstep = np.r_[step, step[rgrp]].astype(np.int64)
    is_recv = np.r_[np.zeros(ng, dtype=bool), np.ones(nr, dtype=bool)]
    # (phase, step, tile, role) is unique per row (one send and one receive per tile and step)
    order = sort_order([phase - phase.min() if len(phase) else phase, rstep, tile, is_recv.astype(np.int64)])
    role = pl.select(pl.when(pl.Series(is_recv[order])).then(pl.lit("receive")).otherwise(pl.lit("send"))
                     ).to_series() if len(order) else []
    return frame({
        "phase": phase[order], "tile": tile[order], "group": np.r_[g["group"], rgrp][order], "role": role,
        "step": rstep[order], "pass": np.r_[g["pass"], g["pass"][rgrp]][order],
        "object_id": pl.concat([groups["src_object"], passes["dst_object"]]).gather(order),
        "words": np.take(words, order, axis=0), "digest": digest[order],
    }, ROWS_SCHEMA, what="exchange plan rows")


def _fnv1a(words: np.ndarray) -> np.ndarray:
    h = np.full(len(words), 0xCBF29CE484222325, dtype=np.uint64)
    return _fnv1a_more(h, [words[:, j] for j in range(words.shape[1])])


def _fnv1a_more(h: np.ndarray, columns: list[np.ndarray]) -> np.ndarray:
    """Continue FNV-1a hashes ``h`` over one more 32-bit word per column."""
    h = h.copy()
    prime = np.uint64(0x100000001B3)
    with np.errstate(over="ignore"):
        for col in columns:
            h ^= col.astype(np.uint64) & np.uint64(NONE_WORD)
            h *= prime
    return h


def _summary(t: pl.DataFrame, groups: pl.DataFrame, packets: pl.DataFrame, passes: pl.DataFrame,
             rows: pl.DataFrame, per_pass: pl.DataFrame, target: Target) -> pl.DataFrame:
    cost = phase_horizons(tile_horizons(groups, passes, target), target).select("phase", "est_cycles")
    # receive lanes: passes are sorted by (phase, tile, ...), so (phase, tile) runs are contiguous
    ph, tl = passes["phase"].to_numpy(), passes["tile"].to_numpy()
    cut = np.flatnonzero(np.r_[True, (ph[1:] != ph[:-1]) | (tl[1:] != tl[:-1])]) if len(ph) else np.zeros(0, int)
    recv_load = pl.DataFrame({"phase": ph[cut], "len": np.diff(np.r_[cut, len(ph)])})
    unstaged = pl.concat([
        groups.group_by("phase", "source").len().select("phase", pl.col("len").cast(pl.Int64)),
        recv_load.with_columns(pl.col("phase").cast(ID), pl.col("len").cast(pl.Int64)),
    ]).group_by("phase").agg(pl.col("len").max().alias("unstaged_bound"))
    first_row = np.flatnonzero(np.r_[True, np.diff(t["transfer_id"].to_numpy()) != 0]) if t.height else []
    parts = [
        t[first_row].group_by("phase").agg(pl.len().alias("transfers")),
        groups.group_by("phase").agg(
            pl.len().alias("groups"), (pl.col("fanout") > 1).sum().alias("multicast_groups"),
            pl.col("words").sum(), (pl.col("words") * pl.col("fanout")).sum().alias("delivered_words"),
            (pl.col("pass").max() + 1).alias("passes")),
        packets.group_by("phase").agg(pl.len().alias("packets")),
        per_pass.group_by("phase").agg(pl.col("steps").sum(), pl.col("lower_bound").sum()),
        unstaged,
        rows.group_by("phase").agg(pl.len().alias("rows"), pl.col("digest").n_unique().alias("unique_rows")),
        cost,
    ]
    out = parts[0].with_columns(pl.col("phase").cast(ID))
    for p in parts[1:]:
        out = out.join(p.with_columns(pl.col("phase").cast(ID)), on="phase", how="left")
    return out.select([pl.col(c).cast(d) for c, d in SUMMARY_SCHEMA.items()]).sort("phase")
