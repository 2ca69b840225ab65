"""Cycle-profile charts: a per-tile timeline, cycles per group, and a profile comparison.

Each function takes the frames :mod:`toolkit.profile` returns (a :class:`Crop`
or its samples, a :func:`query` frame, a :func:`compare` frame) and returns an
``alt.Chart`` built on the polars frame. Charts are data: the tests read
``chart.to_dict()``. A chart that would embed more than ``max_rows`` rows
raises :class:`OptionError`; choose tiles or aggregate first.
"""

from __future__ import annotations

from collections.abc import Iterable

import altair as alt
import polars as pl

from toolkit.errors import OptionError
from toolkit.profile.crop import Crop, crop
from toolkit.profile.model import Profile
from toolkit.profile.query import kernel_label
from toolkit.profile.residuals import Residuals
from toolkit.viz.palette import color_scale

DEFAULT_MAX_ROWS = 5000
COLOR_BY = ("kind", "kernel", "operation", "phase", "category")   # category: toolkit.profile.timeline_categories
NEEDED = ("tile", "start_offset_cycles", "end_offset_cycles")


def timeline(crop_or_samples: Crop | Profile | pl.DataFrame, tiles: int | Iterable[int] | None = None,
             max_rows: int = DEFAULT_MAX_ROWS, color: str = "kind") -> alt.Chart:
    """Per-tile Gantt chart of samples (x: cycles from the origin, y: tile, colour: ``color``).

    ``tiles``: an int keeps the first n tiles, an iterable keeps those tiles,
    None keeps all (subject to ``max_rows``). A :class:`Profile` is cropped first.
    """
    if color not in COLOR_BY:
        msg = f"color={color!r} is not a sample column to colour by; use one of {list(COLOR_BY)}"
        raise OptionError(msg, field="color", value=color)
    if isinstance(crop_or_samples, Profile):
        crop_or_samples = crop(crop_or_samples)
    df = crop_or_samples.samples if isinstance(crop_or_samples, Crop) else crop_or_samples
    missing = [c for c in (*NEEDED, color) if c not in df.columns]
    if missing:
        msg = f"timeline needs columns {missing} (pass a Crop or crop(profile).samples)"
        raise OptionError(msg, field="crop_or_samples", value=missing)
    if isinstance(tiles, int):
        keep = df["tile"].unique(maintain_order=True).head(tiles)
        df = df.filter(pl.col("tile").is_in(keep.implode()))
    elif tiles is not None:
        df = df.filter(pl.col("tile").is_in(list(tiles)))
    if df.height > max_rows:
        msg = (f"timeline would draw {df.height} samples (max_rows={max_rows}); pass tiles=... to choose tiles "
               "or raise max_rows")
        raise OptionError(msg, field="max_rows", value=max_rows)
    cols = [c for c in (*NEEDED, "sample", "phase", "kind", "kernel", "operation", "category", "duration_cycles")
            if c in df.columns]
    data = df.select(cols)
    if "kernel" in cols and "kind" in cols:   # exchange and sync samples run no kernel: label them by kind
        data = data.with_columns(kernel_label())
    tooltip = int_tooltips(data, [c for c in cols if c not in ("start_offset_cycles", "end_offset_cycles")])
    scale = (color_scale(data[color].cast(pl.String).unique().to_list()) if color in ("kind", "kernel", "category")
             else None)
    shown = data["tile"].unique().sort()
    span = (f"tile {shown[0]}" if shown.len() == 1 else
            f"tiles {shown[0]}..{shown[-1]}" if shown.len() and shown[-1] - shown[0] + 1 == shown.len() else
            f"{shown.len():,} tiles")
    what = "category pieces" if "category" in cols else "samples"
    title = f"{data.height:,} {what} of {span}, coloured by {color}, on cycles from the origin"
    return alt.Chart(data, title=title, width=TIMELINE_WIDTH).mark_bar().encode(
        x=alt.X("start_offset_cycles:Q", title="cycles from origin"),
        x2="end_offset_cycles:Q",
        y=alt.Y("tile:O", title="tile", sort="ascending"),
        color=alt.Color(f"{color}:N", title=color, **({"scale": scale} if scale is not None else {})),
        tooltip=tooltip,
    )


