"""Regions of a profile: the cycles of one repeat instance, of an encoder span, of what runs before or after.

The hardware's profiles of repeated programs (ipu-stack docs/VIT_REPEAT_2026_09_10.md) sample the first
repeat instance in detail and cover the other instances with one ``repeat-remainder`` sample per tile (its
``iterations`` metadata counts them), and its figures quote such spans ("the second-iteration remainder
spans 493,224 cycles"). :func:`spans` measures
every region of a profile the same way: from the region's earliest sample start to its latest sample end over
all tiles, on the cropped clock (:func:`toolkit.profile.crop`), so a region of a simulated profile and the
same region of a capture compare directly.

Regions come from the program order where it is known (``order``: one row per profile phase with the block
and repeat instance it runs, as :func:`toolkit.simulate.phase_order` gives for a simulated profile:
``block[i]`` is instance ``i`` of repeated block ``block``, ``before block`` / ``after block`` the phases
outside it), and otherwise from the profile itself: a ``repeat-remainder`` sample is region ``remainder``, the
rest is grouped by epoch (``epoch N``). :func:`region_cycles` reads one region (or an instance range such as
``layer[1:]``, the span the hardware's remainder sample covers) by name.
"""

from __future__ import annotations

import re

import polars as pl

from toolkit import tables
from toolkit.errors import OptionError
from toolkit.profile.crop import Crop, crop
from toolkit.profile.model import Profile

SPANS_SCHEMA: tables.Schema = {
    "region": tables.STR,          # block[i], before block, after block, remainder, epoch N
    "block": tables.STR,           # the repeated block (null outside one, or when the order is unknown)
    "instance": tables.BIG,        # its repeat instance (null outside one)
    "first_cycle": tables.BIG,     # earliest sample start of the region, cropped clock
    "last_cycle": tables.BIG,      # latest sample end of the region, cropped clock
    "span_cycles": tables.BIG,     # last_cycle - first_cycle
    "tiles": tables.BIG,           # tiles with a sample in the region
    "samples": tables.BIG,
}
#: the operation name of the hardware's sample that covers the repeat instances after the first
REMAINDER = "repeat-remainder"
_RANGE = re.compile(r"^(?P<block>[^\[\]]+)\[(?P<lo>\d{1,6})?(?P<colon>:)?(?P<hi>\d{1,6})?\]$")


def spans(profile: Profile | Crop, order: pl.DataFrame | None = None) -> pl.DataFrame:
    """Every region of ``profile`` (SPANS_SCHEMA), in program order. ``order``: the program order of a simulated
    profile (columns ``event``, ``block``, ``instance``; :func:`toolkit.simulate.phase_order`), naming repeat
    instances and the phases around them; without it, regions are the remainder sample and the epochs."""
    c = _cropped(profile)
    s = c.samples.lazy().select("tile", "phase", "epoch", "operation", "kernel", "start_offset_cycles",
                                "end_offset_cycles")
    if order is not None:
        labels = _labels(order)
        s = (s.join(labels.lazy(), left_on="phase", right_on="event", how="left")
             .with_columns(pl.col("region").fill_null(pl.lit("before all")), pl.col("_at").fill_null(-1)))
    else:
        remainder = (pl.col("operation") == REMAINDER) | (pl.col("kernel") == REMAINDER)
        s = s.with_columns(
            pl.when(remainder).then(pl.lit("remainder")).otherwise(pl.format("epoch {}", "epoch")).alias("region"),
            pl.lit(None, tables.STR).alias("block"),
            pl.when(remainder).then(None).otherwise(pl.col("epoch")).cast(tables.BIG).alias("instance"),
            pl.when(remainder).then(pl.lit(2**40, tables.BIG)).otherwise(pl.col("epoch")).alias("_at"))
    out = (s.group_by("region", "block", "instance")
           .agg(pl.col("start_offset_cycles").min().alias("first_cycle"),
                pl.col("end_offset_cycles").max().alias("last_cycle"),
                pl.col("tile").n_unique().alias("tiles"), pl.len().alias("samples"), pl.col("_at").min())
           .with_columns((pl.col("last_cycle") - pl.col("first_cycle")).alias("span_cycles"))
           .sort("_at", "first_cycle"))
    return out.select(list(SPANS_SCHEMA)).collect().cast(SPANS_SCHEMA)


