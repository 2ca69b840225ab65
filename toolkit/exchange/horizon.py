"""Exchange horizons: how the hardware's exchange scheduler lays out a phase, per tile, lane and staging pass.

The one model of an exchange phase's duration: the lowering's per-phase
``est_cycles`` and the simulator's per-tile exchange spans come from here, and
the layout screen and refine price their estimates with the same per-tile rule
(:func:`toolkit.costs.tile_horizon_cycles`). Facts, all from ipu-stack's docs:

- A tile has one receive lane and one send lane, one 32-bit word per event
  each (HARDWARE.md section 4); they run at once.
- Receives are *cutovers* unless they continue the previous receive: the
  scheduler lets a receive follow the previous one at its neutral event only
  when it continues the same source and the receive pointer
  (``earliest_scheduled_receiver_offset`` in ``crates/ipu-exchange``);
  otherwise the next source selection waits for the previous payload to land,
  and its own payload arrives ``52 + 2 x physical row`` events after that
  selection (EXCHANGE_INSTRUCTION_REFERENCE.md). So the address layout of the
  receives (contiguous destinations from one source chain) changes the phase.
  Receives are taken in (source, destination object, offset) order: the
  scheduler keeps a source's contiguous runs together when it can.
- A transfer whose rectangle cuts an AMP panel (32-byte panel rows: 16 FP16
  or 32 FP8 columns) is, in the hardware's AMP-left layout, sent row by row:
  each strided run (the groups' ``runs``, from the schedule's slices) costs
  the sender ``costs.exchange_run_cycles`` of supervisor instructions (the fc1
  result 2x2 of MLP_LAYOUT_ALTERNATIVES.md: 3,779 -> 8,944).
- A paired 64-bit send borrows the partner tile's transmit lane (8 B/cycle);
  the partner must not send in that interval (EXCHANGE_INSTRUCTION_REFERENCE.md
  "Paired sender lane reservation"). A sender whose partner sends nothing in
  the pass sends paired.
- A paired 64-bit *transfer* (ipu-stack's ``select_transfer_widths`` and
  ``endpoint_work_lower_bound``): a group whose every receiving tile's partner
  (tile XOR 1) also receives it, and whose size is a whole number of 8-byte
  units (even words), is Paired64: every endpoint handles words / 2 events
  (receivers take 64 bits per event), and its sender borrows its partner's
  transmit lane for them. Cutovers are unchanged. The evidence: the 2026-09-07
  shared-row attention, whose K multicast to a head's 92 consecutive row
  owners is such a transfer, ran in less time than one-word receives of a
  head's K and V allow (ATTENTION_PRODUCT_LAYOUTS.md, 320,256 cycles with
  54,744- and 53,712-cycle kernels). The partner-idle send pairing above
  still halves the sender's other groups.
- Staging passes run one after another, a sync between them; the phase's
  horizon is the sum over its passes of the busiest tile's span, and the
  measured phase overruns that horizon by ``costs.exchange_phase_cycles``.
- Physical row: :func:`toolkit.costs.tile_rows` (46 rows of 2 paired tiles per
  92-tile column), so tile order and mapping change the phase through the rows
  and pairs they put the busy tiles on.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.costs import cutover_cycles, phase_overhead_cycles, tile_horizon_cycles, tile_rows
from toolkit.exchange.packets import sort_order
from toolkit.tables import BIG, ID
from toolkit.target import Target

TILE_HORIZONS_SCHEMA = {
    "phase": ID, "pass": ID, "tile": ID,
    "recv_words": BIG,     # words received
    "recv_events": BIG,    # receive-lane events (a paired 64-bit transfer counts half its words)
    "cutovers": BIG,       # receives that start a new (source, pointer) chain
    "send_words": BIG,     # send-lane events (paired transfers and paired sends count half their words)
    "sends": BIG,          # send fragments
    "runs": BIG,           # strided partial-panel runs among them (lower.strided_runs)
    "paired": pl.Boolean,  # the tile's sends borrow its idle partner's lane
    "horizon": BIG,        # the tile's span of the pass
}
PHASE_HORIZONS_SCHEMA = {"phase": ID, "passes": ID, "horizon": BIG, "est_cycles": BIG}


def _columns(groups: pl.DataFrame, passes: pl.DataFrame) -> tuple[dict, dict, np.ndarray]:
    g = {c: groups[c].to_numpy().astype(np.int64) for c in ("phase", "group", "source", "words", "pass")}
    g["runs"] = (groups["runs"].to_numpy().astype(np.int64) if "runs" in groups.columns
                 else np.zeros(groups.height, np.int64))
    r = {c: passes[c].to_numpy().astype(np.int64) for c in ("phase", "tile", "group", "dst_offset", "size_bytes")}
    r["dst_object"] = passes["dst_object"].fill_null(-1).to_numpy().astype(np.int64)
    gi = g["group"]
    idx = r["group"] - gi[0] if len(gi) and gi[-1] - gi[0] == len(gi) - 1 else np.searchsorted(gi, r["group"])
    return g, r, idx


def paired_groups(g: dict, r: dict, idx: np.ndarray) -> np.ndarray:
    """Per group row: whether the group is a paired 64-bit transfer -- every receiving tile's partner (tile XOR 1)
    also receives it, and its words are even (a whole number of 8-byte units)."""
    n = len(g["group"])
    if not len(idx):
        return np.zeros(n, bool)
    tile = r["tile"]
    width = int(tile.max()) + 2
    key = np.unique(idx * width + tile)
    pkey = idx * width + (tile ^ 1)
    pos = np.minimum(np.searchsorted(key, pkey), len(key) - 1)
    has = key[pos] == pkey
    missing = np.bincount(idx, weights=~has, minlength=n)
    receivers = np.bincount(idx, minlength=n)
    return (receivers > 0) & (missing == 0) & (g["words"] % 2 == 0)


def _receive_order(g: dict, r: dict, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Receive rows in (phase, pass, tile, source, object, offset) order and whether each is a cutover."""
    src, rpass = g["source"][idx], g["pass"][idx]
    order = sort_order([r["phase"] - (r["phase"].min() if len(idx) else 0), rpass, r["tile"], src,
                        r["dst_object"] + 1, r["dst_offset"]])
    key = [a[order] for a in (r["phase"], rpass, r["tile"], src, r["dst_object"])]
    off, size = r["dst_offset"][order], r["size_bytes"][order]
    same = np.ones(len(order) - 1 if len(order) else 0, dtype=bool)
    for a in key:
        same &= a[1:] == a[:-1]
    cont = np.r_[False, same & (off[1:] == off[:-1] + size[:-1])] if len(order) else np.zeros(0, bool)
    return order, ~cont


