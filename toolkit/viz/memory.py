"""SRAM charts: per-tile occupancy on the chip grid, one tile's memory map, the peak.

Every function takes placement frames (``OBJECTS_SCHEMA``, ``PLACEMENT_SCHEMA``,
``OCCUPANCY_SCHEMA`` from :mod:`toolkit.tables`) and a :class:`Target`, reduces
them in polars first (one row per tile, per event or per live object) and
returns an ``alt.Chart`` built straight on the reduced polars frame. Charts are
data: ``chart.to_dict()`` is what the tests check. A chart that would embed
more than ``max_rows`` rows raises :class:`OptionError` instead of producing a
page the browser cannot draw; aggregate further or raise ``max_rows`` (and
enable VegaFusion) when you mean it.

Conventions the charts assume (documented, not enforced):

* ``size_bytes`` of an object is one instance; an iterated parameter
  (``repeat_count`` n > 1) occupies ``n * stride_bytes`` from its address
  (``n * size_bytes`` when the placement has no stride).
* An object whose ``alias_of`` names another object shares its root's storage,
  so the peak breakdown counts only roots.
* ``occupancy`` may be sparse in events; per-event statistics are over the
  tiles that have a row at that event (the ``tiles`` column says how many).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import altair as alt
import polars as pl

from toolkit.errors import OptionError
from toolkit.tables import FAILURES_SCHEMA, OBJECTS_SCHEMA, OCCUPANCY_SCHEMA, PLACEMENT_SCHEMA, Schema
from toolkit.target import Target
from toolkit.viz.palette import color_scale
from toolkit.viz.text import fit_title

DEFAULT_MAX_ROWS = 5000

TILE_PEAKS_SCHEMA: Schema = {
    "tile": pl.Int32, "row": pl.Int32, "column": pl.Int32, "peak_bytes": pl.Int64,
    "capacity_bytes": pl.Int64, "fraction": pl.Float64, "percent": pl.Float64, "peak_event": pl.Int32,
    "largest_free_at_peak_bytes": pl.Int64, "min_largest_free_bytes": pl.Int64,
}
HEATMAP_COLORS = ("fraction", "headroom", "largest_free")
MAP_COLORS = ("kind", "class", "access", "region")
BREAKDOWN_BY = ("kind", "class", "access", "lifetime")   # lifetime: always live (the whole program) or transient
_OCCUPANCY_VALUES = ("live_bytes", "standard_bytes", "interleaved_bytes", "region0_bytes", "region1_bytes")


# -- chip grid ------------------------------------------------------------------
def tile_peaks(occupancy: pl.DataFrame, target: Target, *, value: str = "live_bytes") -> pl.DataFrame:
    """One row per tile of ``target`` (TILE_PEAKS_SCHEMA): peak of ``value`` over events, its
    capacity and fraction, the earliest event at the peak, and the tile's chip-grid cell.

    Fragmentation: ``largest_free_at_peak_bytes`` is the largest free contiguous span at the peak
    event, ``min_largest_free_bytes`` the smallest such span over the tile's events (the largest
    object that could still be placed at the tile's most fragmented moment). Both are null where
    the occupancy frame has no ``largest_free_bytes`` (or the tile no rows).

    Tiles without occupancy rows have peak 0 and a null ``peak_event``.
    """
    column = _value(value)
    occ = _columns(occupancy, OCCUPANCY_SCHEMA, ("tile", "event", column), "occupancy")
    _check_tiles(occ["tile"], target, "occupancy")
    if "largest_free_bytes" not in occ.columns:
        occ = occ.with_columns(pl.lit(None, dtype=pl.Int64).alias("largest_free_bytes"))
    at_peak = pl.col(column) == pl.col(column).max()
    first_peak = pl.col("event") == pl.col("event").filter(at_peak).min()
    per_tile = occ.group_by("tile").agg(
        pl.col(column).max().alias("peak_bytes"),
        pl.col("event").filter(at_peak).min().alias("peak_event"),
        pl.col("largest_free_bytes").filter(first_peak).first().alias("largest_free_at_peak_bytes"),
        pl.col("largest_free_bytes").min().alias("min_largest_free_bytes"),
    )
    capacity = _capacity(target, column)
    cols = target.grid_columns
    return (
        pl.DataFrame({"tile": pl.arange(0, target.tiles, eager=True, dtype=pl.Int32)})
        .join(per_tile, on="tile", how="left")
        .with_columns(
            (pl.col("tile") // cols).cast(pl.Int32).alias("row"),
            (pl.col("tile") % cols).cast(pl.Int32).alias("column"),
            pl.col("peak_bytes").fill_null(0),
            pl.lit(capacity, dtype=pl.Int64).alias("capacity_bytes"),
        )
        .with_columns((pl.col("peak_bytes") / capacity).alias("fraction"))
        # never pre-rounded: a view that rounds it again would show 36.4498 % as 36.5 % beside 36.4 % elsewhere
        .with_columns((pl.col("fraction") * 100).alias("percent"))
        .select([pl.col(c).cast(t) for c, t in TILE_PEAKS_SCHEMA.items()])
    )


def occupancy_heatmap(
    occupancy: pl.DataFrame, target: Target, *, value: str = "live_bytes", color: str = "fraction",
    failures: pl.DataFrame | None = None, max_rows: int = DEFAULT_MAX_ROWS, cell_px: int = 12,
    pick: str | None = "picked_tile",
) -> alt.Chart:
    """Every tile on the chip grid (``target.grid_columns`` per row), coloured by peak ``value`` /
    capacity. ``value`` is an occupancy byte column (``live_bytes``, ``standard_bytes``,
    ``interleaved_bytes``, ``region0_bytes``, ``region1_bytes``; a ``peak_`` prefix is accepted).
    Tiles with rows in ``failures`` (FAILURES_SCHEMA) get a red outline and their first
    failure's reason in the tooltip. Clicking a cell selects the tile (selection ``pick``, default
    ``picked_tile``; None: no selection, as side-by-side maps need).
    ``color="headroom"`` colours the free bytes at each tile's peak over the range the tiles span,
    so near-equal tiles (92.5 % against 92.6 %) are told apart; ``color="largest_free"`` colours
    the smallest largest free span over events (fragmentation: the biggest object that still fits
    at the tile's tightest moment).
    """
    column = _value(value)
    if color not in HEATMAP_COLORS:
        msg = (f"color={color!r} must be 'fraction' (peak / capacity), 'headroom' (free bytes at the peak) or "
               "'largest_free' (smallest largest free span over events)")
        raise OptionError(msg, field="color", value=color)
    peaks = tile_peaks(occupancy, target, value=column).with_columns(
        (pl.col("capacity_bytes") - pl.col("peak_bytes")).alias("headroom_bytes"))
    tooltip = [
        alt.Tooltip("tile:Q"), alt.Tooltip("peak_bytes:Q", title=f"peak {column}", format=","),
        alt.Tooltip("percent:Q", title="% of capacity", format=".1f"),
        alt.Tooltip("peak_event:Q", title="event of peak"),
        alt.Tooltip("headroom_bytes:Q", title="free bytes at the peak (B)", format=","),
        alt.Tooltip("largest_free_at_peak_bytes:Q", title="largest free span at the peak (B)", format=","),
        alt.Tooltip("min_largest_free_bytes:Q", title="smallest largest free span (B)", format=","),
        alt.Tooltip("row:Q", title="chip row"), alt.Tooltip("column:Q", title="chip column"),
    ]
    stroke: Any = alt.value("white")
    stroke_width: Any = alt.value(0.6)
    if failures is not None:
        fail = _columns(failures, FAILURES_SCHEMA, ("tile", "event", "reason"), "failures")
        _check_tiles(fail["tile"], target, "failures")
        per_tile = fail.sort("event").group_by("tile").agg(
            pl.col("event").first().alias("failure_event"), pl.col("reason").first(), pl.len().alias("failures"))
        peaks = peaks.join(per_tile, on="tile", how="left").with_columns(pl.col("failures").fill_null(0))
        tooltip += [alt.Tooltip("failures:Q"), alt.Tooltip("failure_event:Q"), alt.Tooltip("reason:N")]
        stroke = alt.condition("datum.failures > 0", alt.value("red"), alt.value("white"))
        stroke_width = alt.condition("datum.failures > 0", alt.value(2.5), alt.value(0.6))
    _guard(peaks.height, max_rows, f"occupancy_heatmap has one row per tile ({target.tiles} tiles)")
    top = max(1.0, float(peaks.select(pl.col("fraction").max()).item() or 0.0))
    selection = None if pick is None else alt.selection_point(name=pick, fields=["tile"], on="click")
    rows = -(-target.tiles // target.grid_columns)
    capacity = _capacity(target, column)
    chart = (
        alt.Chart(peaks)
        .mark_rect()
        .encode(
            x=alt.X("column:O", title="chip column",
                    axis=alt.Axis(values=list(range(0, target.grid_columns, 5)), labelAngle=0)),
            y=alt.Y("row:O", title="chip row", axis=alt.Axis(values=list(range(0, rows, 4)))),
            color=_heat_color(peaks, color, top),
            opacity=alt.value(1.0) if selection is None else alt.condition(selection, alt.value(1.0), alt.value(0.5)),
            stroke=stroke,
            strokeWidth=stroke_width,
            tooltip=tooltip,
        )
    )
    return (
        (chart if selection is None else chart.add_params(selection))
        .properties(
            width=target.grid_columns * cell_px, height=rows * cell_px,
            title=_HEAT_TITLES[color].format(column=column) + f": {target.tiles} tiles of {target.name}, "
            f"capacity {capacity:,} B",
        )
    )


_HEAT_TITLES = {"fraction": "peak {column} per tile", "headroom": "free bytes at each tile's {column} peak",
                "largest_free": "smallest largest free span per tile (fragmentation)"}


#: the heat maps that colour bytes (headroom, largest free span) clip their colour scale to these percentiles of the
#: tiles' values: one near-empty row of tiles would otherwise stretch the scale and paint the rest one colour
ROBUST_PERCENTILES = (5, 95)


def robust_domain(values: pl.Series, percentiles: tuple[int, int] = ROBUST_PERCENTILES) -> list[int]:
    """``[low, high]``: the ``percentiles`` of ``values`` (nulls left out), widened to the full range when the
    two meet (a chip of near-equal tiles keeps its spread), at least one byte wide."""
    v = values.drop_nulls()
    if v.len() == 0:
        return [0, 1]
    low, high = (int(v.quantile(p / 100, "nearest")) for p in percentiles)
    if low >= high:
        low, high = int(v.min()), int(v.max())
    return [low, max(high, low + 1)]


def _heat_color(peaks: pl.DataFrame, color: str, top: float) -> alt.Color:
    if color == "fraction":
        return alt.Color("fraction:Q", title="peak / capacity", scale=alt.Scale(scheme="viridis", domain=[0.0, top]))
    field, title = (("headroom_bytes", "free bytes at peak (B)") if color == "headroom" else
                    ("min_largest_free_bytes", "largest free span (B)"))
    low, high = ROBUST_PERCENTILES
    # over the tiles' own spread, clipped to percentiles (clamped: tiles beyond take the end colours), as the
    # legend says: near-equal tiles stay apart and a near-empty row does not flatten the rest
    return alt.Color(f"{field}:Q", title=[title, f"colour clipped to the {low}th-{high}th percentile"],
                     scale=alt.Scale(scheme="viridis", domain=robust_domain(peaks[field]), clamp=True),
                     legend=alt.Legend(titleLimit=LEGEND_TITLE_PX))


#: the longest legend title line drawn, in pixels (the clipping note must not be cut)
LEGEND_TITLE_PX = 320


def heatmaps_side_by_side(
    occupancies: dict[str, pl.DataFrame], target: Target, *, value: str = "live_bytes", color: str = "fraction",
    cell_px: int = 6, max_rows: int = DEFAULT_MAX_ROWS,
) -> alt.HConcatChart:
    """One chip heat map per occupancy frame (``{title: occupancy}``, e.g. our placement and an ipu-stack memory
    profile of the same program: :func:`toolkit.profile.read_memory_profile`), side by side on one colour scale
    (the scale spans every frame's tiles, so one colour is one number in both), each titled by its key. Two
    maps at the default 6 px a tile fit a notebook's output area with their legend."""
    if not occupancies:
        msg = "occupancies={} holds no frame to draw; pass {title: occupancy}"
        raise OptionError(msg, field="occupancies", value={})
    charts = [occupancy_heatmap(occ, target, value=value, color=color, cell_px=cell_px, max_rows=max_rows, pick=None)
              for occ in occupancies.values()]
    peaks = pl.concat([tile_peaks(occ, target, value=value).with_columns(
        (pl.col("capacity_bytes") - pl.col("peak_bytes")).alias("headroom_bytes")) for occ in occupancies.values()])
    top = max(1.0, float(peaks["fraction"].max() or 0.0))
    shared = _heat_color(peaks, color, top)
    panels = [chart.encode(color=shared).properties(title=fit_title([name, chart.title], target.grid_columns * cell_px))
              for name, chart in zip(occupancies, charts, strict=True)]
    return alt.hconcat(*panels).resolve_scale(color="shared")


# -- one tile -----------------------------------------------------------------------
def memory_map(
    objects: pl.DataFrame, placement: pl.DataFrame, target: Target, tile: int, *,
    color: str = "kind", occupancy: pl.DataFrame | None = None, max_rows: int = DEFAULT_MAX_ROWS,
    events: int | None = None,
) -> alt.LayerChart:
    """One tile's memory: a rect per placed object from (first event, address) to
    (last event + 1, address + span), coloured by ``color`` (kind, class, access or region),
    with element boundaries as thin rules, region boundaries emphasised and the loader limit dashed.
    With ``occupancy``, a vertical rule marks the tile's peak event. Objects without an address
    (not placed) are left out. The event axis is ``[0, events]`` (default: the last event of any object
    or occupancy row, plus one), the same as :func:`toolkit.viz.occupancy_over_time` given ``events``.
    """
    _tile(tile, target)
    if color not in MAP_COLORS:
        msg = f"color={color!r} is not a memory-map colouring; use one of {list(MAP_COLORS)}"
        raise OptionError(msg, field="color", value=color)
    placed = _placed(objects, placement, tile)
    if color == "region":   # a region is named by what its elements are ("region 1 (interleaved)"), not "1"
        placed = placed.with_columns(region_labels(target).alias("region"))
    _guard(placed.height, max_rows, f"memory_map of tile {tile} has {placed.height} placed objects")
    y_scale = alt.Scale(domain=[target.memory_start, target.memory_end], nice=False, zero=False)
    events = max(events or 0, event_count(objects, occupancy))
    x_scale = alt.Scale(domain=[0, events], nice=False)
    elements = target.elements()
    regions = target.regions()
    ticks = sorted({*elements["offset"].gather_every(2).to_list(), *regions["start"].to_list(), target.memory_end})
    rects = (
        alt.Chart(placed)
        .mark_rect(stroke="white", strokeWidth=0.5, opacity=0.85)
        .encode(
            x=alt.X("first:Q", title="event", scale=x_scale, axis=alt.Axis(tickMinStep=1, format="d")),
            x2="end_event:Q",
            y=alt.Y("address:Q", title="address", scale=y_scale, axis=alt.Axis(format="#x", values=ticks, grid=False)),
            y2="end_address:Q",
            color=_category_color(placed, color),
            tooltip=[
                alt.Tooltip("name:N"), alt.Tooltip("object_id:Q"), alt.Tooltip("kind:N"), alt.Tooltip("class:N"),
                alt.Tooltip("size_bytes:Q", format=","), alt.Tooltip("span_bytes:Q", format=","),
                alt.Tooltip("repeat_count:Q"), alt.Tooltip("address:Q", format="#x"),
                alt.Tooltip("end_address:Q", format="#x"), alt.Tooltip("first:Q"), alt.Tooltip("last:Q"),
            ],
        )
    )
    starts = regions["start"]
    inner = elements.filter(~pl.col("offset").is_in(starts.implode())).select("offset", "range", "region")
    element_rules = alt.Chart(inner).mark_rule(color="#999999", strokeWidth=0.5, strokeDash=[2, 2]).encode(
        y=alt.Y("offset:Q", scale=y_scale), tooltip=[alt.Tooltip("range:N", title="element"), "region:Q"])
    bounds = regions.select(
        "region", pl.col("start").alias("offset"),
        pl.format("region {} ({})", "region",
                  pl.when("interleaved").then(pl.lit("interleaved")).otherwise(pl.lit("standard"))).alias("label"),
    )
    region_rules = alt.Chart(bounds).mark_rule(color="black", strokeWidth=2).encode(y=alt.Y("offset:Q", scale=y_scale))
    labels = alt.Chart(bounds).mark_text(align="left", baseline="bottom", dx=3, dy=-3, fontWeight="bold").encode(
        y=alt.Y("offset:Q", scale=y_scale), x=alt.value(0), text="label:N")
    limit = pl.DataFrame({"offset": [target.load_limit], "label": [f"load limit {target.load_limit:#x}"]})
    limit_rule = alt.Chart(limit).mark_rule(color="firebrick", strokeDash=[6, 3]).encode(
        y=alt.Y("offset:Q", scale=y_scale), tooltip=["label:N"])
    layers = [rects, element_rules, region_rules, labels, limit_rule]
    title = f"tile {tile}: {placed.height} placed objects, {target.memory_bytes:,} B of SRAM"
    peak = None if occupancy is None else _peak(occupancy, tile)
    if peak is not None:
        marker = pl.DataFrame({"event": [peak[0]], "middle": [peak[0] + 0.5],  # event e spans [e, e + 1)
                               "label": [f"peak event {peak[0]}: {peak[1]:,} B live"]})
        layers.append(alt.Chart(marker).mark_rule(color="black", strokeDash=[4, 2]).encode(
            x=alt.X("middle:Q", scale=x_scale), tooltip=["label:N"]))
        title += f"; peak {peak[1]:,} B at event {peak[0]}"
    return alt.LayerChart(layer=layers, width=640, height=480, title=title)


def region_labels(target: Target, column: str = "region") -> pl.Expr:
    """``column`` (a region number) as a reader should see it: ``"region 0 (standard)"``, ``"region 1
    (interleaved)"``, from the target's regions."""
    names = {int(r): f"region {r} ({'interleaved' if i else 'standard'})"
             for r, i in target.regions().select("region", "interleaved").iter_rows()}
    return pl.col(column).replace_strict(names, default=pl.format("region {}", pl.col(column)), return_dtype=pl.String)


WEIGHT_MEMORY_SCHEMA: Schema = {
    "name": pl.String, "class": pl.String, "region": pl.String, "tiles": pl.Int64, "objects": pl.Int64,
    "max_tile_bytes": pl.Int64, "total_bytes": pl.Int64,
}


def weight_memory(objects: pl.DataFrame, placement: pl.DataFrame, target: Target) -> pl.DataFrame:
    """Where each weight tensor lives, as its objects and their placement say (WEIGHT_MEMORY_SCHEMA): its
    memory class, the region its objects were placed in (``"region 0 (standard)"``; ``"unplaced"`` without an
    address), on how many tiles, the most bytes on one tile and in all. This is the weights' truth: a layout's
    ``weight_class`` is the class the AMP reads its coefficient operand from, which for a swapped op is the
    activation, not the weight."""
    objs = _columns(objects, OBJECTS_SCHEMA, ("object_id", "tile", "kind", "name", "size_bytes", "class",
                                              "repeat_count"), "objects").filter(pl.col("kind") == "weight")
    where = _columns(placement, PLACEMENT_SCHEMA, ("object_id", "region", "stride_bytes"), "placement")
    placed = objs.join(where.select("object_id", "region", "stride_bytes"), on="object_id", how="left")
    labelled = placed.with_columns(
        pl.when(pl.col("region").is_null()).then(pl.lit("unplaced"))
        .otherwise(region_labels(target, "region")).alias("region"), _span())
    keys = ["name", "class", "region"]
    counts = labelled.group_by(keys).agg(pl.len().alias("objects"))
    per_tile = labelled.group_by(*keys, "tile").agg(pl.col("span_bytes").sum())
    return (per_tile.group_by(keys).agg(
        pl.col("tile").n_unique().alias("tiles"), pl.col("span_bytes").max().alias("max_tile_bytes"),
        pl.col("span_bytes").sum().alias("total_bytes"))
        .join(counts, on=keys).sort(keys).cast(WEIGHT_MEMORY_SCHEMA).select(list(WEIGHT_MEMORY_SCHEMA)))


#: the peak breakdown's two panels and the longest object label drawn, in pixels: with the class legend they fit
#: a notebook's output area (1,000 px)
PANEL_PX, LABEL_PX = 260, 190


def event_count(objects: pl.DataFrame, occupancy: pl.DataFrame | None = None) -> int:
    """The program's events as the SRAM views count them: one past the last event any object is live at
    (or any occupancy row has); the memory map and the occupancy line chart share this axis."""
    last = [int(v) for v in (objects["last"].max() if "last" in objects.columns else None,
                             None if occupancy is None or occupancy.height == 0 else occupancy["event"].max())
            if v is not None]
    return max(last, default=0) + 1


def peak_breakdown(
    objects: pl.DataFrame, placement: pl.DataFrame, occupancy: pl.DataFrame, target: Target, tile: int, *,
    by: str = "kind", top: int = 10, max_rows: int = DEFAULT_MAX_ROWS,
) -> alt.HConcatChart:
    """What is live on ``tile`` at its peak event (the earliest event of maximal ``live_bytes``):
    bytes by ``by`` (kind, class, access, or lifetime: always live from the first to the last event, or
    transient) stacked by class, next to the ``top`` largest objects
    (coloured by class too, so the two bars share one legend).
    """
    _tile(tile, target)
    if by not in BREAKDOWN_BY:
        msg = f"by={by!r} is not a breakdown; use one of {list(BREAKDOWN_BY)}"
        raise OptionError(msg, field="by", value=by)
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        msg = f"top={top!r} must be a positive number of objects to list"
        raise OptionError(msg, field="top", value=top)
    peak = _peak(occupancy, tile)
    if peak is None:
        msg = f"tile={tile} has no occupancy rows; pick a tile that holds objects (see tile_peaks)"
        raise OptionError(msg, field="tile", value=tile, tile=tile)
    event, live_bytes = peak
    last_event = int(_columns(objects, OBJECTS_SCHEMA, ("last",), "objects")["last"].max())
    live = _live(objects, placement, tile, event).with_columns(
        pl.when((pl.col("first") <= 0) & (pl.col("last") >= last_event)).then(pl.lit("always live"))
        .otherwise(pl.lit("transient")).alias("lifetime"))
    keys = list(dict.fromkeys([by, "class"]))
    groups = live.group_by(keys).agg(pl.col("span_bytes").sum().alias("bytes"), pl.len().alias("objects"))
    # the largest objects say which are always live (the whole program: weights, code), beside their name
    largest = (live.sort(["span_bytes", "object_id"], descending=[True, False]).head(top)
               .with_columns(pl.when(pl.col("lifetime") == "always live").then(pl.col("name") + " [always live]")
                             .otherwise(pl.col("name")).alias("shown")))
    _guard(groups.height + largest.height, max_rows, f"peak_breakdown of tile {tile}")
    always = largest["lifetime"] == "always live"
    capacity = target.memory_bytes
    bars = alt.Chart(groups).mark_bar().encode(
        y=alt.Y(f"{by}:N", sort="-x", title=by), x=alt.X("sum(bytes):Q", title="live bytes"),
        color=_category_color(live, "class"),
        tooltip=[*dict.fromkeys([f"{by}:N", "class:N"]), alt.Tooltip("bytes:Q", format=","), "objects:Q"],
    ).properties(width=PANEL_PX, title=f"live bytes by {by}")
    big = alt.Chart(largest).mark_bar().encode(
        y=alt.Y("shown:N", sort="-x", title=None, axis=alt.Axis(labelLimit=LABEL_PX)),
        x=alt.X("span_bytes:Q", title="bytes"),
        color=_category_color(live, "class"),
        tooltip=["name:N", "object_id:Q", "kind:N", "class:N", "lifetime:N", alt.Tooltip("span_bytes:Q", format=","),
                 alt.Tooltip("address:Q", format="#x"), "first:Q", "last:Q"],
    ).properties(width=PANEL_PX, title=f"{largest.height} largest live objects ({int(always.sum())} always live)")
    total = int(live["span_bytes"].sum())
    rest = live_bytes - total
    title = [f"tile {tile} peaks at event {event}: {live_bytes:,} B live ({100 * live_bytes / capacity:.1f}% of "
             f"{capacity:,} B); {live.height} live objects hold {total:,} B"]
    if rest > 0:
        title.append(f"the other {rest:,} B belong to objects not passed here (pass the package's objects too)")
    return alt.hconcat(bars, big).properties(title=fit_title(title, 700))


# -- over time -------------------------------------------------------------------------
# -- helpers ---------------------------------------------------------------------------
def _category_color(frame: pl.DataFrame, column: str) -> alt.Color:
    """A nominal colour with the palette's stable colour per category (a memory class is the same colour here as
    in a sweep or layout chart); non-text columns (region numbers) keep the default scheme."""
    if frame.schema[column] == pl.String:
        return alt.Color(f"{column}:N", title=column, scale=color_scale(frame[column].unique().to_list()))
    return alt.Color(f"{column}:N", title=column)


def _value(value: str) -> str:
    column = value.removeprefix("peak_") if isinstance(value, str) else value
    if column not in _OCCUPANCY_VALUES:
        msg = f"value={value!r} is not an occupancy byte column; use one of {list(_OCCUPANCY_VALUES)}"
        raise OptionError(msg, field="value", value=value)
    return column


def _capacity(target: Target, column: str) -> int:
    regions = target.regions()
    if column == "interleaved_bytes":
        return int(regions.filter("interleaved")["size_bytes"].sum())
    if column in ("region0_bytes", "region1_bytes"):
        return int(regions.filter(pl.col("region") == int(column[6]))["size_bytes"].sum())
    return target.memory_bytes


def _columns(df: Any, schema: Schema, needed: Iterable[str], what: str) -> pl.DataFrame:
    if isinstance(df, pl.LazyFrame):
        df = df.collect()
    if not isinstance(df, pl.DataFrame):
        msg = f"{what} must be a polars DataFrame, got {type(df).__name__}"
        raise OptionError(msg, field=what, value=type(df).__name__)
    missing = [c for c in needed if c not in df.columns]
    if missing:
        msg = f"{what} lacks columns {missing} (expected the {what.upper()}_SCHEMA of toolkit.tables)"
        raise OptionError(msg, field=what, value=missing)
    return df.with_columns([pl.col(c).cast(schema[c], strict=False) for c in df.columns if c in schema])


def _check_tiles(tiles: pl.Series, target: Target, what: str) -> None:
    bad = tiles.filter((tiles < 0) | (tiles >= target.tiles))
    if bad.len():
        msg = f"{what} has {bad.len()} rows with tile outside 0..{target.tiles - 1} (first: {bad[0]})"
        raise OptionError(msg, field="tile", value=int(bad[0]), tile=int(bad[0]))


def _tile(tile: Any, target: Target) -> None:
    if isinstance(tile, bool) or not isinstance(tile, int) or not 0 <= tile < target.tiles:
        msg = f"tile={tile!r} is not a tile of {target.name} (0..{target.tiles - 1})"
        raise OptionError(msg, field="tile", value=tile)


_OBJECT_COLUMNS = ("object_id", "tile", "kind", "name", "size_bytes", "first", "last", "access", "class",
                   "alias_of", "repeat_count")
_PLACEMENT_COLUMNS = ("object_id", "tile", "address", "stride_bytes", "region")


def _span() -> pl.Expr:
    instances = pl.col("repeat_count").fill_null(1)
    stride = pl.col("stride_bytes").fill_null(0)
    stride = pl.when(stride > 0).then(stride).otherwise(pl.col("size_bytes"))
    return pl.when(instances > 1).then(instances * stride).otherwise(pl.col("size_bytes")).alias("span_bytes")


def _placed(objects: pl.DataFrame, placement: pl.DataFrame, tile: int) -> pl.DataFrame:
    objs = _columns(objects, OBJECTS_SCHEMA, _OBJECT_COLUMNS, "objects").filter(pl.col("tile") == tile)
    where = _columns(placement, PLACEMENT_SCHEMA, _PLACEMENT_COLUMNS, "placement").filter(pl.col("tile") == tile)
    return (
        objs.select(_OBJECT_COLUMNS)
        .join(where.select("object_id", "address", "stride_bytes", "region"), on="object_id", how="inner")
        .filter(pl.col("address").is_not_null())
        .with_columns(_span(), (pl.col("last") + 1).alias("end_event"))
        .with_columns((pl.col("address") + pl.col("span_bytes")).alias("end_address"))
        .sort("address", "first")
    )


def _live(objects: pl.DataFrame, placement: pl.DataFrame, tile: int, event: int) -> pl.DataFrame:
    objs = _columns(objects, OBJECTS_SCHEMA, _OBJECT_COLUMNS, "objects")
    where = _columns(placement, PLACEMENT_SCHEMA, _PLACEMENT_COLUMNS, "placement").filter(pl.col("tile") == tile)
    root = pl.col("alias_of").is_null() | (pl.col("alias_of") == pl.col("object_id"))
    return (
        objs.filter((pl.col("tile") == tile) & (pl.col("first") <= event) & (pl.col("last") >= event) & root)
        .select(_OBJECT_COLUMNS)
        .join(where.select("object_id", "address", "stride_bytes"), on="object_id", how="left")
        .with_columns(_span())
    )


def _peak(occupancy: pl.DataFrame, tile: int) -> tuple[int, int] | None:
    """(earliest event of maximal live_bytes, live_bytes) of ``tile``; None without rows."""
    occ = _columns(occupancy, OCCUPANCY_SCHEMA, ("tile", "event", "live_bytes"), "occupancy")
    occ = occ.filter(pl.col("tile") == tile)
    if occ.height == 0:
        return None
    row = occ.sort(["live_bytes", "event"], descending=[True, False]).row(0, named=True)
    return int(row["event"]), int(row["live_bytes"])


def _guard(rows: int, max_rows: int, what: str) -> None:
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1:
        msg = f"max_rows={max_rows!r} must be a positive integer"
        raise OptionError(msg, field="max_rows", value=max_rows)
    if rows > max_rows:
        msg = (f"{what}: the chart would embed {rows:,} rows, above max_rows={max_rows:,}; "
               "aggregate or filter first, or raise max_rows (and enable VegaFusion)")
        raise OptionError(msg, field="max_rows", value=max_rows)
