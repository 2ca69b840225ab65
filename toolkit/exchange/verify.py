"""Independent checker of a lowered exchange.

Shares no code with the lowering: it reads the user's transfers and the
``Exchange`` frames and re-derives every invariant with its own numpy passes
(packed-integer sorts, run boundaries, gathers), so it stays linear-ish on
millions of receive rows.

- every transfer's words are packetized exactly once (packets tile ``[0, words)``),
  packet sizes respect the target's first-packet and packet limits, a group's
  packets belong to one transfer and are numbered 0.. in word order;
- every destination receives every byte exactly once (the ``passes`` rows of each
  (transfer, destination) tile ``[0, size_bytes)``), and nothing else is received;
- staged bytes of a (phase, tile, pass) sit inside the window without overlap;
- no tile sends twice or receives twice in one step; passes run in order;
- plan rows match the groups and packets (one send row at the source, one
  receive row per destination, same step, words, packet count, fanout, staging offset).

Any violation raises :class:`InvalidIRError` carrying the offending rows.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.errors import InvalidIRError
from toolkit.exchange.sorting import packed_order
from toolkit.target import Target

# plan row word positions (the layout documented in toolkit.exchange.lower)
W_ROLE, W_STEP, W_PARTNER, W_WORDS, W_STAGING, W_OFFSET, W_PACKETS, W_FANOUT = range(8)
NONE_WORD = 0xFFFFFFFF
MAX_ROWS = 1000   # offending rows carried by an error


def verify_exchange(exchange: object, transfers: pl.DataFrame, target: Target) -> None:
    """Raise InvalidIRError unless ``exchange`` delivers ``transfers`` correctly on ``target``."""
    t = transfers
    if isinstance(t.schema.get("destination"), pl.List):
        t = t.explode("destination")
    per = _Transfers(t)
    _check_packets(exchange.packets, per, target)
    matched = _check_delivery(exchange.passes, per)
    _check_staging(exchange.passes, matched, target)
    _check_lanes(exchange.rows)
    _check_rows(exchange.rows, exchange.packets, exchange.passes, per)


class _Transfers:
    """The user's transfers as numpy: rows sorted by (transfer, destination) and one entry per transfer."""

    def __init__(self, t: pl.DataFrame) -> None:
        tid = _i64(t["transfer_id"])
        dst = _i64(t["destination"])
        staged = (~t["staging_object"].is_null().to_numpy() if "staging_object" in t.columns
                  else np.zeros(t.height, dtype=bool))
        order, _ = packed_order([_rank(tid), dst])
        if order is not None:
            tid, dst, staged = tid[order], dst[order], staged[order]
        first = _starts(tid)
        at = first if order is None else order[first]
        self.ids = tid[first]                                  # ascending transfer ids
        self.phase = _i64(t["phase"])[at]
        self.source = _i64(t["source"])[at]
        self.size = _i64(t["size_bytes"])[at]
        self.index = np.cumsum(np.r_[False, tid[1:] != tid[:-1]]) if len(tid) else tid  # per sorted row
        self.dst = dst
        self.staged = staged
        self.tiles = int(dst.max()) + 1 if len(dst) else 1

    def lookup(self, tid: np.ndarray) -> np.ndarray:
        """Transfer index of each id, -1 when the transfers do not have it."""
        if not len(self.ids) or not len(tid):
            return np.full(len(tid), -1, dtype=np.int64)
        lo, hi = int(self.ids[0]), int(self.ids[-1])
        if hi - lo < 4 * len(self.ids) + 1024:      # dense ids: a lookup table
            table = np.full(hi - lo + 1, -1, dtype=np.int64)
            table[self.ids - lo] = np.arange(len(self.ids))
            inside = (tid >= lo) & (tid <= hi)
            out = np.full(len(tid), -1, dtype=np.int64)
            out[inside] = table[tid[inside] - lo]
            return out
        pos = np.minimum(np.searchsorted(self.ids, tid), len(self.ids) - 1)
        return np.where(self.ids[pos] == tid, pos, -1)


