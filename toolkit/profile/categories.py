"""The hardware renderer's timeline categories, for simulated and hardware profiles alike.

``ipu-stack``'s tile-wise timeline does not stop at a sample's kind: an
exchange sample is split by what the tile's exchange activities do at each
moment. :func:`timeline_categories` cuts every exchange sample at its
activities' starts and ends (offsets within the exchange phase) and labels
each piece: ``send+receive`` where a send and a receive overlap, ``send``,
``receive``, ``partner busy`` (the partner tile borrowed this tile's lane for a
paired 64-bit send) or ``exchange idle`` (the tile waits inside the exchange).
Compute samples are ``compute``, synchronization ``sync``, idle ``idle``.
Offsets are the crop's (cycles from the origin).
"""

from __future__ import annotations

import polars as pl

from toolkit import tables
from toolkit.profile.crop import crop
from toolkit.profile.model import Profile, wrap_delta

CATEGORIES = ("compute", "send+receive", "send", "receive", "partner busy", "exchange idle", "sync", "idle")
TIMELINE_SCHEMA: tables.Schema = {
    "tile": tables.ID, "sample": tables.BIG, "phase": tables.BIG, "operation": tables.STR, "kernel": tables.STR,
    "category": tables.STR, "start_offset_cycles": tables.BIG, "end_offset_cycles": tables.BIG,
    "duration_cycles": tables.BIG,
}
_KIND = {"compute": "compute", "synchronization": "sync", "idle": "idle"}


def timeline_categories(profile: Profile, *, shared_clock: bool = False, gaps: bool = True) -> pl.DataFrame:
    """Every sample, exchange samples cut into the renderer's categories (TIMELINE_SCHEMA), by tile and time.

    With ``gaps`` (the default) a tile's time between its samples and after its last one is an ``idle`` piece
    too (:func:`toolkit.profile.idle`; simulated profiles store no idle samples), so the pieces of every tile
    cover the whole wall clock and a category's share is of all tile-cycles, not of the busy ones.
    """
    from toolkit.profile.query import idle

    c = crop(profile, shared_clock=shared_clock)
    s = c.samples.with_columns(
        (pl.col("end_offset_cycles") - pl.Series(wrap_delta(c.samples["end_cycle"].to_numpy(),
                                                            c.samples["start_cycle"].to_numpy()))).alias("_base"))
    keys = ["tile", "sample", "phase", "operation", "kernel"]
    plain = (s.filter(pl.col("kind") != "exchange")
             .with_columns(pl.col("kind").replace_strict(_KIND, default="idle").alias("category"))
             .select(*keys, "category", "start_offset_cycles", "end_offset_cycles"))
    ex = s.filter(pl.col("kind") == "exchange").select(*keys, "start_offset_cycles", "end_offset_cycles", "_base")
    act = profile.activities.join(ex.select("tile", "sample", "_base", "start_offset_cycles", "end_offset_cycles"),
                                  on=["tile", "sample"], how="inner")
    lo, hi = pl.col("start_offset_cycles"), pl.col("end_offset_cycles")
    act = act.select("tile", "sample", "kind",
                     (pl.col("_base") + pl.col("start_cycle")).clip(lo, hi).alias("t0"),
                     (pl.col("_base") + pl.col("end_cycle")).clip(lo, hi).alias("t1"))
    zero = pl.lit(0, tables.BIG)
    marks = {k: (pl.col("kind") == a).cast(tables.BIG) for k, a in (("s", "send"), ("r", "receive"),
                                                                    ("b", "partnerBusy"))}
    events = pl.concat([
        ex.select("tile", "sample", pl.col("start_offset_cycles").alias("t"), *(zero.alias(k) for k in marks)),
        ex.select("tile", "sample", pl.col("end_offset_cycles").alias("t"), *(zero.alias(k) for k in marks)),
        act.select("tile", "sample", pl.col("t0").alias("t"), *(m.alias(k) for k, m in marks.items())),
        act.select("tile", "sample", pl.col("t1").alias("t"), *((-m).alias(k) for k, m in marks.items())),
    ])
    cuts = (events.group_by("tile", "sample", "t").agg(pl.col("s", "r", "b").sum()).sort("tile", "sample", "t")
            .with_columns(pl.col("s", "r", "b").cum_sum().over("tile", "sample"),
                          pl.col("t").shift(-1).over("tile", "sample").alias("t_next")))
    s_, r_, b_ = (pl.col(k) > 0 for k in ("s", "r", "b"))
    category = (pl.when(s_ & r_).then(pl.lit("send+receive")).when(s_).then(pl.lit("send"))
                .when(r_).then(pl.lit("receive")).when(b_).then(pl.lit("partner busy"))
                .otherwise(pl.lit("exchange idle")))
    pieces = (cuts.filter(pl.col("t_next").is_not_null() & (pl.col("t_next") > pl.col("t")))
              .join(ex.select(*keys), on=["tile", "sample"])
              .select(*keys, category.alias("category"), pl.col("t").alias("start_offset_cycles"),
                      pl.col("t_next").alias("end_offset_cycles")))
    run = (pl.col("category") != pl.col("category").shift(1)).fill_null(True).cum_sum().over("tile", "sample")
    pieces = (pieces.sort("tile", "sample", "start_offset_cycles").with_columns(run.alias("_run"))
              .group_by(*keys, "category", "_run", maintain_order=True)   # merge runs of one category
              .agg(pl.col("start_offset_cycles").min(), pl.col("end_offset_cycles").max()).drop("_run"))
    parts = [plain.cast({k: TIMELINE_SCHEMA[k] for k in plain.columns}),
             pieces.cast({k: TIMELINE_SCHEMA[k] for k in pieces.columns})]
    if gaps:
        parts.append(idle(c).collect().select("tile", "phase", pl.lit("idle").alias("category"),
                                              "start_offset_cycles", "end_offset_cycles")
                     .cast({"phase": tables.BIG}))
    out = pl.concat(parts, how="diagonal_relaxed")
    return (out.with_columns((pl.col("end_offset_cycles") - pl.col("start_offset_cycles")).alias("duration_cycles"))
            .sort("tile", "start_offset_cycles", "sample").cast(TIMELINE_SCHEMA).select(list(TIMELINE_SCHEMA)))


def category_cycles(timeline: pl.DataFrame, by: str = "category") -> pl.DataFrame:
    """Summed cycles per category (``by="category"``) or per (phase, category): where the tiles' time went.
    ``cycles`` are summed over tiles; ``share`` is of every tile-cycle in the frame (idle included when the
    timeline has its gaps, as :func:`timeline_categories` gives by default)."""
    keys = ["category"] if by == "category" else [by, "category"]
    return (timeline.group_by(keys).agg(pl.col("duration_cycles").sum().alias("cycles"),
                                        pl.col("tile").n_unique().alias("tiles"))
            .with_columns((pl.col("cycles") / pl.col("cycles").sum().over(keys[:-1] or pl.lit(1))).alias("share"))
            .sort(*keys[:-1], "cycles", descending=[False] * (len(keys) - 1) + [True]))


__all__ = ["CATEGORIES", "TIMELINE_SCHEMA", "category_cycles", "timeline_categories"]