def phase_bars(query_frame: pl.DataFrame, metric: str | None = None, max_rows: int = DEFAULT_MAX_ROWS, *,
               scope: str = "") -> alt.Chart:
    """Horizontal bars of ``metric`` per group of a :func:`toolkit.profile.query` frame (key = first column).

    By default a phase's or tile's bar is its span (a phase's span is its length on the wall clock) and any
    other group's its busy cycles (the wall-clock cycles in which one of its samples runs, never the span from
    its first sample to its last, which would rank a kernel that runs early and late as the longest).
    ``scope`` names which tiles the frame covers (``"tiles 0..15"``) in the title.
    """
    key = query_frame.columns[0]
    metric = metric or ("span_cycles" if key in ("phase", "tile") else "busy_cycles")
    if metric not in query_frame.columns:
        msg = f"metric={metric!r} is not a column of the query frame ({query_frame.columns[1:]})"
        raise OptionError(msg, field="metric", value=metric)
    if query_frame.height > max_rows:
        msg = f"phase_bars would draw {query_frame.height} bars (max_rows={max_rows}); filter the query first"
        raise OptionError(msg, field="max_rows", value=max_rows)
    data = query_frame.with_columns(_shown_key(query_frame))
    # phases and tiles keep the query's numeric order (their keys are strings here, which would sort 0, 1, 12, 2)
    sort = data["shown"].to_list() if key in ("phase", "tile") else "-x"
    what = METRIC_TITLES.get(metric, metric.replace("_", " "))
    title = f"{what} per {key}" + (f" ({scope})" if scope else "")
    return alt.Chart(data, title=title).mark_bar().encode(
        x=alt.X(f"{metric}:Q", title=what),
        y=alt.Y("shown:N", sort=sort, title=key),
        tooltip=int_tooltips(query_frame, query_frame.columns),
    ).properties(width=PLOT_WIDTH)


#: the timeline's width in pixels: wide enough that a phase of a few hundred cycles is a visible bar
TIMELINE_WIDTH = 720


def int_tooltips(frame: pl.DataFrame, columns) -> list[alt.Tooltip]:
    """Tooltips of ``columns``: integer columns (counts, ids, cycles) shown as integers with separators, so a
    count never reads ``1472.0``; others as they are."""
    return [alt.Tooltip(c, format=("d" if c in ID_COLUMNS else ",d") if frame.schema[c].is_integer() else alt.Undefined)
            for c in columns]


#: integer columns that are ids, shown without thousands separators (tile 1471, not 1,471)
ID_COLUMNS = ("tile", "sample", "local_index", "phase", "epoch", "latest_tile")


#: what each query metric is, as chart titles say it
METRIC_TITLES = {"span_cycles": "span cycles (first start to last end)",
                 "busy_cycles": "busy cycles (wall clock in which it runs on any tile)",
                 "wall_share": "share of the program's wall clock",
                 "work_cycles": "work cycles (summed over tiles)",
                 "mean_cycles": "mean cycles per sample", "max_cycles": "longest sample, cycles"}
PLOT_WIDTH = 520


def _shown_key(frame: pl.DataFrame) -> pl.Expr:
    """The key a reader sees: phases with their label ("12 mlp.fc2 compute"), anything else as it is."""
    key = frame.columns[0]
    if key == "phase" and "label" in frame.columns:
        return pl.concat_str(pl.col("phase").cast(pl.String), pl.lit(" "), pl.col("label").fill_null("")
                             ).str.strip_chars().alias("shown")
    return pl.col(key).cast(pl.String).alias("shown")


def compare_chart(compare_frame: pl.DataFrame, max_rows: int = DEFAULT_MAX_ROWS) -> alt.Chart:
    """Grouped bars: per key, one bar per profile (the ``<name>_cycles`` columns of :func:`compare`)."""
    key = compare_frame.columns[0]
    value_cols = [c for c in compare_frame.columns[1:] if c.endswith("_cycles") and not c.endswith("_delta_cycles")]
    if not value_cols:
        msg = f"compare_frame has no '<name>_cycles' columns ({compare_frame.columns}); pass compare(...)'s result"
        raise OptionError(msg, field="compare_frame", value=compare_frame.columns)
    long = compare_frame.select(_shown_key(compare_frame), *value_cols).unpivot(
        index="shown", variable_name="profile", value_name="cycles",
    ).with_columns(pl.col("profile").str.strip_suffix("_cycles"))
    if long.height > max_rows:
        msg = f"compare_chart would draw {long.height} bars (max_rows={max_rows}); filter the comparison first"
        raise OptionError(msg, field="max_rows", value=max_rows)
    names = [c.removesuffix("_cycles") for c in value_cols]
    # what the numbers are: a kernel's work cycles are summed over tiles, a phase's span is wall clock
    metric = str(compare_frame["metric"][0]) if "metric" in compare_frame.columns and compare_frame.height else ""
    what = METRIC_TITLES.get(metric, "cycles")
    # one row per key, a bar per profile: any number of keys fits the width (the chart grows down, not across)
    return alt.Chart(long, title=f"{what} per {key}: {', '.join(names)}").mark_bar().encode(
        y=alt.Y("shown:N", title=key, sort=None),
        yOffset=alt.YOffset("profile:N", sort=names),
        x=alt.X("cycles:Q", title=what),
        color=alt.Color("profile:N", sort=names, legend=alt.Legend(orient="top", title="profile")),
        tooltip=[alt.Tooltip("shown:N", title=key), "profile", alt.Tooltip("cycles:Q", format=",")],
    ).properties(width=PLOT_WIDTH)


