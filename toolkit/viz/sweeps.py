"""Sweep charts: every point of a sweep dataset on two of its numbers, with the Pareto front.

``sweep_pareto`` takes a sweep frame (``SWEEP_SCHEMA`` of :mod:`toolkit.sweep.rows`:
what ``toolkit.sweep(...)`` returns or ``toolkit.load_sweep(dir)`` reads back),
reduces it in polars and returns an altair chart built on the reduced frame; the
tests read ``chart.to_dict()``. A failed point (``status`` other than ``ok``: the
compile raised, or the worker was lost) has no numbers to draw: it is counted in
the title, and the frame's ``error`` column says why. A point that compiled but
did not place has no placed peak (``peak_sram_bytes`` is null): on that axis it
is counted in the title, not drawn; on another (``screen_peak_bytes``, the
screen's estimate) it is drawn as a cross and kept off the front (its program
does not fit in SRAM).
"""

from __future__ import annotations

import altair as alt
import polars as pl

from toolkit.errors import OptionError
from toolkit.tables import BIG, SUMMARY_SCHEMA, summary_label
from toolkit.viz.palette import color_scale
from toolkit.viz.text import fit_title

WIDTH, HEIGHT = 560, 340
#: what each number of a sweep row is, as an axis names it
NUMBERS = {
    "cropped_cycles": "simulated cycles, cropped as the hardware renderer crops",
    **{k: summary_label(k) for k, t in SUMMARY_SCHEMA.items() if t == BIG},   # the summary's own words
    "compile_seconds": "compile seconds",
    "peak_rss_bytes": "peak RSS of the worker, bytes",
}
#: the grid keys a sweep varies: every option column and the workload parameters
WORKLOAD_KEYS = ("batch", "blocks")
#: the legend's name for a null option value (the parameter was left to the search)
SEARCHED = "searched"
_NEEDED = ("point_id", "workload", "status", "placed")
_SHOWN = ("workload", "batch", "blocks", "row_block", "weight_class", "plans", "lowered_cycles", "cropped_cycles",
          "peak_sram_bytes", "placed", "point_id")
_COLOR = "colour_value"


def sweep_pareto(frame: pl.DataFrame, *, x: str = "peak_sram_bytes", y: str = "cropped_cycles",
                 color: str | None = None) -> alt.LayerChart:
    """``y`` against ``x`` (default: simulated cropped cycles against the placed peak SRAM) for every point that
    compiled, with the Pareto front of the placed points (none has another placed point at most as large
    in both and smaller in one) as a step line and rings.

    Points are coloured by ``color``: any column, usually a grid key (``opt_row_block``,
    ``opt_weight_class``, ``batch``); by default the first grid key whose value varies. Text and boolean
    keys take the palette's stable colours (a value keeps its colour between charts); numbers an ordered
    scale. A null option value is labelled ``searched``.
    """
    df = _checked(frame)
    for field, name in (("x", x), ("y", y)):
        if name not in df.columns or not df.schema[name].is_numeric():
            numbers = [c for c in df.columns if df.schema[c].is_numeric() and not c.startswith("opt_")]
            msg = f"{field}={name!r} is not a numeric column of the sweep frame; use one of {numbers}"
            raise OptionError(msg, field=field, value=name)
    keys = grid_keys(df)
    color = color if color is not None else next((k for k in keys if df[k].n_unique() > 1), "workload")
    if color not in df.columns or isinstance(df.schema[color], pl.List | pl.Array | pl.Struct):
        msg = f"color={color!r} is not a column of the sweep frame to colour by; grid keys: {keys}"
        raise OptionError(msg, field="color", value=color)
    failed = df.filter(pl.col("status") != "ok")
    ok = df.filter(pl.col("status") == "ok")
    drawn = ok.filter(pl.col(x).is_not_null() & pl.col(y).is_not_null())
    data = on_front(drawn, x, y).with_columns(
        pl.when(pl.col("placed")).then(pl.lit("placed")).otherwise(pl.lit("did not place")).alias("fits"),
        _labels(color).alias(_COLOR))
    shown = list(dict.fromkeys([*_SHOWN, *(k for k in keys if drawn[k].n_unique() > 1), color, x, y]))
    data = data.select([c for c in shown if c in data.columns] + ["fits", "on_front", _COLOR])
    tooltip = [alt.Tooltip(c, format=",") if data.schema[c].is_integer() else alt.Tooltip(c)
               for c in data.columns if c not in ("fits", _COLOR)]
    # padded: a ringed point at the edge of the data is drawn whole, not cut by the axis
    # wide numbers (bytes, cycles) on a narrow span: labels that would overlap are dropped, not drawn over each other
    axis = alt.Axis(labelOverlap="greedy", tickCount=6)
    xe = alt.X(f"{x}:Q", title=NUMBERS.get(x, x), scale=alt.Scale(zero=False, padding=16), axis=axis)
    ye = alt.Y(f"{y}:Q", title=NUMBERS.get(y, y), scale=alt.Scale(zero=False, padding=16), axis=axis)
    fits = [f for f in ("placed", "did not place") if f in set(data["fits"].to_list())]   # legend: drawn classes
    order = _order(drawn, color)
    numeric = df.schema[color].is_numeric()   # an ordered scale; text and booleans: the palette's own colours
    scale = alt.Scale(domain=order, scheme="viridis") if numeric else color_scale(order)
    points = alt.Chart(data).mark_point(filled=True, size=80, opacity=0.85).encode(
        x=xe, y=ye, color=alt.Color(f"{_COLOR}:{'O' if numeric else 'N'}", title=color, scale=scale, sort=order),
        shape=alt.Shape("fits:N", title="placement", scale=alt.Scale(
            domain=fits, range=[{"placed": "circle", "did not place": "cross"}[f] for f in fits])),
        tooltip=tooltip)
    front = data.filter(pl.col("on_front")).sort(x, y)
    line = alt.Chart(front).mark_line(interpolate="step-after", color="black", strokeWidth=1.2, opacity=0.7
                                      ).encode(x=xe, y=ye, order=f"{x}:Q")
    rings = alt.Chart(front).mark_point(shape="circle", size=240, filled=False, color="black", strokeWidth=1.5
                                        ).encode(x=xe, y=ye, tooltip=tooltip)
    return alt.LayerChart(layer=[points, line, rings], width=WIDTH, height=HEIGHT,
                          title=fit_title(_title(df, failed, ok, drawn, front, x, y), WIDTH))


