"""SRAM occupancy over the program's events: one tile's lines named by what they hold, or max and mean over tiles."""

from __future__ import annotations

from collections.abc import Iterable

import altair as alt
import polars as pl

from toolkit.errors import OptionError
from toolkit.tables import OCCUPANCY_SCHEMA
from toolkit.target import Target, ipu21
from toolkit.viz.memory import DEFAULT_MAX_ROWS, _capacity, _columns, _guard, _value

#: what each occupancy byte column holds, as a reader should see it named (class is how an object is stored,
#: region where its address lies: a standard-class object may sit in region 1)
VALUE_LABELS = {
    "live_bytes": "live bytes", "standard_bytes": "standard class", "interleaved_bytes": "interleaved class",
    "region0_bytes": "region 0 (standard elements)", "region1_bytes": "region 1 (interleaved elements)",
}


def occupancy_over_time(
    occupancy: pl.DataFrame, tiles: Iterable[int] | None = None, *, target: Target | None = None,
    value: str = "live_bytes", values: Iterable[str] | None = None, max_rows: int = DEFAULT_MAX_ROWS,
    events: int | None = None,
) -> alt.LayerChart:
    """``value`` (or each of ``values``) per event, against the capacity as a rule.

    Over several tiles: the max and the mean over ``tiles`` (default: all). For
    one tile: that tile's bytes, one line per value, named by what each column
    holds (``values=["interleaved_bytes", "region1_bytes"]`` shows class and
    region side by side). The event axis spans the whole program whatever the
    tiles, so charts of different tiles line up, and ticks at whole events:
    event ``e`` spans ``[e, e + 1)`` and its value is drawn at ``e + 0.5``, as
    :func:`toolkit.viz.memory_map` draws an object live at ``e``; ``events``
    (the program's event count, ``memory_map``'s too) sets the axis to
    ``[0, events]`` so the two charts line up under each other.
    """
    target = target or ipu21()
    columns = [_value(v) for v in (values if values is not None else [value])]
    occ = _columns(occupancy, OCCUPANCY_SCHEMA, ("tile", "event", *columns), "occupancy")
    last_event = int(occ["event"].max()) if occ.height else 0
    events = max(events or 0, last_event + 1)
    if tiles is not None:
        wanted = pl.Series("tile", list(tiles), dtype=pl.Int64)
        if wanted.len() == 0:
            msg = "tiles=[] selects nothing; pass None for all tiles"
            raise OptionError(msg, field="tiles", value=[])
        missing = wanted.filter(~wanted.is_in(occ["tile"].cast(pl.Int64).implode()))
        if missing.len():
            msg = f"tiles contains {missing.len()} tiles with no occupancy rows (first: {missing[0]})"
            raise OptionError(msg, field="tiles", value=int(missing[0]))
        occ = occ.filter(pl.col("tile").is_in(wanted.implode()))
    n = occ["tile"].n_unique()
    one = n == 1
    stats = [pl.col(c).max().alias(f"max|{c}") for c in columns] + (
        [] if one else [pl.col(c).mean().alias(f"mean|{c}") for c in columns])
    per_event = (
        occ.group_by("event").agg(*stats, pl.len().alias("tiles"))
        .unpivot(index=["event", "tiles"], variable_name="key", value_name="bytes")
        .with_columns(pl.col("key").str.split_exact("|", 1).struct.rename_fields(["stat", "column"]).alias("_k"))
        .unnest("_k")
        .with_columns((pl.col("column").replace_strict(VALUE_LABELS)
                       + (pl.lit("") if one else pl.lit(", ") + pl.col("stat"))).alias("series"))
        .with_columns(pl.when(one).then(pl.lit("tile")).otherwise(pl.col("stat")).alias("stat"))
        .sort("series", "event")
        .with_columns((pl.col("event") + 0.5).alias("middle"))
    )
    _guard(per_event.height, max_rows, "occupancy_over_time has two rows per event")
    capacity = _capacity(target, columns[0])
    legend = f"tile {int(occ['tile'][0])}" if one else f"over {n} tiles"
    # the value axis spans the data: a capacity far above it (450 kB of interleaved region against 40 kB used)
    # would squash the lines into the bottom tenth, so it is drawn only when near and stated otherwise
    top = int(per_event["bytes"].max() or 0)
    near = capacity <= CAPACITY_NEAR * max(top, 1)
    domain = [0, int(max(top, capacity if near else 0, 1) * 1.05)]
    lines = alt.Chart(per_event).mark_line(point=per_event.height <= 400).encode(
        x=alt.X("middle:Q", title="event", scale=alt.Scale(domain=[0, events], nice=False),
                axis=alt.Axis(tickMinStep=1, format="d")),
        y=alt.Y("bytes:Q", title="bytes" if len(columns) > 1 else VALUE_LABELS[columns[0]],
                scale=alt.Scale(domain=domain, nice=False), axis=alt.Axis(format="~s")),
        color=alt.Color("series:N", title=legend),
        tooltip=["event:Q", "series:N", alt.Tooltip("bytes:Q", format=",.0f"), alt.Tooltip("tiles:Q", format=",d")],
    )
    what = " and ".join(VALUE_LABELS[c] for c in columns)
    title = f"{what} per event, " + (f"tile {int(occ['tile'][0])}" if one else f"max and mean over {n} tiles")
    if not near:   # said on the chart as well as in its title, in the corner where the rule would be
        title += f" (capacity {capacity:,} B, off this scale)"
        note = pl.DataFrame({"label": [f"capacity {capacity:,} B: above this scale"]})
        text = alt.Chart(note).mark_text(align="left", baseline="top", dx=4, dy=4, color="firebrick").encode(
            x=alt.value(0), y=alt.value(0), text="label:N")
        return alt.LayerChart(layer=[lines, text], width=640, height=260, title=title)
    cap = pl.DataFrame({"bytes": [capacity], "label": [f"capacity {capacity:,} B"]})
    base = alt.Chart(cap).encode(y=alt.Y("bytes:Q", scale=alt.Scale(domain=domain, nice=False)))
    rule = base.mark_rule(color="firebrick", strokeDash=[6, 3]).encode(tooltip=["label:N"])
    text = base.mark_text(align="left", baseline="bottom", dy=-3, color="firebrick").encode(
        x=alt.value(4), text="label:N")
    return alt.LayerChart(layer=[lines, rule, text], width=640, height=260, title=title)


#: the capacity is drawn when it is at most this many times the largest value shown
CAPACITY_NEAR = 3


__all__ = ["VALUE_LABELS", "occupancy_over_time"]
