"""N-way comparison charts: what changes between two or more compilations or profiles.

The frames come from :func:`toolkit.report.compare_programs` (per op and phase
kind: ``<name>_cycles``, ``<name>_bytes``, ``<name>_delta_cycles``),
:func:`toolkit.profile.compare` (per phase, operation or kernel: ``<name>_cycles``,
``<name>_delta_cycles``) and :func:`toolkit.report.compare_peaks` (per tile:
``<name>_peak_bytes``, ``<name>_delta_bytes``). The first compilation (or profile)
is the baseline; every chart shows each later one against it, one colour per
compared name, at a fixed width whatever the number of rows.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from toolkit.errors import OptionError
from toolkit.target import Target
from toolkit.viz.text import ZERO_LABEL, delta_ticks

DEFAULT_MAX_ROWS = 5000
WIDTH = 640
METRICS = {"cycles": "cycles", "bytes": "bytes exchanged"}
#: what a program comparison's numbers are (toolkit.report.compare_programs: per op and phase kind)
PROGRAM_METRICS = {"cycles": "cycles (lowered estimate)", "bytes": "bytes exchanged (lowered)"}


def _key(frame: pl.DataFrame) -> tuple[pl.DataFrame, str]:
    """One string key per row: ``op · kind`` for a program comparison, else the frame's first column."""
    if {"op", "kind"} <= set(frame.columns):
        return frame.with_columns(pl.concat_str("op", pl.lit(" · "), "kind").alias("key")), "op · phase kind"
    first = frame.columns[0]
    if first == "phase" and "label" in frame.columns:
        return frame.with_columns(pl.concat_str(pl.col("phase").cast(pl.String), pl.lit(" "),
                                                pl.col("label").fill_null("")).str.strip_chars().alias("key")), first
    return frame.with_columns(pl.col(first).cast(pl.String).alias("key")), first


def _names(frame: pl.DataFrame, suffix: str, what: str) -> list[str]:
    names = [c.removesuffix(suffix) for c in frame.columns if c.endswith(suffix)]
    if not names:
        msg = f"{what} has no '<name>{suffix}' columns ({frame.columns}); pass a comparison frame"
        raise OptionError(msg, field=what, value=frame.columns)
    return names


def measure(frame: pl.DataFrame, metric: str = "cycles") -> str:
    """What a comparison frame's numbers are, with their scope: a profile comparison names its query column
    (``metric``: a kernel's work cycles are summed over tiles), a program comparison is lowered estimates."""
    from toolkit.viz.profile import METRIC_TITLES
    if "metric" in frame.columns and frame.height and metric == "cycles":
        name = str(frame["metric"][0])
        return METRIC_TITLES.get(name, name.replace("_", " "))
    if {"op", "kind"} <= set(frame.columns):
        return PROGRAM_METRICS[metric]
    return METRICS[metric]


