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

from toolkit.errors import ModelError, OptionError
from toolkit.tables import BIG, ID, TRANSFERS_SCHEMA, frame
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

_REQUIRED = ("transfer_id", "phase", "source", "destination", "size_bytes")
_PER_TRANSFER = ("phase", "source", "size_bytes", "src_offset", "src_object", "tensor_id")


def packetize(transfers: pl.DataFrame, target: Target) -> pl.DataFrame:
    """Packets of every group of every transfer (PACKETS_SCHEMA)."""
    return packets_of(fragment(check_transfers(transfers, target), target), target)


def stage_passes(transfers: pl.DataFrame, target: Target) -> pl.DataFrame:
    """Staging passes of every receiving tile in every phase (PASSES_SCHEMA)."""
    t = check_transfers(transfers, target)
    return passes_of(t, fragment(t, target), target)


# -- steps of the lowering ----------------------------------------------------
def fragment(t: pl.DataFrame, target: Target) -> pl.DataFrame:
    """One row per group (GROUPS_SCHEMA) from checked transfers."""
    wb = target.word_bytes
    fw = _fragment_words(target)
    per = (t.group_by("transfer_id", maintain_order=True)
           .agg(pl.col(*_PER_TRANSFER).first(), pl.len().alias("fanout")))
    size = per["size_bytes"].to_numpy()
    words = -(-size // wb)
    nfrag = -(-words // fw)
    rep = np.repeat(np.arange(per.height), nfrag)
    frag = ranks(nfrag)
    word_off = frag * fw
    fwords = np.minimum(fw, words[rep] - word_off)
    byte_off = word_off * wb
    fbytes = np.minimum(fw * wb, size[rep] - byte_off)
    first, pmax = target.first_packet_max_words, target.packet_max_words
    npk = 1 + -(-np.maximum(fwords - first, 0) // pmax)

    def col(name: str) -> np.ndarray:
        return per[name].to_numpy()[rep]

    src_off = per["src_offset"].to_numpy()[rep] + byte_off
    return frame({
        "phase": col("phase"), "group": np.arange(len(rep)), "transfer_id": col("transfer_id"),
        "fragment": frag, "source": col("source"), "fanout": col("fanout"), "byte_offset": byte_off,
        "size_bytes": fbytes, "words": fwords, "packets": npk, "src_offset": src_off,
        "src_object": per["src_object"].gather(rep),
    }, GROUPS_SCHEMA, what="exchange groups")


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
    """Receive rows (one per group and destination) with their staging pass and window offset."""
    window = target.staging_window_bytes
    wb = target.word_bytes
    recv = (groups.select("phase", "group", "transfer_id", "fragment", "byte_offset", "size_bytes", "words")
            .join(t.select("transfer_id", "destination", "dst_offset", "dst_object", "staging_object"),
                  on="transfer_id", how="inner")
            .sort("phase", "destination", "group"))
    phase = recv["phase"].to_numpy().astype(np.int64)
    tile = recv["destination"].to_numpy().astype(np.int64)
    grp = recv["group"].to_numpy()
    staged = np.where(recv["staging_object"].is_null().to_numpy(), 0, recv["words"].to_numpy() * wb)
    pass_of = _rounds(phase, tile, grp, staged, groups.height, window)
    rpass = pass_of[grp]
    order = np.lexsort((grp, rpass, tile, phase))
    recv = recv[order]
    staged = staged[order]
    key_phase, key_tile, key_pass = phase[order], tile[order], rpass[order]
    new = np.r_[True, (np.diff(key_phase) != 0) | (np.diff(key_tile) != 0) | (np.diff(key_pass) != 0)]
    new = new[:len(staged)]
    csum = np.cumsum(staged)
    start = np.flatnonzero(new)
    seg = np.cumsum(new) - 1
    offset = csum - staged - (csum[start] - staged[start])[seg]
    out = frame({
        "phase": key_phase, "tile": key_tile, "pass": key_pass, "group": recv["group"],
        "transfer_id": recv["transfer_id"], "fragment": recv["fragment"], "byte_offset": recv["byte_offset"],
        "size_bytes": recv["size_bytes"], "staged_bytes": staged, "staging_offset": offset,
        "dst_offset": recv["dst_offset"].to_numpy() + recv["byte_offset"].to_numpy(),
        "dst_object": recv["dst_object"], "staging_object": recv["staging_object"],
    }, PASSES_SCHEMA, what="exchange passes")
    return out.with_columns(pl.when(pl.col("staging_object").is_not_null()).then(pl.col("staging_offset"))
                            .alias("staging_offset"))


def _rounds(phase: np.ndarray, tile: np.ndarray, grp: np.ndarray, staged: np.ndarray,
            n_groups: int, window: int) -> np.ndarray:
    """Pass per group; rows sorted by (phase, tile, group).

    One round per pass, each a few vectorized sweeps: a sweep admits every remaining
    group whose running staged total (this round's admitted bytes plus all remaining
    groups before it) fits the window at each of its destinations. The first sweep
    admits at least the first remaining group of each phase; later sweeps fill gaps
    left by groups rejected at other tiles (a first-fit in group order, vectorized).
    """
    new = np.r_[True, (np.diff(phase) != 0) | (np.diff(tile) != 0)][:len(grp)]
    seg = np.cumsum(new) - 1
    pass_of = np.full(n_groups, -1, dtype=np.int64)
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
            bad[grp[idx][(s > 0) & (running > window)]] = True
            took = np.zeros(n_groups, dtype=bool)
            took[grp[idx]] = True
            took &= ~bad
            if not took.any():
                break
            admit |= took
            rows_took = took[grp] & cand
            load += np.bincount(seg[rows_took], weights=staged[rows_took], minlength=len(load)).astype(np.int64)
            cand &= ~rows_took
        pass_of[admit] = r
        live &= ~admit[grp]
        r += 1
    return pass_of


SWEEPS = 6


def ranks(counts: np.ndarray) -> np.ndarray:
    """0..c-1 for each count c, concatenated (a segmented arange)."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


def _fragment_words(target: Target) -> int:
    fw = target.staging_window_bytes // target.word_bytes
    if fw <= 0:
        msg = (f"staging_window_bytes={target.staging_window_bytes} is smaller than one word "
               f"(word_bytes={target.word_bytes}); exchange fragments need at least one word")
        raise OptionError(msg, field="staging_window_bytes", value=target.staging_window_bytes)
    return fw


# -- input ---------------------------------------------------------------------
def check_transfers(transfers: pl.DataFrame, target: Target) -> pl.DataFrame:
    """Validate user transfers; return them with every TRANSFERS_SCHEMA column, sorted by (phase, transfer_id)."""
    if not isinstance(transfers, pl.DataFrame):
        msg = f"transfers must be a polars DataFrame (TRANSFERS_SCHEMA), got {type(transfers).__name__}"
        raise ModelError(msg, field="transfers", value=type(transfers).__name__)
    missing = [c for c in _REQUIRED if c not in transfers.columns]
    if missing:
        msg = f"transfers frame is missing column(s) {missing}; required: {list(_REQUIRED)}"
        raise ModelError(msg, field=missing[0], value=None)
    df = transfers
    if isinstance(df.schema["destination"], pl.List):
        empty = df.filter(pl.col("destination").list.len() == 0)
        if empty.height:
            _empty(empty["transfer_id"][0])
        df = df.explode("destination")
    for c in _REQUIRED:
        if not df.schema[c].is_integer():
            msg = f"transfers column {c!r} must hold integers, got {df.schema[c]}"
            raise ModelError(msg, field=c, value=str(df.schema[c]))
    for c in ("transfer_id", "phase", "source", "size_bytes"):
        nulls = df.filter(pl.col(c).is_null())
        if nulls.height:
            msg = f"transfers column {c!r} is null (transfer_id={nulls['transfer_id'][0]}); it is required"
            raise ModelError(msg, field=c, value=None)
    nulls = df.filter(pl.col("destination").is_null())
    if nulls.height:
        _empty(nulls["transfer_id"][0])
    fill = {c: pl.lit(0 if c in ("src_offset", "dst_offset") else None, dtype=TRANSFERS_SCHEMA[c])
            for c in TRANSFERS_SCHEMA if c not in df.columns}
    df = df.with_columns(**fill).with_columns(pl.col("src_offset", "dst_offset").fill_null(0))
    df = df.select([pl.col(c).cast(TRANSFERS_SCHEMA[c], strict=False) for c in TRANSFERS_SCHEMA])
    _check_values(df, target)
    return df.sort("phase", "transfer_id", "destination")


def _check_values(df: pl.DataFrame, target: Target) -> None:
    def first(cond: pl.Expr) -> dict | None:
        bad = df.filter(cond)
        return bad.row(0, named=True) if bad.height else None

    for c in ("source", "destination"):
        row = first(pl.col(c) < 0)
        if row:
            _fail(f"{c}={row[c]} on transfer_id={row['transfer_id']} is negative; tile ids start at 0", c, row[c])
        row = first(pl.col(c) >= target.tiles)
        if row:
            _fail(f"{c}={row[c]} on transfer_id={row['transfer_id']} is outside target {target.name!r} "
                  f"(tiles 0..{target.tiles - 1})", c, row[c])
    if not target.exchange_loopback:
        row = first(pl.col("source") == pl.col("destination"))
        if row:
            _fail(f"transfer_id={row['transfer_id']} sends from tile {row['source']} to itself "
                  f"(destination == source) but target {target.name!r} has exchange_loopback=False; "
                  "use a local copy", "destination", row["destination"])
    row = first(pl.col("size_bytes") <= 0)
    if row:
        _fail(f"size_bytes={row['size_bytes']} on transfer_id={row['transfer_id']}; a transfer carries "
              "at least one byte", "size_bytes", row["size_bytes"])
    for c in ("src_offset", "dst_offset"):
        row = first(pl.col(c) < 0)
        if row:
            _fail(f"{c}={row[c]} on transfer_id={row['transfer_id']} is negative", c, row[c])
    n_unique = df.group_by("transfer_id").agg(pl.col(*_PER_TRANSFER).n_unique(), pl.len().alias("_rows"),
                                              pl.col("destination").n_unique().alias("_dests"))
    for c in _PER_TRANSFER:
        bad = n_unique.filter(pl.col(c) > 1)
        if bad.height:
            tid = bad["transfer_id"][0]
            vals = df.filter(pl.col("transfer_id") == tid)[c].unique().sort().to_list()
            _fail(f"transfer_id={tid} has several {c} values {vals}; the rows of one transfer "
                  "(one per destination) must agree on it", c, vals)
    bad = n_unique.filter(pl.col("_dests") < pl.col("_rows"))
    if bad.height:
        tid = bad["transfer_id"][0]
        dests = df.filter(pl.col("transfer_id") == tid)["destination"]
        dup = dests.filter(dests.is_duplicated())[0]
        _fail(f"transfer_id={tid} lists destination {dup} twice; each destination receives a transfer once",
              "destination", dup)


def _fail(msg: str, field: str, value: object) -> None:
    raise ModelError(msg, field=field, value=value)


def _empty(tid: object) -> None:
    _fail(f"transfer_id={tid} has no destination (empty group); every transfer needs at least one "
          "destination row", "destination", None)