def residual_chart(res: Residuals, width: int = 420, max_rows: int = DEFAULT_MAX_ROWS) -> alt.LayerChart:
    """Predicted (y) against measured (x) cycles per group of :func:`toolkit.profile.residuals`, on log scales,
    with the y = x line; the title states the median ratio and the Spearman rank correlation."""
    key = res.by
    data = (res.frame.filter((pl.col("predicted_cycles") > 0) & (pl.col("measured_cycles") > 0))
            .with_columns(pl.col(key).cast(pl.String)))
    if data.height > max_rows:
        msg = f"residual_chart would draw {data.height} points (max_rows={max_rows}); filter the residuals first"
        raise OptionError(msg, field="max_rows", value=max_rows)
    lo = min(data["predicted_cycles"].min() or 1, data["measured_cycles"].min() or 1) if data.height else 1
    hi = max(data["predicted_cycles"].max() or 1, data["measured_cycles"].max() or 1) if data.height else 10
    median = "n/a" if res.median_ratio is None else f"{res.median_ratio:.3f}"
    rank = "n/a" if res.spearman is None else f"{res.spearman:.3f}"
    # a "measured" profile that was simulated (a stand-in) is never called measured
    measured = "measured" if res.measured_source == "hardware" else f"{res.measured_source} stand-in"
    title = (f"predicted against {measured} {res.metric.replace('_', ' ')} by {key}: median ratio {median}, "
             f"Spearman {rank} ({res.matched} groups)")
    # a fifth of a decade of room each side: the smallest and largest groups are drawn whole, not cut at the edge
    scale = alt.Scale(type="log", domain=[lo / 10 ** 0.2, hi * 10 ** 0.2], nice=False)
    ticks = alt.Axis(labelOverlap="greedy", labelSeparation=6)   # log ticks crowd: never overprint
    x = alt.X("measured_cycles:Q", scale=scale, title=f"{measured} cycles", axis=ticks)
    y = alt.Y("predicted_cycles:Q", scale=scale, title="predicted cycles", axis=ticks)
    diagonal = alt.Chart(pl.DataFrame({"measured_cycles": [lo, hi], "predicted_cycles": [lo, hi]})).mark_line(
        strokeDash=[4, 4], color="gray").encode(x=x, y=y)
    points = alt.Chart(data).mark_circle(size=60).encode(
        x=x, y=y, tooltip=[key, "predicted_cycles", "measured_cycles", "delta_cycles",
                           alt.Tooltip("ratio:Q", format=".3f")])
    return alt.layer(diagonal, points, title=title).properties(width=width, height=width)


def barrier_chart(barriers_frame: pl.DataFrame, max_rows: int = DEFAULT_MAX_ROWS, width: int = 640) -> alt.LayerChart:
    """Per phase (labelled with its operation and kind): the arrival window from the first to the last tile's
    arrival, and the cycles after the last arrival, from :func:`toolkit.profile.barriers` ``.phases``.
    Spreads are drawn per phase, never summed."""
    need = ("phase", "first_arrival_offset_cycles", "last_arrival_offset_cycles", "after_last_arrival_cycles",
            "latest_tile", "label")
    missing = [c for c in need if c not in barriers_frame.columns]
    if missing:
        msg = f"barrier_chart needs barriers(profile).phases columns; missing {missing}"
        raise OptionError(msg, field="barriers_frame", value=missing)
    if barriers_frame.height > max_rows:
        msg = f"barrier_chart would draw {barriers_frame.height} phases (max_rows={max_rows}); filter the phases first"
        raise OptionError(msg, field="max_rows", value=max_rows)
    data = barriers_frame.with_columns(
        (pl.col("last_arrival_offset_cycles") - pl.col("first_arrival_offset_cycles")).alias("arrival_spread_cycles"),
        (pl.col("phase").cast(pl.String) + pl.lit(" ") + pl.col("label").fill_null("")).alias("phase_label"),
        (pl.col("last_arrival_offset_cycles") + pl.col("after_last_arrival_cycles")).alias("exit_cycles"))
    order = data.sort("phase")["phase_label"].to_list()
    y = alt.Y("phase_label:N", sort=order, title="phase")
    tooltip = [alt.Tooltip("phase:Q", format="d"), "label:N", alt.Tooltip("latest_tile:Q", format="d"),
               alt.Tooltip("arrival_spread_cycles:Q", format=","),
               alt.Tooltip("after_last_arrival_cycles:Q", format=",")]
    spread = alt.Chart(data).mark_bar(color="#4e79a7").encode(
        x=alt.X("first_arrival_offset_cycles:Q", title="cycles from origin"), x2="last_arrival_offset_cycles:Q",
        y=y, tooltip=tooltip)
    after = alt.Chart(data).mark_bar(color="#e15759").encode(
        x="last_arrival_offset_cycles:Q", x2="exit_cycles:Q", y=y, tooltip=tooltip)
    height = max(120, 14 * data.height)
    return alt.layer(spread, after).properties(
        width=width, height=height,
        title="per phase: arrival window, first to last tile (blue), and the cycles after the last arrival (red)")
