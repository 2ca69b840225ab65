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

Words past the ninth (a target with a larger ``plan_row_words``) are zero.
Identical rows are deduplicated by a 64-bit FNV-1a digest of their words.

Cycle model (``est_cycles`` per phase): a step lasts as long as its slowest
group, ``ceil(words * word_bytes / exchange_bytes_per_cycle) + packets *
costs.exchange_fragment_cycles``; the phase is the sum over its steps plus
``costs.sync_cycles`` for every pass after the first (the phase's own sync is
the schedule's). ``lower_bound`` is the sum over passes of each pass's lane
bound (what the step assignment must meet, and meets exactly on unicast);
``unstaged_bound`` is the lane bound of the phase's groups ignoring passes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from toolkit.errors import OptionError
from toolkit.exchange.packets import check_transfers, fragment, packets_of, passes_of
from toolkit.exchange.steps import colour_groups, lane_bound
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


STEPPED_GROUPS_SCHEMA = {
    "phase": ID, "group": BIG, "transfer_id": BIG, "fragment": ID, "source": ID, "fanout": ID,
    "byte_offset": BIG, "size_bytes": BIG, "words": BIG, "packets": ID, "src_offset": BIG,
    "src_object": BIG, "pass": ID, "step": ID,
}
ROWS_SCHEMA = {
    "phase": ID, "tile": ID, "group": BIG,
    "role": STR,                       # send | receive
    "step": ID, "pass": ID,
    "object_id": BIG,                  # the object word 5's offset is relative to
    "words": pl.List(pl.UInt32),       # plan_row_words 32-bit words
    "digest": pl.UInt64,               # FNV-1a over the words; equal digests share one stored row
}
SUMMARY_SCHEMA = {
    "phase": ID, "passes": ID, "transfers": BIG, "groups": BIG, "multicast_groups": BIG,
    "packets": BIG, "words": BIG, "delivered_words": BIG, "steps": BIG, "lower_bound": BIG,
    "unstaged_bound": BIG, "rows": BIG, "unique_rows": BIG, "est_cycles": BIG,
}


def lower_exchanges(transfers: pl.DataFrame, target: Target) -> Exchange:
    """Lower every exchange phase of ``transfers`` (TRANSFERS_SCHEMA) for ``target``."""
    if target.plan_row_words < ROW_FIELDS:
        msg = (f"plan_row_words={target.plan_row_words} is too small: an exchange plan row has "
               f"{ROW_FIELDS} fields; use at least {ROW_FIELDS}")
        raise OptionError(msg, field="plan_row_words", value=target.plan_row_words)
    t = check_transfers(transfers, target)
    groups = fragment(t, target)
    packets = packets_of(groups, target)
    passes = passes_of(t, groups, target)
    gpass = np.zeros(groups.height, dtype=np.int64)
    gpass[passes["group"].to_numpy()] = passes["pass"].to_numpy()
    step, bounds = _assign(groups, passes, gpass)
    groups = groups.with_columns(pl.Series("pass", gpass, dtype=ID), pl.Series("step", step, dtype=ID))
    rows = _plan_rows(groups, passes, step, target)
    summary = _summary(t, groups, packets, passes, rows, bounds, target)
    return Exchange(groups=groups, packets=packets, passes=passes, rows=rows, summary=summary)


def _assign(groups: pl.DataFrame, passes: pl.DataFrame, gpass: np.ndarray) -> tuple[np.ndarray, pl.DataFrame]:
    """Steps per group: colour each (phase, pass) on its own, then offset passes in order within the phase."""
    n = groups.height
    gphase = groups["phase"].to_numpy().astype(np.int64)
    gsrc = groups["source"].to_numpy().astype(np.int64)
    rgroup = passes["group"].to_numpy()
    rtile = passes["tile"].to_numpy().astype(np.int64)
    gorder = np.lexsort((np.arange(n), gpass, gphase))
    rorder = np.lexsort((rgroup, gpass[rgroup], gphase[rgroup]))
    gkey = np.stack([gphase[gorder], gpass[gorder]], axis=1)
    gcut = np.flatnonzero(np.r_[True, np.any(np.diff(gkey, axis=0) != 0, axis=1), True])
    rkey = np.stack([gphase[rgroup[rorder]], gpass[rgroup[rorder]]], axis=1)
    rcut = np.flatnonzero(np.r_[True, np.any(np.diff(rkey, axis=0) != 0, axis=1), True])
    local = np.zeros(n, dtype=np.int64)
    keys = gkey[gcut[:-1]] if n else np.zeros((0, 2), dtype=np.int64)
    nsteps = np.zeros(len(keys), dtype=np.int64)
    bound = np.zeros(len(keys), dtype=np.int64)
    for i in range(len(keys)):  # one colouring per (phase, pass): the passes are independent problems
        gsl = gorder[gcut[i]:gcut[i + 1]]
        rsl = rorder[rcut[i]:rcut[i + 1]]
        dense = np.searchsorted(gsl, rgroup[rsl])  # gsl is ascending within a slice
        colour = colour_groups(dense, gsrc[gsl], rtile[rsl])
        local[gsl] = colour
        nsteps[i] = int(colour.max()) + 1
        bound[i] = lane_bound(dense, gsrc[gsl], rtile[rsl])
    new_phase = np.r_[True, keys[1:, 0] != keys[:-1, 0]] if len(keys) else np.zeros(0, dtype=bool)
    csum = np.cumsum(nsteps)
    start = np.flatnonzero(new_phase)
    offset = csum - nsteps - (csum[start] - nsteps[start])[np.cumsum(new_phase) - 1]
    slot = np.zeros(n, dtype=np.int64)
    slot[gorder] = np.repeat(np.arange(len(keys)), np.diff(gcut))
    step = local + offset[slot] if n else local
    per_pass = pl.DataFrame({"phase": keys[:, 0], "pass": keys[:, 1], "steps": nsteps, "lower_bound": bound})
    return step, per_pass


def _plan_rows(groups: pl.DataFrame, passes: pl.DataFrame, step: np.ndarray, target: Target) -> pl.DataFrame:
    g = {c: groups[c].to_numpy() for c in ("phase", "group", "source", "fanout", "words", "packets",
                                           "src_offset", "fragment", "size_bytes", "byte_offset", "pass")}
    last = np.r_[groups["transfer_id"].to_numpy()[1:] != groups["transfer_id"].to_numpy()[:-1], True]
    rgrp = passes["group"].to_numpy()
    staged_any = np.zeros(groups.height, dtype=bool)
    staged_any[rgrp[passes["staged_bytes"].to_numpy() > 0]] = True
    flags_g = ((g["fragment"] == 0).astype(np.int64) << 1) | (last.astype(np.int64) << 2) | (g["pass"] << 8)
    # a unicast send names its destination; look it up from the receive rows
    single_dest = np.full(groups.height, NONE_WORD, dtype=np.int64)
    uni = g["fanout"][rgrp] == 1
    single_dest[rgrp[uni]] = passes["tile"].to_numpy()[uni]
    send = np.stack([
        np.full(groups.height, ROLE_SEND), step, single_dest, g["words"], np.full(groups.height, NONE_WORD),
        g["src_offset"], g["packets"], g["fanout"], flags_g | staged_any,
    ], axis=1)
    r_staged = passes["staged_bytes"].to_numpy() > 0
    stag_off = passes["staging_offset"].fill_null(NONE_WORD).to_numpy()
    recv = np.stack([
        np.full(len(rgrp), ROLE_RECEIVE), step[rgrp], g["source"][rgrp], g["words"][rgrp], stag_off,
        passes["dst_offset"].to_numpy(), g["packets"][rgrp], g["fanout"][rgrp], flags_g[rgrp] | r_staged,
    ], axis=1)
    words = np.concatenate([send, recv]).astype(np.uint64) & np.uint64(NONE_WORD)
    if target.plan_row_words > ROW_FIELDS:
        words = np.pad(words, ((0, 0), (0, target.plan_row_words - ROW_FIELDS)))
    digest = _fnv1a(words)
    words32 = words.astype(np.uint32)
    rows = frame({
        "phase": np.r_[g["phase"], g["phase"][rgrp]],
        "tile": np.r_[g["source"], passes["tile"].to_numpy()],
        "group": np.r_[g["group"], rgrp],
        "role": pl.Series(np.r_[np.zeros(len(send), dtype=np.int8), np.ones(len(recv), dtype=np.int8)])
        .replace_strict({0: "send", 1: "receive"}, return_dtype=pl.String),
        "step": np.r_[step, step[rgrp]],
        "pass": np.r_[g["pass"], g["pass"][rgrp]],
        "object_id": pl.concat([groups["src_object"], passes["dst_object"]]),
        "words": pl.Series("words", words32).cast(pl.List(pl.UInt32)) if len(words32) else [],
        "digest": digest,
    }, ROWS_SCHEMA, what="exchange plan rows")
    return rows.sort("phase", "step", "tile", "role", maintain_order=True)


def _fnv1a(words: np.ndarray) -> np.ndarray:
    h = np.full(len(words), 0xCBF29CE484222325, dtype=np.uint64)
    prime = np.uint64(0x100000001B3)
    with np.errstate(over="ignore"):
        for j in range(words.shape[1]):
            h = (h ^ words[:, j]) * prime
    return h


def _summary(t: pl.DataFrame, groups: pl.DataFrame, packets: pl.DataFrame, passes: pl.DataFrame,
             rows: pl.DataFrame, per_pass: pl.DataFrame, target: Target) -> pl.DataFrame:
    wb, bpc = target.word_bytes, target.exchange_bytes_per_cycle
    frag_cycles = target.costs.exchange_fragment_cycles
    cost = (groups.with_columns(
        ((pl.col("words") * wb + bpc - 1) // bpc + pl.col("packets").cast(BIG) * frag_cycles).alias("_cycles"))
        .group_by("phase", "step").agg(pl.col("_cycles").max())
        .group_by("phase").agg(pl.col("_cycles").sum()))
    unstaged = pl.concat([
        groups.group_by("phase", "source").len().select("phase", "len"),
        passes.group_by("phase", "tile").len().select("phase", "len"),
    ]).group_by("phase").agg(pl.col("len").max().alias("unstaged_bound"))
    parts = [
        t.group_by("phase").agg(pl.col("transfer_id").n_unique().alias("transfers")),
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
    out = out.with_columns(
        (pl.col("_cycles") + (pl.col("passes") - 1) * target.costs.sync_cycles).alias("est_cycles"))
    return out.select([pl.col(c).cast(d) for c, d in SUMMARY_SCHEMA.items()]).sort("phase")
