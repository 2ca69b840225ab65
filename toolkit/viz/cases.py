"""Charts over committed cases: where each case's cycles go, and its simulated cycles beside the hardware's.

Both take the frames :mod:`toolkit.artifacts_compare` returns and fit a
~900 px notebook column (``width`` is the plot area; the legend and the case
labels take the rest). Colours come from :mod:`toolkit.viz.palette`, so a
category has the same colour here as in every profile chart.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from toolkit.errors import OptionError
from toolkit.viz.palette import color_of, color_scale

#: case_cycles_chart values: the mean tile's cycles (bars as long as the cropped profile) or the share of them
VALUES = {"per_tile_cycles": "cycles per tile (mean over the profile's tiles)",
          "share": "share of the case's cropped tile-cycles"}
#: stacking and legend order of the known categories (the rest follow by name)
ORDER = ("compute", "exchange", "send+receive", "send", "receive", "partner busy", "exchange idle",
         "synchronization", "sync", "idle")
WIDTH = 600


def case_cycles_chart(frame: pl.DataFrame, value: str = "per_tile_cycles", width: int = WIDTH) -> alt.Chart:
    """One horizontal bar per case, stacked by category, from :func:`toolkit.artifacts_compare.case_cycles`.

    ``value="per_tile_cycles"``: each bar is as long as the case's cropped cycles; ``"share"``: every bar is
    1 and the segments are shares, so cases of different lengths compare."""
    if value not in VALUES:
        msg = f"value={value!r} is not a case_cycles column to draw; use one of {list(VALUES)}"
        raise OptionError(msg, field="value", value=value)
    missing = [c for c in ("case", "category", value, "cycles") if c not in frame.columns]
    if missing:
        msg = f"case_cycles_chart needs case_cycles(...) columns; missing {missing}"
        raise OptionError(msg, field="frame", value=missing)
    present = frame["category"].unique().to_list()
    order = [c for c in ORDER if c in present] + sorted(set(present) - set(ORDER))
    known = [c for c in order if c in ORDER]
    scale = (alt.Scale(domain=order, range=[color_of(c) for c in order]) if len(known) == len(order)
             else color_scale(order))
    rank = {c: i for i, c in enumerate(order)}
    data = frame.with_columns(pl.col("category").replace_strict(rank, return_dtype=pl.Int64).alias("stack"))
    tooltip = ["case:N", "category:N", alt.Tooltip("cycles:Q", format=",d", title="tile-cycles"),
               alt.Tooltip("per_tile_cycles:Q", format=",.0f", title="cycles per tile"),
               alt.Tooltip("share:Q", format=".1%")] if "share" in frame.columns else ["case:N", "category:N"]
    cases = frame["case"].unique(maintain_order=True).to_list()
    return alt.Chart(data, title=f"where the cycles go: {VALUES[value]}").mark_bar().encode(
        x=alt.X(f"{value}:Q", title=VALUES[value], stack="zero",
                axis=alt.Axis(format=".0%" if value == "share" else ",d")),
        y=alt.Y("case:N", sort=cases, title="case"),
        color=alt.Color("category:N", scale=scale, title="category", legend=alt.Legend(orient="right")),
        order=alt.Order("stack:Q"),
        tooltip=tooltip,
    ).properties(width=width, height=max(120, 28 * len(cases)))


def cases_vs_hardware(compare: pl.DataFrame, width: int = WIDTH) -> alt.Chart:
    """Per case, the simulated cycles beside the hardware measurement of the workload (cases without one show
    the simulated bar alone), from :func:`toolkit.artifacts_compare.compare_cases`."""
    missing = [c for c in ("case", "simulated_cycles", "hardware_cycles") if c not in compare.columns]
    if missing:
        msg = f"cases_vs_hardware needs compare_cases(...) columns; missing {missing}"
        raise OptionError(msg, field="compare", value=missing)
    names = {"simulated_cycles": "simulated (this toolkit)", "hardware_cycles": "measured on hardware (C600)"}
    long = (compare.select("case", *names).unpivot(index="case", variable_name="number", value_name="cycles")
            .drop_nulls("cycles").with_columns(pl.col("number").replace_strict(names)))
    colors = alt.Scale(domain=list(names.values()), range=["#499894", "#b07aa1"])
    cases = compare["case"].to_list()
    return alt.Chart(long, title="cropped cycles: simulated beside the real compiler's program on hardware").mark_bar(
    ).encode(
        x=alt.X("cycles:Q", title="cycles (renderer-cropped)", axis=alt.Axis(format=",d")),
        y=alt.Y("case:N", sort=cases, title="case"),
        yOffset=alt.YOffset("number:N", sort=list(names.values())),
        color=alt.Color("number:N", scale=colors, title="number", legend=alt.Legend(orient="bottom")),
        tooltip=["case:N", "number:N", alt.Tooltip("cycles:Q", format=",d")],
    ).properties(width=width, height=max(120, 36 * len(cases)))


__all__ = ["ORDER", "VALUES", "case_cycles_chart", "cases_vs_hardware"]