def delta_chart(compare_frame: pl.DataFrame, *, metric: str = "cycles", top: int = 25, width: int = WIDTH,
                max_rows: int = DEFAULT_MAX_ROWS) -> alt.Chart:
    """Per key, each later compilation's (or profile's) change in ``metric`` against the first, as
    horizontal bars: the ``top`` keys with the largest change (any compared name), largest first.

    ``metric``: ``cycles`` or ``bytes`` (bytes exchanged, program comparisons only); the change is computed
    from the ``<name>_cycles`` / ``<name>_bytes`` columns, a key missing on one side counting 0 there.
    """
    if metric not in METRICS:
        msg = f"metric={metric!r} is not a comparison metric; use one of {list(METRICS)}"
        raise OptionError(msg, field="metric", value=metric)
    if isinstance(top, bool) or not isinstance(top, int) or top <= 0:
        msg = f"top={top!r} must be a positive number of rows"
        raise OptionError(msg, field="top", value=top)
    values = _names(compare_frame, f"_{metric}", "compare_frame")
    values = [n for n in values if not n.endswith("_delta")]
    if len(values) < 2:
        msg = f"compare_frame compares {len(values)} {metric} columns; a delta needs two or more"
        raise OptionError(msg, field="compare_frame", value=compare_frame.columns)
    base, later = values[0], values[1:]
    frame, key_title = _key(compare_frame)
    # a key one side lacks (a kernel one layout never runs) counts 0 there, so its whole cost shows as the change
    value = {n: pl.col(f"{n}_{metric}").fill_null(0) for n in values}
    deltas = frame.select("key", *((value[n] - value[base]).alias(n) for n in later))
    long = (deltas.unpivot(index="key", variable_name="compared", value_name="delta")
            .drop_nulls("delta").with_columns(pl.col("delta").abs().alias("_size")))
    keep = long.group_by("key").agg(pl.col("_size").max()).sort("_size", "key", descending=[True, False]).head(top)
    long = long.filter(pl.col("key").is_in(keep["key"].implode())).drop("_size")
    if long.height > max_rows:
        msg = f"delta_chart would draw {long.height} bars (max_rows={max_rows}); lower top"
        raise OptionError(msg, field="max_rows", value=max_rows)
    shown = f"the {keep.height} largest of {frame.height}" if keep.height < frame.height else f"all {frame.height}"
    what = measure(compare_frame, metric)
    title = [f"change in {what} against {base}, per {key_title}",
             f"{shown} rows; right of zero: more {METRICS[metric]} than {base}"]
    # the ticks are chosen here so that 0 is always labelled and no label is hidden for overlapping
    ticks = delta_ticks(long["delta"].min() or 0, long["delta"].max() or 0, width)
    return alt.Chart(long, title=title).mark_bar().encode(
        y=alt.Y("key:N", title=key_title, sort=keep["key"].to_list()),
        yOffset=alt.YOffset("compared:N"),
        x=alt.X("delta:Q", title=f"{what} minus {base}'s",
                scale=alt.Scale(zero=True, nice=False, domain=[ticks[0], ticks[-1]]),
                axis=alt.Axis(values=ticks, labelExpr=ZERO_LABEL, labelOverlap=False)),
        color=alt.Color("compared:N", title="compared with " + base, legend=alt.Legend(orient="bottom")),
        tooltip=["key", "compared", alt.Tooltip("delta:Q", format=",")],
    ).properties(width=width)


def peak_delta_heatmap(peaks_frame: pl.DataFrame, target: Target, *, cell_px: int = 7,
                       max_rows: int = DEFAULT_MAX_ROWS) -> alt.Chart:
    """Each later compilation's per-tile peak SRAM change against the first on the chip grid, one panel per
    compared compilation side by side (diverging colour: red = more bytes than the baseline)."""
    names = _names(peaks_frame, "_peak_bytes", "peaks_frame")
    later = [n for n in names[1:] if f"{n}_delta_bytes" in peaks_frame.columns]
    if not later:
        msg = f"peaks_frame has no '<name>_delta_bytes' columns ({peaks_frame.columns}); pass compare_peaks(...)"
        raise OptionError(msg, field="peaks_frame", value=peaks_frame.columns)
    if peaks_frame.height * len(later) > max_rows:
        msg = f"peak_delta_heatmap would draw {peaks_frame.height * len(later)} cells (max_rows={max_rows})"
        raise OptionError(msg, field="max_rows", value=max_rows)
    cols = target.grid_columns
    long = (peaks_frame.select("tile", *(pl.col(f"{n}_delta_bytes").alias(n) for n in later))
            .unpivot(index="tile", variable_name="compared", value_name="delta_bytes")
            .with_columns((pl.col("tile") // cols).alias("row"), (pl.col("tile") % cols).alias("column")))
    reach = int(long["delta_bytes"].abs().max() or 1)
    rows = -(-target.tiles // cols)
    per_panel = max(1, len(later))
    width = min(cols * cell_px, (WIDTH - 40 * per_panel) // per_panel)
    return alt.Chart(long).mark_rect().encode(
        x=alt.X("column:O", title="chip column", axis=alt.Axis(values=list(range(0, cols, 10)), labelAngle=0)),
        y=alt.Y("row:O", title="chip row", axis=alt.Axis(values=list(range(0, rows, 8)))),
        color=alt.Color("delta_bytes:Q", title=f"peak bytes minus {names[0]}'s",
                        scale=alt.Scale(scheme="redblue", reverse=True, domain=[-reach, reach]),
                        legend=alt.Legend(orient="bottom")),
        tooltip=["tile", "compared", alt.Tooltip("delta_bytes:Q", format=",")],
    ).properties(width=width, height=rows * width // cols).facet(
        column=alt.Column("compared:N", title=f"per-tile peak SRAM against {names[0]}"))


__all__ = ["delta_chart", "measure", "peak_delta_heatmap"]