def grid_keys(frame: pl.DataFrame) -> list[str]:
    """The columns a grid sets: every ``opt_`` option column (lists excepted) and ``batch`` / ``blocks``."""
    return [c for c in frame.columns if (c.startswith("opt_") or c in WORKLOAD_KEYS)
            and not isinstance(frame.schema[c], pl.List | pl.Array)]


def on_front(points: pl.DataFrame, x: str, y: str) -> pl.DataFrame:
    """``points`` with ``on_front``: placed, and no other placed point has ``x`` and ``y`` both at most its own
    and one smaller (points equal in both are on it together). One group-by and a running minimum."""
    placed = points.filter(pl.col("placed").fill_null(False))
    best = (placed.group_by(x).agg(pl.col(y).min().alias("_least")).sort(x)
            .with_columns(pl.col("_least").cum_min().shift(1).alias("_before")))   # best y at a smaller x
    flag = (pl.col("placed").fill_null(False) & (pl.col(y) == pl.col("_least"))
            & (pl.col("_before").is_null() | (pl.col(y) < pl.col("_before"))))
    return (points.join(best, on=x, how="left", maintain_order="left")
            .with_columns(flag.fill_null(False).alias("on_front")).drop("_least", "_before"))


# -- helpers ------------------------------------------------------------------------
def _checked(frame: pl.DataFrame) -> pl.DataFrame:
    if not isinstance(frame, pl.DataFrame):
        msg = f"frame must be a polars DataFrame of sweep rows (toolkit.load_sweep(dir)), got {type(frame).__name__}"
        raise OptionError(msg, field="frame", value=type(frame).__name__)
    missing = [c for c in _NEEDED if c not in frame.columns]
    if missing:
        msg = f"frame lacks the sweep columns {missing}; pass toolkit.sweep(...) or toolkit.load_sweep(dir)"
        raise OptionError(msg, field="frame", value=missing)
    return frame


def _labels(color: str) -> pl.Expr:
    return pl.col(color).cast(pl.String).fill_null(SEARCHED if color.startswith("opt_") else "none")


def _order(points: pl.DataFrame, color: str) -> list[str]:
    """The legend's values: in the column's own order (numbers by value), a null last."""
    values = points[color].drop_nulls().unique().sort().cast(pl.String).to_list()
    null = SEARCHED if color.startswith("opt_") else "none"
    return values + ([null] if points[color].null_count() else [])


def _title(df: pl.DataFrame, failed: pl.DataFrame, ok: pl.DataFrame, drawn: pl.DataFrame, front: pl.DataFrame,
           x: str, y: str) -> list[str]:
    lines = [f"{drawn.height} of {df.height} points drawn, {front.height} on the Pareto front of the placed points"]
    if failed.height:
        lines.append(f"{failed.height} failed point(s) not drawn (the error column says why)")
    unplaced = int((~drawn["placed"].fill_null(False)).sum())
    if unplaced:
        lines.append(f"{unplaced} point(s) did not place: crosses, kept off the front")
    for name in dict.fromkeys((x, y)):
        missing = int(ok[name].null_count())
        if missing and name == "peak_sram_bytes":
            lines.append(f"{missing} compiled point(s) without a placed peak (did not place) not drawn; "
                         f"x='screen_peak_bytes' draws the screen's estimate")
        elif missing:
            lines.append(f"{missing} compiled point(s) without {name} not drawn")
    return lines


__all__ = ["NUMBERS", "grid_keys", "on_front", "sweep_pareto"]