def region_cycles(profile: Profile | Crop, region: str, order: pl.DataFrame | None = None) -> int:
    """The cycles of one region of ``profile``: a label of :func:`spans` (``layer[0]``, ``after layer``,
    ``remainder``, ``epoch 2``) or an instance range of a repeated block (``layer[1:]``: every instance after the
    first, as the hardware's remainder sample covers them; ``layer[0:2]``), from its earliest start to its latest
    end. An unknown region is refused naming the regions the profile has."""
    if not isinstance(region, str) or not region.strip():
        msg = f"region={region!r} must name a region of the profile (see toolkit.profile.spans)"
        raise OptionError(msg, field="region", value=region)
    table = spans(profile, order)
    exact = table.filter(pl.col("region") == region)
    if exact.height:
        return int(exact["span_cycles"].item())
    m = _RANGE.match(region.strip())
    if m and m["colon"]:
        inst = table.filter(pl.col("block") == m["block"])
        lo = int(m["lo"] or 0)
        hi = int(m["hi"]) if m["hi"] else None
        sel = inst.filter((pl.col("instance") >= lo) & ((pl.col("instance") < hi) if hi is not None else True))
        if sel.height:
            return int(sel["last_cycle"].max() - sel["first_cycle"].min())
    known = ", ".join(table["region"].to_list()[:12])
    hint = " (an instance range such as 'layer[1:]' needs the program order: pass order=)" if order is None else ""
    msg = f"region={region!r} is not a region of this profile; it has: {known or 'no samples'}{hint}"
    raise OptionError(msg, field="region", value=region)


def _cropped(profile: Profile | Crop) -> Crop:
    if isinstance(profile, Crop):
        return profile
    if isinstance(profile, Profile):
        return crop(profile)
    msg = f"spans needs a Profile or a Crop, got {type(profile).__name__}"
    raise OptionError(msg, field="profile", value=type(profile).__name__)


def _labels(order: pl.DataFrame) -> pl.DataFrame:
    """Per profile phase (``event``): its region label, block, instance and a program-order key."""
    if not isinstance(order, pl.DataFrame) or not {"event", "block", "instance"} <= set(order.columns):
        got = order.columns if isinstance(order, pl.DataFrame) else type(order).__name__
        msg = f"order must be a frame with columns event, block, instance (toolkit.simulate.phase_order); got {got}"
        raise OptionError(msg, field="order", value=str(got))
    o = order.select("event", "block", "instance").sort("event")
    # a block is repeated when any of its phases runs a second instance; the others are the program around it
    repeated = o.group_by("block").agg(pl.col("instance").max().alias("_top")).filter(pl.col("_top") > 0)["block"]
    names = repeated.to_list()
    rep = pl.col("block").is_in(names)
    first_rep = o.filter(rep)["event"].min() if names else None
    last_rep = o.filter(rep)["event"].max() if names else None
    outer = "/".join(names) or "repeat"
    label = (pl.when(rep).then(pl.format("{}[{}]", "block", "instance"))
             .when(pl.lit(first_rep is not None) & (pl.col("event") < (first_rep if first_rep is not None else 0)))
             .then(pl.lit(f"before {outer}"))
             .when(pl.lit(last_rep is not None) & (pl.col("event") > (last_rep if last_rep is not None else 0)))
             .then(pl.lit(f"after {outer}"))
             .otherwise(pl.lit("program")))
    return o.with_columns(label.alias("region"),
                          pl.when(rep).then(pl.col("block")).otherwise(None).alias("block"),
                          pl.when(rep).then(pl.col("instance")).otherwise(None).cast(tables.BIG).alias("instance"),
                          pl.col("event").alias("_at"))


__all__ = ["REMAINDER", "SPANS_SCHEMA", "region_cycles", "spans"]