def _prepared(groups: pl.DataFrame, passes: pl.DataFrame) -> tuple:
    """The columns, receive order, cutovers and paired groups both :func:`tile_horizons` and
    :func:`activity_spans` read, computed once."""
    g, r, idx = _columns(groups, passes)
    order, cut = _receive_order(g, r, idx)
    return g, r, idx, order, cut, paired_groups(g, r, idx)


def tile_horizons(groups: pl.DataFrame, passes: pl.DataFrame, target: Target,
                  prepared: tuple | None = None) -> pl.DataFrame:
    """Every tile's part of every (phase, staging pass) (TILE_HORIZONS_SCHEMA), from lowered ``groups`` and
    ``passes`` (:func:`toolkit.exchange.lower_exchanges`); ``prepared``: their :func:`_prepared` columns."""
    g, r, idx, order, cut, pg = _prepared(groups, passes) if prepared is None else prepared
    events = np.where(pg, g["words"] // 2, g["words"])
    recv = pl.DataFrame({"phase": r["phase"][order], "pass": g["pass"][idx][order], "tile": r["tile"][order],
                         "w": g["words"][idx][order], "e": events[idx][order], "c": cut.astype(np.int64)})
    recv = recv.group_by("phase", "pass", "tile").agg(pl.col("w").sum().alias("recv_words"),
                                                      pl.col("e").sum().alias("recv_events"),
                                                      pl.col("c").sum().alias("cutovers"))
    send = (pl.DataFrame({"phase": g["phase"], "pass": g["pass"], "tile": g["source"],
                          "w": np.where(pg, 0, g["words"]), "pw": np.where(pg, events, 0), "r": g["runs"]})
            .group_by("phase", "pass", "tile").agg(pl.col("w").sum().alias("send_words"),
                                                   pl.col("pw").sum().alias("paired_words"),
                                                   pl.len().alias("sends"), pl.col("r").sum().alias("runs")))
    partner = pl.col("tile") + 1 - 2 * (pl.col("tile") % 2)
    busy = send.select("phase", "pass", partner.alias("tile"), pl.lit(True).alias("partner_sends"),
                       pl.col("paired_words").alias("borrowed"))   # a paired transfer holds the partner's lane too
    t = (recv.join(send, on=["phase", "pass", "tile"], how="full", coalesce=True)
         .join(busy, on=["phase", "pass", "tile"], how="left")
         .with_columns(pl.col("recv_words", "recv_events", "cutovers", "send_words", "paired_words", "borrowed",
                              "sends", "runs").fill_null(0).cast(pl.Int64),
                       ((pl.col("sends") > 0) & pl.col("partner_sends").is_null()).alias("paired")))
    sw = t["send_words"].to_numpy()
    lane = (np.where(t["paired"].to_numpy(), -(-sw // 2), sw) + t["paired_words"].to_numpy()
            + t["borrowed"].to_numpy())
    tiles = t["tile"].to_numpy()
    h = tile_horizon_cycles(t["recv_events"].to_numpy(), t["cutovers"].to_numpy(), lane, t["sends"].to_numpy(),
                            tile_rows(tiles, target), target, runs=t["runs"].to_numpy())
    t = t.with_columns(pl.Series("send_words", lane), pl.Series("horizon", h))
    return t.select([pl.col(c).cast(d) for c, d in TILE_HORIZONS_SCHEMA.items()]).sort("phase", "pass", "tile")


def phase_horizons(tiles: pl.DataFrame, target: Target) -> pl.DataFrame:
    """Per phase (PHASE_HORIZONS_SCHEMA): ``horizon`` = the sum over staging passes of the busiest tile's span
    plus a sync before every pass after the first; ``est_cycles`` adds the measured per-phase overrun."""
    sync = int(target.costs.sync_cycles)
    per_pass = tiles.group_by("phase", "pass").agg(pl.col("horizon").max())
    return (per_pass.group_by("phase").agg(pl.len().alias("passes"), pl.col("horizon").sum())
            .with_columns((pl.col("horizon") + (pl.col("passes") - 1) * sync).alias("horizon"))
            .with_columns((pl.col("horizon") + phase_overhead_cycles(target)).alias("est_cycles"))
            .select([pl.col(c).cast(d) for c, d in PHASE_HORIZONS_SCHEMA.items()]).sort("phase"))


def activity_spans(groups: pl.DataFrame, passes: pl.DataFrame, target: Target) -> dict[str, np.ndarray]:
    """Start and end of every send (one per group) and receive (one per passes row), relative to the phase start.

    A tile's receives run back to back in the receive order, each cutover first waiting its arrival latency;
    its sends run back to back in group order (paired: half the events). A paired 64-bit transfer
    (:func:`paired_groups`) takes half its words in events at its sender and every receiver. Pass ``p`` starts
    after every earlier pass's busiest tile and a sync. Returns arrays ``send_start, send_end`` (by group row)
    and ``recv_start, recv_end`` (by passes row).
    """
    prepared = _prepared(groups, passes)
    g, r, idx, order, cut, pg = prepared
    th = tile_horizons(groups, passes, target, prepared)
    sync = int(target.costs.sync_cycles)
    per_pass = th.group_by("phase", "pass").agg(pl.col("horizon").max()).sort("phase", "pass")
    pp, pa, ph = (per_pass[c].to_numpy().astype(np.int64) for c in ("phase", "pass", "horizon"))
    new_phase = np.r_[True, pp[1:] != pp[:-1]] if len(pp) else np.zeros(0, bool)
    before = np.cumsum(ph + sync) - (ph + sync)
    start_of = before - before[new_phase][np.cumsum(new_phase) - 1] if len(pp) else before
    width = int(pa.max()) + 1 if len(pa) else 1
    pkey = (pp - (pp.min() if len(pp) else 0)) * width + pa

    def pass_start(phase: np.ndarray, pas: np.ndarray) -> np.ndarray:
        return start_of[np.searchsorted(pkey, (phase - (pp.min() if len(pp) else 0)) * width + pas)]

    # receives
    events = np.where(pg, g["words"] // 2, g["words"])
    tiles = r["tile"][order]
    lat = cutover_cycles(tile_rows(tiles, target), target) * cut
    dur = lat + events[idx][order]
    run = np.r_[True, (r["phase"][order][1:] != r["phase"][order][:-1]) | (tiles[1:] != tiles[:-1])
                | (g["pass"][idx][order][1:] != g["pass"][idx][order][:-1])] if len(order) else np.zeros(0, bool)
    cum = np.cumsum(dur)
    first = np.flatnonzero(run)
    base = (cum - dur)[first][np.cumsum(run) - 1] if len(order) else cum
    r_end = np.empty(len(order), np.int64)
    r_start = np.empty(len(order), np.int64)
    off = pass_start(r["phase"][order], g["pass"][idx][order]) if len(order) else cum
    r_end[order] = cum - base + off
    r_start[order] = cum - dur + lat - base + off
    # sends
    gorder = sort_order([g["phase"] - (g["phase"].min() if len(g["phase"]) else 0), g["pass"], g["source"],
                         g["group"] - (g["group"].min() if len(g["group"]) else 0)])
    src = g["source"][gorder]
    flags = (pl.DataFrame({"phase": g["phase"][gorder], "pass": g["pass"][gorder], "tile": src})
             .with_columns(pl.col("phase", "pass", "tile").cast(ID))
             .join(th.select("phase", "pass", "tile", "paired"), on=["phase", "pass", "tile"], how="left",
                   maintain_order="left"))
    w = g["words"][gorder]
    w = np.where(pg[gorder], events[gorder],
                 np.where(flags["paired"].fill_null(False).to_numpy(), -(-w // 2), w))
    dur = (w + target.costs.exchange_send_cycles
           + g["runs"][gorder] * target.costs.exchange_run_cycles)
    srun = np.r_[True, (g["phase"][gorder][1:] != g["phase"][gorder][:-1]) | (src[1:] != src[:-1])
                 | (g["pass"][gorder][1:] != g["pass"][gorder][:-1])] if len(gorder) else np.zeros(0, bool)
    cum = np.cumsum(dur)
    base = (cum - dur)[np.flatnonzero(srun)][np.cumsum(srun) - 1] if len(gorder) else cum
    soff = pass_start(g["phase"][gorder], g["pass"][gorder]) if len(gorder) else cum
    s_start = np.empty(len(gorder), np.int64)
    s_end = np.empty(len(gorder), np.int64)
    s_start[gorder] = cum - dur - base + soff
    s_end[gorder] = cum - base + soff
    return {"send_start": s_start, "send_end": s_end, "recv_start": r_start, "recv_end": r_end}