# -- helpers (numpy) ----------------------------------------------------------
def _i64(s: pl.Series) -> np.ndarray:
    """Integer column as numpy (int32 columns stay int32: every use below widens where it multiplies)."""
    if s.dtype in (pl.Int32, pl.Int64) and not s.null_count():
        return s.to_numpy()
    return s.cast(pl.Int64).to_numpy()


def _starts(a: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.r_[True, a[1:] != a[:-1]]) if len(a) else np.zeros(0, dtype=np.int64)


def _rank(a: np.ndarray) -> np.ndarray:
    """Dense rank among the distinct values (a sort only when ``a`` is not already non-decreasing)."""
    if not len(a):
        return a.astype(np.int64)
    if np.all(a[1:] >= a[:-1]):
        return np.cumsum(np.r_[False, a[1:] != a[:-1]])
    return np.unique(a, return_inverse=True)[1].astype(np.int64)


def _order(keys: list[np.ndarray]) -> np.ndarray:
    """Stable argsort by non-negative integer keys (first most significant)."""
    order, _ = packed_order(keys)
    return np.arange(len(keys[0])) if order is None else order


def _raise(msg: str, frame: pl.DataFrame, bad: np.ndarray) -> None:
    """Raise with the rows of ``frame`` flagged by ``bad`` (a boolean mask or row indices), if any."""
    idx = np.flatnonzero(bad) if bad.dtype == bool else bad
    if len(idx):
        raise InvalidIRError(f"{msg} ({len(idx)} offending rows)", rows=frame[idx[:MAX_ROWS]])


