"""Transfers -> groups (window-sized fragments), packets and staging passes.

Contract:

- A transfer (``transfer_id``: one source, one or more destination rows, the same
  bytes) carries ``ceil(size_bytes / word_bytes)`` words.
- It is cut into *fragments* of at most one staging window
  (``staging_window_bytes``, 32 KiB = 8192 words on ipu21). One fragment is one
  *group*: what the source sends in one step. Fragment boundaries do not depend
  on the destination, so a multicast stays one group per fragment.
- Each group's words go out as back-to-back packets: the first at most
  ``first_packet_max_words`` (64), the rest at most ``packet_max_words`` (4148).
  ``word_offset`` counts from the start of the transfer.
- Staging passes are global sub-phases of an exchange phase: in pass ``p`` every
  receiving tile's staged bytes fit its window, and all of pass ``p``'s steps run
  before pass ``p + 1``'s (the tile copies the window out in between). A group's
  staged size at a destination is its whole words; destinations whose transfer
  has no ``staging_object`` receive directly and use no window space. Passes are
  filled in group order, vectorized over every (phase, tile) at once: a round
  admits a group when the running staged total at each of its destinations, over
  all still-unassigned groups before it, fits the window (the first unassigned
  group of a phase always fits, so every round makes progress). A fragment of a
  transfer larger than the window fills a whole window and so gets its own pass.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.errors import OptionError
from toolkit.exchange.sorting import packed_sort
from toolkit.exchange.transfers import check_transfers
from toolkit.tables import BIG, ID, frame
from toolkit.target import Target

GROUPS_SCHEMA = {
    "phase": ID,
    "group": BIG,          # unique over the exchange, in (phase, transfer_id, fragment) order
    "transfer_id": BIG,
    "fragment": ID,        # window-sized piece of the transfer
    "source": ID,
    "fanout": ID,          # destinations (1: unicast)
    "byte_offset": BIG,    # offset of the fragment in the transfer
    "size_bytes": BIG,
    "words": BIG,
    "packets": ID,
    "src_offset": BIG,     # byte offset of the fragment in the source object
    "src_object": BIG,
}
PACKETS_SCHEMA = {
    "phase": ID, "group": BIG, "transfer_id": BIG, "fragment": ID,
    "packet": ID,          # index within the group; packets of a group go back to back
    "words": BIG,
    "word_offset": BIG,    # from the start of the transfer
}
PASSES_SCHEMA = {
    "phase": ID,
    "tile": ID,            # receiving tile
    "pass": ID,            # staging pass (global sub-phase of the exchange phase)
    "group": BIG,
    "transfer_id": BIG,
    "fragment": ID,
    "byte_offset": BIG,    # offset of the fragment in the transfer
    "size_bytes": BIG,
    "staged_bytes": BIG,   # window bytes used (whole words); 0 when received directly
    "staging_offset": BIG, # offset in the tile's staging window; null when received directly
    "dst_offset": BIG,     # byte offset of the fragment in the destination object
    "dst_object": BIG,
    "staging_object": BIG,
}



def packetize(transfers: pl.DataFrame, target: Target) -> pl.DataFrame:
    """Packets of every group of every transfer (PACKETS_SCHEMA)."""
    return packets_of(fragment(check_transfers(transfers, target), target), target)


def stage_passes(transfers: pl.DataFrame, target: Target) -> pl.DataFrame:
    """Staging passes of every receiving tile in every phase (PASSES_SCHEMA)."""
    t = check_transfers(transfers, target)
    return passes_of(t, fragment(t, target), target)


# -- steps of the lowering ----------------------------------------------------
def fragment(t: pl.DataFrame, target: Target) -> pl.DataFrame:
    """One row per group (GROUPS_SCHEMA) from checked transfers (sorted, so each transfer's rows are adjacent)."""
    wb = target.word_bytes
    fw = _fragment_words(target)
    first_row, fanout = transfer_runs(t)

    def per(name: str) -> np.ndarray:
        return t[name].to_numpy()[first_row]

    size = per("size_bytes")
    words = -(-size // wb)
    nfrag = -(-words // fw)
    rep = np.repeat(np.arange(len(first_row)), nfrag)
    frag = ranks(nfrag)
    word_off = frag * fw
    fwords = np.minimum(fw, words[rep] - word_off)
    byte_off = word_off * wb
    fbytes = np.minimum(fw * wb, size[rep] - byte_off)
    first, pmax = target.first_packet_max_words, target.packet_max_words
    npk = 1 + -(-np.maximum(fwords - first, 0) // pmax)
    return frame({
        "phase": per("phase")[rep], "group": np.arange(len(rep)), "transfer_id": per("transfer_id")[rep],
        "fragment": frag, "source": per("source")[rep], "fanout": fanout[rep], "byte_offset": byte_off,
        "size_bytes": fbytes, "words": fwords, "packets": npk,
        "src_offset": per("src_offset")[rep] + byte_off,
        "src_object": t["src_object"].gather(first_row[rep]),
    }, GROUPS_SCHEMA, what="exchange groups")


def transfer_runs(t: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """First row and row count (fanout) of every transfer of a checked, sorted transfers frame."""
    tid = t["transfer_id"].to_numpy()
    first_row = np.flatnonzero(np.r_[True, tid[1:] != tid[:-1]]) if len(tid) else np.zeros(0, dtype=np.int64)
    return first_row, np.diff(np.r_[first_row, len(tid)])


def packets_of(groups: pl.DataFrame, target: Target) -> pl.DataFrame:
    first, pmax = target.first_packet_max_words, target.packet_max_words
    npk = groups["packets"].to_numpy().astype(np.int64)
    rep = np.repeat(np.arange(groups.height), npk)
    p = ranks(npk)
    gwords = groups["words"].to_numpy()[rep]
    off = np.where(p == 0, 0, first + (p - 1) * pmax)
    words = np.where(p == 0, np.minimum(gwords, first), np.minimum(pmax, gwords - off))
    base = groups["fragment"].to_numpy()[rep].astype(np.int64) * _fragment_words(target)
    return frame({
        "phase": groups["phase"].to_numpy()[rep], "group": groups["group"].to_numpy()[rep],
        "transfer_id": groups["transfer_id"].to_numpy()[rep], "fragment": groups["fragment"].to_numpy()[rep],
        "packet": p, "words": words, "word_offset": base + off,
    }, PACKETS_SCHEMA, what="exchange packets")


def passes_of(t: pl.DataFrame, groups: pl.DataFrame, target: Target) -> pl.DataFrame:
    """Receive rows (one per group and destination) with their staging pass and window offset.

    Rows come out sorted by (phase, tile, pass, group). Only transfers cut into
    several fragments are expanded; each ordering is one sort of packed integer keys.
    Each receiver offers its multicast groups to the staging rounds first (group
    order), then its unicast groups by the sender's offset from it
    (``(source - tile) mod tiles``), so the rounds spread over the senders.
    """
    window = target.staging_window_bytes
    wb = target.word_bytes
    n_groups = groups.height
    first_row, fanout = transfer_runs(t)
    gtid = groups["transfer_id"].to_numpy()
    gfirst = np.flatnonzero(np.r_[True, gtid[1:] != gtid[:-1]]) if n_groups else np.zeros(0, dtype=np.int64)
    nfrag = np.diff(np.r_[gfirst, n_groups])
    k = np.repeat(np.arange(len(first_row)), fanout)          # transfer of every transfer row
    t_phase = t["phase"].to_numpy().astype(np.int64)
    t_tile = t["destination"].to_numpy().astype(np.int64)
    row, grp = np.arange(t.height), gfirst[k]
    # each receiver offers its multicast groups to the staging rounds first, in group order (the same order at
    # every destination, so the lowest one is always admitted), then its unicast groups in order of the sender's
    # offset from it: for one offset, senders map one-to-one onto receivers, so a pass of a reduce-scatter (every
    # tile of a set sends to every other) draws on every sender once, not on the lowest-numbered one everywhere
    t_src = t["source"].to_numpy().astype(np.int64)
    n_tiles = int(max(t_tile.max(initial=0), t_src.max(initial=0))) + 1
    rot = np.where(fanout[k] > 1, 0, 1 + (t_src - t_tile) % n_tiles)
    keys = [t_phase, t_tile, rot]
    if len(nfrag) and nfrag.max() > 1:   # later fragments of transfers larger than the window: extra rows
        multi = np.flatnonzero(nfrag[k] > 1)
        extra = np.repeat(multi, nfrag[k[multi]] - 1)
        row = np.r_[row, extra]
        grp = np.r_[grp, gfirst[k[extra]] + 1 + ranks(nfrag[k[multi]] - 1)]
        keys = [t_phase[row], t_tile[row], rot[row], grp]
    # stable sort by (phase, tile, sender offset[, group]): rows are otherwise already in group order
    base = int(t_phase.min()) if len(t_phase) else 0
    keys[0] = keys[0] - base
    order, _ = packed_sort(keys)
    cell = (keys[0] * (int(t_tile.max(initial=0)) + 1) + keys[1])[order]
    row = row[order]
    grp = grp[order]
    seg = np.cumsum(np.r_[True, cell[1:] != cell[:-1]][:len(cell)]) - 1
    staged = np.where(t["staging_object"].is_not_null().to_numpy()[row], groups["words"].to_numpy()[grp] * wb, 0)
    pass_of = _rounds(seg, grp, staged, n_groups, window)
    rpass = pass_of[grp]
    if len(rpass):                                              # (phase, tile, pass, group)
        order, _ = packed_sort([seg, rpass, grp])
        row, grp, staged, rpass, seg = row[order], grp[order], staged[order], rpass[order], seg[order]
    new = np.r_[True, (seg[1:] != seg[:-1]) | (rpass[1:] != rpass[:-1])][:len(row)]
    csum = np.cumsum(staged)
    start = np.flatnonzero(new)
    offset = csum - staged - (csum[start] - staged[start])[np.cumsum(new) - 1]
    byte_off = groups["byte_offset"].to_numpy()[grp]
    stg = t["staging_object"].gather(row)
    out = frame({
        "phase": t_phase[row], "tile": t_tile[row], "pass": rpass, "group": grp,
        "transfer_id": gtid[grp], "fragment": groups["fragment"].to_numpy()[grp], "byte_offset": byte_off,
        "size_bytes": groups["size_bytes"].to_numpy()[grp], "staged_bytes": staged,
        "staging_offset": offset,
        "dst_offset": t["dst_offset"].to_numpy()[row] + byte_off,
        "dst_object": t["dst_object"].gather(row), "staging_object": stg,
    }, PASSES_SCHEMA, what="exchange passes")
    if stg.null_count():
        out = out.with_columns(pl.when(pl.col("staging_object").is_not_null()).then(pl.col("staging_offset"))
                               .alias("staging_offset"))
    return out


def _rounds(seg: np.ndarray, grp: np.ndarray, staged: np.ndarray, n_groups: int, window: int) -> np.ndarray:
    """Pass per group; rows sorted by (phase, tile) segment ``seg``, then in the order offered to the rounds.

    One round per pass, each a few vectorized sweeps: a sweep admits every remaining
    group whose running staged total (this round's admitted bytes plus all remaining
    rows before it in its segment) fits the window at each of its destinations;
    later sweeps fill gaps left by groups rejected at other tiles (a first-fit in
    the offered order, vectorized). A round that admits nothing (every candidate
    blocked behind another at some destination) takes the lowest remaining group
    alone, so every round makes progress.
    Rows that can never reject a group are left out first: direct receives, every
    row of a segment whose whole staged total fits, and segments identical to an
    earlier one (same groups, same staged bytes: a multicast's panel tiles), which
    reject exactly the same groups.
    """
    pass_of = np.zeros(n_groups, dtype=np.int64)
    if not len(seg):
        return pass_of
    total = np.bincount(seg, weights=staged)
    keep = (staged > 0) & (total[seg] > window)
    if not keep.any():
        return pass_of
    seg, grp, staged = _distinct_segments(seg[keep], grp[keep], staged[keep])
    live = np.ones(len(grp), dtype=bool)
    r = 0
    while live.any():
        load = np.zeros(int(seg[-1]) + 1, dtype=np.int64)
        admit = np.zeros(n_groups, dtype=bool)
        cand = live.copy()
        for _ in range(SWEEPS):
            idx = np.flatnonzero(cand)
            if not len(idx):
                break
            s, sg = staged[idx], seg[idx]
            first = np.r_[True, sg[1:] != sg[:-1]]
            csum = np.cumsum(s)
            start = np.flatnonzero(first)
            running = load[sg] + csum - (csum[start] - s[start])[np.cumsum(first) - 1]
            bad = np.zeros(n_groups, dtype=bool)
            bad[grp[idx][running > window]] = True
            took = np.zeros(n_groups, dtype=bool)
            took[grp[idx]] = True
            took &= ~bad
            if not took.any():
                break
            admit |= took
            rows_took = took[grp] & cand
            load += np.bincount(seg[rows_took], weights=staged[rows_took], minlength=len(load)).astype(np.int64)
            cand &= ~rows_took
        if not admit.any():   # every candidate blocked by another at some destination: take the lowest alone
            admit[grp[live].min()] = True
        pass_of[admit] = r
        live &= ~admit[grp]
        r += 1
    return pass_of


def _distinct_segments(seg: np.ndarray, grp: np.ndarray, staged: np.ndarray,
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep the first of every set of segments with identical (group, staged) rows; renumber segments densely.

    Candidates are found by a 64-bit hash of each segment's rows, then confirmed row by
    row, so a hash collision only keeps a duplicate, never drops a distinct segment.
    """
    start = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    length = np.diff(np.r_[start, len(seg)])
    salt = np.random.default_rng(0x5EED).integers(0, 2**63, size=int(grp.max()) + 1, dtype=np.int64)
    with np.errstate(over="ignore"):
        mix = salt.astype(np.uint64)[grp] * np.uint64(0x9E3779B97F4A7C15) ^ staged.astype(np.uint64)
        key = np.add.reduceat(mix, start) ^ (length.astype(np.uint64) << np.uint64(40))
    _, first_of, which = np.unique(key, return_index=True, return_inverse=True)
    rep = first_of[which]                      # representative segment of each segment
    dup = rep != np.arange(len(start))
    if not dup.any():
        return np.repeat(np.arange(len(start)), length), grp, staged
    # confirm: every row of a duplicate equals the same-position row of its representative
    row_seg = np.repeat(np.arange(len(start)), length)
    pos = np.arange(len(seg)) - start[row_seg]
    twin = start[rep[row_seg]] + np.minimum(pos, length[rep[row_seg]] - 1)
    differs = (grp != grp[twin]) | (staged != staged[twin]) | (length[rep[row_seg]] != length[row_seg])
    bad = np.zeros(len(start), dtype=bool)
    bad[row_seg[differs]] = True
    keep_seg = ~dup | bad
    keep = keep_seg[row_seg]
    new_seg = np.cumsum(keep_seg) - 1
    return new_seg[row_seg[keep]], grp[keep], staged[keep]


SWEEPS = 6


def ranks(counts: np.ndarray) -> np.ndarray:
    """0..c-1 for each count c, concatenated (a segmented arange)."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


def dense_rank_sorted(values: np.ndarray) -> np.ndarray:
    """0, 0, 1, 1, 1, 2, ...: rank of each value of an already sorted array among its distinct values."""
    if not len(values):
        return np.zeros(0, dtype=np.int64)
    return np.cumsum(np.r_[False, values[1:] != values[:-1]])


def sort_order(keys: list[np.ndarray]) -> np.ndarray:
    """Stable argsort by several non-negative integer keys (first key most significant)."""
    return packed_sort(keys)[0]


def _fragment_words(target: Target) -> int:
    fw = target.staging_window_bytes // target.word_bytes
    if fw <= 0:
        msg = (f"staging_window_bytes={target.staging_window_bytes} is smaller than one word "
               f"(word_bytes={target.word_bytes}); exchange fragments need at least one word")
        raise OptionError(msg, field="staging_window_bytes", value=target.staging_window_bytes)
    return fw