def _tiling(start: np.ndarray, offset: np.ndarray, length: np.ndarray, total: np.ndarray,
            ) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by key then offset (``start`` marks each key's first row) checked as an exact tiling of
    ``[0, total)`` (``total`` given per row): (pieces not at 0 or not right after the previous piece,
    last pieces that do not end at ``total``)."""
    end = offset + length
    gap = np.where(start, offset != 0, offset != np.r_[0, end[:-1]])
    last = np.r_[start[1:], True] if len(start) else start
    return gap, last & (end != total)


# -- checks -------------------------------------------------------------------
def _check_packets(packets: pl.DataFrame, per: _Transfers, target: Target) -> None:
    wb = target.word_bytes
    tix = per.lookup(_i64(packets["transfer_id"]))
    _raise("packets of a transfer that does not exist", packets, tix < 0)
    have = np.bincount(tix, minlength=len(per.ids)) if len(tix) else np.zeros(len(per.ids), dtype=np.int64)
    if np.any(have == 0):
        missing = np.flatnonzero(have == 0)
        _raise("transfer without packets", pl.DataFrame({"transfer_id": per.ids[missing]}), np.arange(len(missing)))
    words = _i64(packets["words"])
    off = _i64(packets["word_offset"])
    _raise("packet with no words", packets, words <= 0)
    if not len(words):
        return
    # words of each transfer tiled exactly once
    order = np.lexsort((off, tix))
    ts = tix[order]
    gap, _ = _tiling(np.r_[True, ts[1:] != ts[:-1]], off[order], words[order], np.zeros(len(order), np.int64))
    _raise("packet words of a transfer overlap or leave a gap", packets, order[gap])
    total = -(-per.size // wb)
    sums = np.bincount(tix, weights=words, minlength=len(per.ids)).astype(np.int64)
    bad_t = np.flatnonzero(sums != total)
    if len(bad_t):
        _raise("packet words do not add up to the transfer's words",
               pl.DataFrame({"transfer_id": per.ids[bad_t], "_packet_words": sums[bad_t], "_words": total[bad_t]}),
               np.arange(len(bad_t)))
    # packet limits within each group: the first (lowest offset) packet is short
    grp = _i64(packets["group"])
    order = np.lexsort((off, grp))
    g = grp[order]
    start = np.r_[True, g[1:] != g[:-1]]
    gstart = np.flatnonzero(start)
    rank = np.arange(len(g)) - np.repeat(gstart, np.diff(np.r_[gstart, len(g)]))
    t_sorted = tix[order]
    mixed_group = np.zeros(len(g), dtype=bool)
    mixed_group[1:] = ~start[1:] & (t_sorted[1:] != t_sorted[:-1])
    mixed = np.maximum.reduceat(mixed_group, gstart)
    _raise("a group mixes several transfers", packets, order[np.repeat(mixed, np.diff(np.r_[gstart, len(g)]))])
    w = words[order]
    _raise(f"first packet of a group exceeds first_packet_max_words={target.first_packet_max_words}",
           packets, order[(rank == 0) & (w > target.first_packet_max_words)])
    _raise(f"packet exceeds packet_max_words={target.packet_max_words}", packets,
           order[w > target.packet_max_words])
    _raise("packet indices of a group are not 0.. in word order", packets,
           order[_i64(packets["packet"])[order] != rank])


def _check_delivery(passes: pl.DataFrame, per: _Transfers) -> np.ndarray:
    """Check every (transfer, destination) receives its bytes exactly once; return, for every passes row,
    whether its transfer stages at that tile."""
    tix = per.lookup(_i64(passes["transfer_id"]))
    tile = _i64(passes["tile"])
    tiles = max(per.tiles, int(tile.max()) + 1 if len(tile) else 1)
    _raise("received bytes on a tile that is not a destination of the transfer (unknown transfer or tile)",
           passes, (tix < 0) | (tile < 0))
    key_t = per.index * tiles + per.dst                   # ascending: per rows are in (transfer, tile) order
    key_p = tix * tiles + tile
    order = _order([key_p])
    ks = key_p[order]
    pos = np.minimum(np.searchsorted(key_t, ks), max(len(key_t) - 1, 0))
    hit = key_t[pos] == ks if len(key_t) else np.zeros(len(ks), dtype=bool)
    _raise("received bytes on a tile that is not a destination of the transfer", passes, order[~hit])
    got = np.bincount(pos, minlength=len(key_t)) if len(pos) else np.zeros(len(key_t), dtype=np.int64)
    if np.any(got == 0):
        miss = np.flatnonzero(got == 0)
        _raise("destination that receives nothing",
               pl.DataFrame({"transfer_id": per.ids[per.index[miss]], "tile": per.dst[miss]}), np.arange(len(miss)))
    off = _i64(passes["byte_offset"])
    size = _i64(passes["size_bytes"])
    start = np.r_[True, ks[1:] != ks[:-1]] if len(ks) else np.zeros(0, dtype=bool)
    if not np.all(start | (off[order] >= np.r_[0, off[order][:-1]])):
        order = np.lexsort((off, key_p))   # several fragments at a destination, out of offset order
        ks = key_p[order]
        pos = np.searchsorted(key_t, ks)
    gap, end = _tiling(start, off[order], size[order], per.size[per.index[pos]])
    _raise("received bytes of a transfer overlap or leave a gap at a destination", passes, order[gap])
    _raise("received bytes do not add up to the transfer's size", passes, order[end])
    staged = np.zeros(len(order), dtype=bool)
    staged[order] = per.staged[pos]
    return staged


def _check_staging(passes: pl.DataFrame, staged: np.ndarray, target: Target) -> None:
    wb, window = target.word_bytes, target.staging_window_bytes
    soff_s = passes["staging_offset"]
    _raise("staged fragment without a staging offset", passes, staged & soff_s.is_null().to_numpy())
    soff = _i64(soff_s.fill_null(0))
    sbytes = _i64(passes["staged_bytes"])
    size = _i64(passes["size_bytes"])
    _raise("staged fragment smaller than its words", passes, staged & (sbytes < -(-size // wb) * wb))
    _raise(f"staged fragment outside the {window}-byte staging window", passes,
           staged & ((soff < 0) | (soff + sbytes > window)))
    idx = None if staged.all() else np.flatnonzero(staged)

    def pick(a: np.ndarray) -> np.ndarray:
        return a if idx is None else a[idx]

    phase = pick(_i64(passes["phase"]))
    keys = [phase - phase.min() if len(phase) else phase, pick(_i64(passes["tile"])), pick(_i64(passes["pass"]))]
    cell_order, cell = packed_order(keys)     # (phase, tile, pass) cells
    if cell is None:
        order = np.lexsort((pick(soff), *keys[::-1]))
        k = [a[order] for a in keys]
        same = np.r_[False, (k[0][1:] == k[0][:-1]) & (k[1][1:] == k[1][:-1]) & (k[2][1:] == k[2][:-1])]
    else:
        start = pick(soff) if cell_order is None else pick(soff)[cell_order]
        same = np.r_[False, cell[1:] == cell[:-1]]
        order = np.arange(len(cell)) if cell_order is None else cell_order
        if not np.all(~same | (start >= np.r_[0, start[:-1]])):   # offsets out of order within a cell
            order = np.lexsort((pick(soff), *keys[::-1]))
            k = [a[order] for a in keys]
            same = np.r_[False, (k[0][1:] == k[0][:-1]) & (k[1][1:] == k[1][:-1]) & (k[2][1:] == k[2][:-1])]
    end = pick(soff + sbytes)[order]
    lap = same & (pick(soff)[order] < np.r_[0, end[:-1]])
    rows_of = order if idx is None else idx[order]
    _raise("staged fragments overlap in a tile's window within one pass", passes, rows_of[lap])


def _check_lanes(rows: pl.DataFrame) -> None:
    phase = _i64(rows["phase"])
    step = _i64(rows["step"])
    tile = _i64(rows["tile"])
    send = (rows["role"] == "send").to_numpy()
    keys = [phase - phase.min() if len(phase) else phase, step - step.min() if len(step) else step, tile,
            (~send).astype(np.int64)]
    order, packed = packed_order(keys)
    k = keys if order is None else [a[order] for a in keys]
    order = np.arange(len(phase)) if order is None else order
    if packed is not None:
        dup = np.r_[False, packed[1:] == packed[:-1]]
    else:
        dup = np.r_[False, np.all([a[1:] == a[:-1] for a in k], axis=0)] if len(order) > 1 else np.zeros(0, bool)
    if dup.any():
        twice = np.zeros(len(order), dtype=bool)
        twice[dup] = True
        twice[np.flatnonzero(dup) - 1] = True
        role = "send" if send[order[np.flatnonzero(dup)[0]]] else "receive"
        _raise(f"a tile has two {role} rows in one step", rows, order[twice])
    # passes in order: along (phase, step) the pass never decreases, and one step has one pass
    pss = _i64(rows["pass"])[order]
    same_phase = np.r_[False, k[0][1:] == k[0][:-1]]
    same_step = same_phase & np.r_[False, k[1][1:] == k[1][:-1]]
    prev = np.r_[0, pss[:-1]]
    _raise("steps of a staging pass start before the previous pass ends", rows,
           order[(same_phase & (pss < prev)) | (same_step & (pss != prev))])


def _check_rows(rows: pl.DataFrame, packets: pl.DataFrame, passes: pl.DataFrame, per: _Transfers) -> None:
    w = rows["words"].to_numpy()
    w = np.stack(w.tolist()).astype(np.int64) if w.dtype == object else w   # a List column: one array per row
    if w.ndim != 2 or (len(w) and w.shape[1] < 8):
        raise InvalidIRError(f"plan rows must carry at least 8 words each, got shape {w.shape}")
    step = _i64(rows["step"])
    send = (rows["role"] == "send").to_numpy()
    _raise("plan row step word differs from its step", rows, w[:, W_STEP] != step)
    _raise("plan row role word differs from its role", rows, w[:, W_ROLE] != np.where(send, 0, 1))
    # per group: packets (words, count, transfer) and receiving tiles (fanout)
    pgrp = _i64(packets["group"])
    rgrp = _i64(rows["group"])
    qgrp = _i64(passes["group"])
    ids = np.unique(pgrp)
    lo = int(min(ids.min() if len(ids) else 0, rgrp.min() if len(rgrp) else 0, qgrp.min() if len(qgrp) else 0))
    hi = int(max(ids.max() if len(ids) else 0, rgrp.max() if len(rgrp) else 0, qgrp.max() if len(qgrp) else 0))
    if hi - lo > 4 * (len(ids) + 1) + 4096:   # sparse group ids: index them densely
        allg = np.unique(np.r_[pgrp, rgrp, qgrp])
        pgrp, rgrp, qgrp = (np.searchsorted(allg, a) for a in (pgrp, rgrp, qgrp))
        lo, size = 0, len(allg)
    else:
        pgrp, rgrp, qgrp, size = pgrp - lo, rgrp - lo, qgrp - lo, hi - lo + 1
    pk_n = np.bincount(pgrp, minlength=size)
    pk_words = np.bincount(pgrp, weights=_i64(packets["words"]), minlength=size).astype(np.int64)
    pk_tix = np.full(size, -1, dtype=np.int64)
    pk_tix[pgrp] = per.lookup(_i64(packets["transfer_id"]))
    fanout = np.bincount(qgrp, minlength=size)
    _raise("plan rows of a group without packets", rows, pk_n[rgrp] == 0)
    _raise("plan row words/packets differ from the group's packets", rows,
           (w[:, W_WORDS] != pk_words[rgrp]) | (w[:, W_PACKETS] != pk_n[rgrp]))
    _raise("plan row fanout differs from the group's receiving tiles", rows, w[:, W_FANOUT] != fanout[rgrp])
    sends = np.bincount(rgrp[send], minlength=size)
    no_send = np.flatnonzero((pk_n > 0) & (sends == 0))
    if len(no_send):
        _raise("group without exactly one send row", pl.DataFrame({"group": no_send + lo}), np.arange(len(no_send)))
    _raise("group with several send rows", rows, send & (sends[rgrp] > 1))
    send_step = np.full(size, -1, dtype=np.int64)
    send_step[rgrp[send]] = step[send]
    _raise("rows of one group are in different steps", rows, step != send_step[rgrp])
    source = np.where(pk_tix >= 0, np.r_[per.source, -1][pk_tix], -1)
    tile = _i64(rows["tile"])
    _raise("send row not on the transfer's source tile", rows, send & (tile != source[rgrp]))
    _raise("receive row does not name the source tile", rows, ~send & (w[:, W_PARTNER] != source[rgrp]))
    # receive rows and passes rows: the same (group, tile) pairs, in the same pass, at the same staging offset
    recv = np.flatnonzero(~send)
    qtile = _i64(passes["tile"])
    tiles = int(max(tile.max() if len(tile) else 0, qtile.max() if len(qtile) else 0)) + 1
    key_r = rgrp[recv] * tiles + tile[recv]
    key_q = qgrp * tiles + qtile
    o_r, o_q = _order([key_r]), _order([key_q])
    kr, kq = key_r[o_r], key_q[o_q]
    if len(kr) != len(kq) or not np.array_equal(kr, kq):
        only_r = recv[o_r][~np.isin(kr, kq)]
        only_q = o_q[~np.isin(kq, kr)]
        _raise("receive rows and receiving tiles of a group differ (receive rows without a passes row)", rows, only_r)
        _raise("receive rows and receiving tiles of a group differ (passes rows without a receive row)",
               passes, only_q)
        dup_r = recv[o_r][np.r_[False, kr[1:] == kr[:-1]]]
        _raise("receive rows and receiving tiles of a group differ (a tile has two receive rows)", rows, dup_r)
        _raise("receive rows and receiving tiles of a group differ (a tile has two passes rows)", passes,
               o_q[np.r_[False, kq[1:] == kq[:-1]]])
    rr, qq = recv[o_r], o_q
    _raise("receive row is in a different staging pass than its passes row", rows,
           rr[_i64(rows["pass"])[rr] != _i64(passes["pass"])[qq]])
    soff = _i64(passes["staging_offset"].fill_null(NONE_WORD))[qq]
    _raise("receive row staging offset differs from its pass", rows, rr[w[rr, W_STAGING] != soff])
