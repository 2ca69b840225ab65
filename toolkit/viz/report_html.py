"""Offline HTML reports: one self-contained file per profile or per SRAM case, readable without Jupyter.

:func:`profile_report` (a :class:`Profile`) and :func:`sram_report` (an artifacts case, ``toolkit.load``)
return a :class:`Report`: header facts, then sections that each hold a chart or a table. ``Report.html()``
is one page with the Vega, Vega-Lite and Vega-Embed libraries inlined (bundled by vl-convert), so it opens
with no network at all; :func:`write_report` writes it atomically, optionally with one SVG or PNG per chart
beside it (``<stem>.<chart>.svg``), every image rendered before anything is written.

Every chart fits ``WIDTH_PX``. A profile's tile timeline draws one bar per category piece while there are at
most ``GANTT_MAX_TILES`` tiles and ``GANTT_MAX_ROWS`` pieces; past that it is binned (:func:`bin_timeline`):
time into ``TIME_BINS`` equal bins, tiles into at most ``TILE_GROUPS`` groups of consecutive tiles, each cell
coloured by the category holding most tile-cycles in it, with the chip-wide share of every category per bin
below. Chart titles say which was drawn.
"""

from __future__ import annotations

import functools
import html
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import altair as alt
import polars as pl

from toolkit.errors import FormatError, OptionError
from toolkit.files import atomic_write, check_output, check_parent
from toolkit.profile import CATEGORIES, barriers, category_cycles, crop, query, timeline_categories
from toolkit.profile.model import SOURCE_MEANING, Profile
from toolkit.target import Target, ipu21
from toolkit.viz.memory import memory_map, occupancy_heatmap, peak_breakdown, tile_peaks
from toolkit.viz.palette import color_of
from toolkit.viz.profile import barrier_chart, timeline
from toolkit.viz.text import html_table

if TYPE_CHECKING:
    from toolkit.artifacts import Case

WIDTH_PX = 900          # no chart is wider (plot, axes and legend)
PLOT_PX = 620           # plot width of the wide charts
GANTT_MAX_TILES = 64
GANTT_MAX_ROWS = 4000
TIME_BINS = 150
TILE_GROUPS = 48
BARRIER_MAX_PHASES = 60
TABLE_MAX_ROWS = 200
IMAGE_FORMATS = ("svg", "png")
CASE_TABLES = ("schedule.objects", "placement.placement", "placement.occupancy")


@dataclass(frozen=True, slots=True, kw_only=True)
class Section:
    """One part of a report: a heading, a note, and a chart (saved as image ``name``) or a table."""

    heading: str
    note: str = ""
    name: str = ""
    chart: alt.TopLevelMixin | None = None
    table: pl.DataFrame | None = None

    def html(self) -> str:
        note = f"<p class='note'>{html.escape(self.note)}</p>" if self.note else ""
        chart = f"<div class='chart' id='chart-{html.escape(self.name)}'></div>" if self.chart is not None else ""
        table = html_table(self.table, TABLE_MAX_ROWS) if self.table is not None else ""
        return f"<section><h2>{html.escape(self.heading)}</h2>{note}{chart}{table}</section>"


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """A titled page: a warning banner (a stale case's label; none when empty), header facts (label, value) and
    sections in reading order."""

    title: str
    facts: tuple[tuple[str, str], ...]
    sections: tuple[Section, ...]
    banner: str = ""

    @property
    def charts(self) -> dict[str, alt.TopLevelMixin]:
        return {s.name: s.chart for s in self.sections if s.chart is not None}

    def specs(self) -> dict[str, dict]:
        """Every chart's Vega-Lite spec by name (data inlined; the row counts are bounded by the builders)."""
        with alt.data_transformers.enable("default", max_rows=None):
            return {name: chart.to_dict() for name, chart in self.charts.items()}

    def html(self, specs: dict[str, dict] | None = None) -> str:
        """The page: one file, scripts inlined, no URL fetched when it opens (``specs``: :meth:`specs`, if
        already made)."""
        specs = self.specs() if specs is None else specs
        facts = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in self.facts)
        data = json.dumps(specs).replace("</", "<\\/")
        banner = f"<p class='stale' id='stale'>{html.escape(self.banner)}</p>" if self.banner else ""
        return _PAGE.format(title=html.escape(self.title), facts=facts, body="\n".join(s.html() for s in self.sections),
                            bundle=_bundle(), specs=data, width=WIDTH_PX, banner=banner)


# -- profile -----------------------------------------------------------------------------------------------
def profile_report(profile: Profile, *, name: str = "profile", shared_clock: bool = False,
                   max_rows: int = GANTT_MAX_ROWS) -> Report:
    """Header (file, source, clock, tiles, cropped and shared-clock cycles), the tile timeline by the hardware
    renderer's categories, cycles per category, barriers, and the phase and kernel tables."""
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1:
        msg = f"max_rows={max_rows!r} must be a positive number of timeline pieces"
        raise OptionError(msg, field="max_rows", value=max_rows)
    if profile.samples.height == 0:
        msg = "the profile has no samples; there is nothing to render"
        raise FormatError(msg, file=name, field="samples", value=0)
    cropped, shared = crop(profile), crop(profile, shared_clock=True)
    view = shared if shared_clock else cropped
    mhz = profile.clock_hz / 1e6
    facts = (
        ("file", name), ("source", SOURCE_MEANING.get(profile.source, profile.source)), ("clock", f"{mhz:,.1f} MHz"),
        ("tiles", f"{view.tiles:,}"), ("samples", f"{profile.samples.height:,}"),
        ("cropped cycles", f"{cropped.cropped_cycles:,} cycles = {cropped.cropped_seconds * 1e6:,.2f} µs "
                           "(origin: the latest first-sample start, the hardware renderer's default)"),
        ("shared clock", f"{shared.cropped_cycles:,} cycles = {shared.cropped_seconds * 1e6:,.2f} µs "
                         "(origin: the earliest first-sample start, nothing clipped)"),
        ("timeline drawn on", "the shared clock" if shared_clock else "cropped cycles"),
    )
    # the renderer's categories, plus the gaps between a tile's samples (and after its last one) as idle
    tl = timeline_categories(profile, shared_clock=shared_clock)
    clock = "shared clock" if shared_clock else "cropped"
    sections = [*timeline_sections(tl, view.cropped_cycles, clock=clock, max_rows=max_rows)]
    # the share is rounded once, by the table; "tiles" is how many tiles spent any cycle in the category
    totals = category_cycles(tl).with_columns((pl.col("share") * 100).alias("share_percent")).drop("share")
    sections.append(Section(heading="Tile-cycles per category",
                            table=totals.rename({"cycles": "tile_cycles", "tiles": "tiles_in_category"}),
                            note="Summed over tiles: a cycle on 1,000 tiles counts 1,000 times. Idle includes the gaps "
                                 "between a tile's samples and after its last one. The share is of every tile-cycle "
                                 f"of the {view.tiles:,} tiles, idle included."))
    b = barriers(profile).phases
    shown = b if b.height <= BARRIER_MAX_PHASES else b.sort(
        pl.col("last_arrival_offset_cycles") - pl.col("first_arrival_offset_cycles")
        + pl.col("after_last_arrival_cycles"), descending=True).head(BARRIER_MAX_PHASES)
    which = "every phase" if shown.height == b.height else f"the {shown.height} of {b.height} phases that cost most"
    sections.append(Section(heading="Barriers", name="barriers", chart=barrier_chart(shown, width=PLOT_PX),
                            note=f"Cycles on the shared clock (origin: the earliest first-sample start); {which}."))
    sections.append(Section(heading=f"Phases ({clock} cycles)", table=query(view, by="phase")))
    sections.append(Section(heading=f"Kernels ({clock} cycles)", table=query(view, by="kernel")))
    return Report(title=f"Profile {name}", facts=facts, sections=tuple(sections))


def timeline_sections(tl: pl.DataFrame, span_cycles: int, *, clock: str = "cropped",
                      max_rows: int = GANTT_MAX_ROWS) -> list[Section]:
    """The tile timeline of a :func:`timeline_categories` frame: per piece when small, else binned."""
    scale = category_scale(tl["category"])
    tiles = tl["tile"].n_unique()
    if tiles <= GANTT_MAX_TILES and tl.height <= max_rows:
        chart = timeline(tl.filter(pl.col("duration_cycles") > 0), color="category", max_rows=max_rows).encode(
            color=alt.Color("category:N", title="category", scale=scale),
            x=alt.X("start_offset_cycles:Q", title=f"cycles from origin ({clock})"),
        ).properties(width=PLOT_PX, height=max(60, 14 * tiles),
                     title=f"tile timeline: every category piece of {tiles} tiles ({tl.height:,} pieces)")
        return [Section(heading="Tile timeline", name="timeline", chart=chart)]
    cells, shares, bin_cycles, group_tiles = bin_timeline(tl, span_cycles)
    groups = int(cells["group"].max()) + 1
    bins = -(-max(span_cycles, 1) // bin_cycles)
    contiguous = tl["tile"].min() == 0 and tl["tile"].max() == tiles - 1
    y_title = "tile" if contiguous else f"tile rank (of the {tiles} profiled tiles)"
    x = alt.X("t0:Q", title=f"cycles from origin ({clock})", scale=alt.Scale(domain=[0, span_cycles], nice=False))
    cycles = f"datum.bin * {bin_cycles}"
    heat = alt.Chart(cells).transform_calculate(
        t0=cycles, t1=f"min(datum.bin_end * {bin_cycles}, {span_cycles})", tile0=f"datum.group * {group_tiles}",
        tile1=f"min(datum.group * {group_tiles} + {group_tiles}, {tiles})",
    ).mark_rect(strokeWidth=0.5).encode(
        x=x, x2="t1:Q",
        y=alt.Y("tile0:Q", title=y_title, scale=alt.Scale(domain=[0, tiles], nice=False, reverse=True)), y2="tile1:Q",
        color=alt.Color("category:N", title="dominant category", scale=category_scale(cells["category"])),
        stroke=alt.Stroke("category:N", title="dominant category", scale=category_scale(cells["category"])),
        tooltip=[alt.Tooltip("tile0:Q", title="first tile (rank)"), alt.Tooltip("tile1:Q", title="tile limit"),
                 alt.Tooltip("t0:Q", title="from cycle", format=","), alt.Tooltip("t1:Q", title="to cycle", format=","),
                 "category:N", alt.Tooltip("share_percent:Q", title="mean % of the cells' tile-cycles")],
    ).properties(width=PLOT_PX, height=min(400, max(120, 8 * groups)), title=alt.Title(
        [f"tile timeline, binned: {tiles:,} tiles x {span_cycles:,} cycles in {groups} groups of {group_tiles} "
         f"tiles x {bins} bins of {bin_cycles:,} cycles;",
         "each cell shows the category holding most tile-cycles in it"], anchor="start"))
    stack = alt.Chart(shares).transform_calculate(
        t0=cycles, t1=f"min({cycles} + {bin_cycles}, {span_cycles})",
    ).mark_rect(strokeWidth=0.5).encode(
        x=x, x2="t1:Q",
        y=alt.Y("y0:Q", title="% of tile-cycles", scale=alt.Scale(domain=[0, 100])), y2="y1:Q",
        color=alt.Color("category:N", title="category", scale=scale),
        stroke=alt.Stroke("category:N", title="category", scale=scale),   # a stroke in the fill's colour: no seams
        tooltip=[alt.Tooltip("t0:Q", title="from cycle", format=","), "category:N",
                 alt.Tooltip("share_percent:Q", title="% of all tiles' cycles in the bin")],
    ).properties(width=PLOT_PX, height=140, title=alt.Title(
        f"share of all {tiles:,} tiles' cycles per category, {bins} bins of {bin_cycles:,} cycles", anchor="start"))
    return [Section(heading="Tile timeline", name="timeline", chart=heat,
                    note=f"{tl.height:,} category pieces on {tiles:,} tiles are too many to draw one by one "
                         f"(limits: {GANTT_MAX_TILES} tiles, {max_rows:,} pieces), so they are binned."),
            Section(heading="Categories over time", name="categories", chart=stack)]


def bin_timeline(tl: pl.DataFrame, span_cycles: int, *, bins: int = TIME_BINS, groups: int = TILE_GROUPS
                 ) -> tuple[pl.DataFrame, pl.DataFrame, int, int]:
    """Tile-cycles of every category per (tile group, time bin) of a :func:`timeline_categories` frame.

    Returns (cells, shares, bin_cycles, group_tiles): ``cells`` one row per run of non-empty bins
    ``[bin, bin_end)`` of a group with one dominant category (most tile-cycles; ties go to the earlier of
    ``CATEGORIES``) and that category's mean share of the run's cells (a cell's tiles times its cycles) in
    percent; ``shares`` per bin and category, stacked in ``CATEGORIES`` order from ``y0`` to ``y1``, the share of
    every tile's
    cycles in the bin. Tiles are grouped by rank (consecutive tile ids), time not covered by a sample counts
    for no category.
    """
    bin_cycles = max(1, -(-max(span_cycles, 1) // bins))
    ranks = tl.select(pl.col("tile").unique().sort())
    tiles = ranks.height
    group_tiles = -(-tiles // groups)
    rank = pl.Series("rank", range(len(CATEGORIES)), dtype=pl.Int32)
    order = pl.DataFrame({"category": list(CATEGORIES), "rank": rank})
    s, e = pl.col("start_offset_cycles"), pl.col("end_offset_cycles")
    b = pl.col("bin")
    pieces = (tl.filter(e > s).join(ranks.with_row_index("tile_rank"), on="tile")
              .select((pl.col("tile_rank") // group_tiles).cast(pl.Int32).alias("group"), "category", s, e,
                      pl.int_ranges(s // bin_cycles, (e - 1) // bin_cycles + 1, dtype=pl.Int32).alias("bin"))
              .explode("bin"))
    overlap = pl.min_horizontal(e, (b + 1) * bin_cycles) - pl.max_horizontal(s, b * bin_cycles)
    per = (pieces.group_by("group", "bin", "category").agg(overlap.sum().alias("cycles"))
           .join(order, on="category", how="left").with_columns(pl.col("rank").fill_null(len(CATEGORIES))))
    width = pl.min_horizontal(pl.lit(span_cycles) - b * bin_cycles, pl.lit(bin_cycles)).clip(1)
    members = pl.min_horizontal(pl.lit(tiles) - pl.col("group") * group_tiles, pl.lit(group_tiles))
    cells = (per.group_by("group", "bin").agg(
        pl.col("category").sort_by("cycles", "rank", descending=[True, False]).first(),
        pl.col("cycles").max().alias("top_cycles"))
        .select("group", "bin", "category", (100 * pl.col("top_cycles") / (members * width)).alias("share"))
        .sort("group", "bin"))
    # consecutive bins of one group with one dominant category become one cell (fewer, seamless rects)
    new_run = (pl.col("category") != pl.col("category").shift(1)) | (b != b.shift(1) + 1)
    cells = (cells.with_columns(new_run.fill_null(True).cum_sum().over("group").alias("_run"))
             .group_by("group", "_run", maintain_order=True)
             .agg(pl.col("category").first(), b.min(), (b.max() + 1).alias("bin_end"),
                  pl.col("share").mean().round(1).alias("share_percent"))
             .drop("_run"))
    shares = (per.group_by("bin", "category", "rank").agg(pl.col("cycles").sum())
              .select("bin", "category", "rank", (100 * pl.col("cycles") / (tiles * width)).alias("share"))
              .sort("bin", "rank")
              .with_columns(pl.col("share").cum_sum().over("bin").alias("y1"))   # stacked in CATEGORIES order
              .select("bin", "category", (pl.col("y1") - pl.col("share")).round(2).alias("y0"), pl.col("y1").round(2),
                      pl.col("share").round(2).alias("share_percent")))
    return cells, shares, bin_cycles, group_tiles


def category_scale(values: Iterable[str | None]) -> alt.Scale:
    """The renderer's categories present, in ``CATEGORIES`` order, each in its palette colour."""
    present = {str(v) for v in values if v is not None}
    domain = [c for c in CATEGORIES if c in present] + sorted(present - set(CATEGORIES))
    return alt.Scale(domain=domain, range=[color_of(c) for c in domain])


# -- SRAM --------------------------------------------------------------------------------------------------
def sram_report(case: Case, *, tiles: int = 4) -> Report:
    """The chip heat map (free bytes at each tile's peak), the busiest ``tiles`` tiles (highest peak, ties by
    tile id) with their memory maps and peak breakdowns, from an artifacts case (``toolkit.load``). A stale case
    (``Case.stale``) says so above its facts: what compiled it and what differs from today's toolkit."""
    if isinstance(tiles, bool) or not isinstance(tiles, int) or tiles < 1:
        msg = f"tiles={tiles!r} must be a positive number of busiest tiles to show"
        raise OptionError(msg, field="tiles", value=tiles)
    where = str(case.path)
    missing = [t for t in CASE_TABLES if t not in case.tables]
    if missing:
        msg = f"the case has no table {missing[0]!r} (has {sorted(case.tables)}); was it placed?"
        raise FormatError(msg, file=where, field=missing[0])
    target = case_target(case)
    objects = pl.concat([case.tables[t] for t in ("schedule.objects", "package.objects") if t in case.tables],
                        how="diagonal_relaxed")
    placement, occupancy = case.tables["placement.placement"], case.tables["placement.occupancy"]
    failures = case.tables.get("placement.failures")
    peaks = tile_peaks(occupancy, target).with_columns(headroom_bytes=pl.col("capacity_bytes") - pl.col("peak_bytes"))
    busiest = peaks.filter(pl.col("peak_bytes") > 0).sort(["peak_bytes", "tile"], descending=[True, False])
    top = busiest.head(tiles)
    summary = case.manifest.get("summary", {})
    failed = 0 if failures is None else failures["tile"].n_unique()
    facts = (
        ("case", where), ("provenance", case.provenance_report), ("workload", str(case.manifest.get("workload"))),
        ("source", str(case.manifest.get("source"))), ("target", f"{target.name}, {target.tiles:,} tiles"),
        ("SRAM per tile", f"{target.memory_bytes:,} B"),
        ("busiest tile", "none" if not top.height else
         f"tile {top['tile'][0]}: {top['peak_bytes'][0]:,} B at its peak ({top['percent'][0]:.1f}%)"),
        ("tiles holding objects", f"{busiest.height:,}"), ("tiles with placement failures", f"{failed:,}"),
        ("placed", str(summary.get("placed", "unknown"))),
    )
    sections = [Section(heading="Free bytes at each tile's peak", name="heatmap",
                        chart=occupancy_heatmap(occupancy, target, color="headroom", failures=failures),
                        note="Darker is fuller; a red outline marks a tile with a placement failure."),
                Section(heading=f"The {top.height} busiest tiles", table=top.select(
                    "tile", "row", "column", "peak_bytes", "percent", "headroom_bytes", "peak_event"))]
    for t in top["tile"].to_list():   # the few tiles shown, not every tile
        sections.append(Section(heading=f"Tile {t}: memory map", name=f"tile{t}-map",
                                chart=memory_map(objects, placement, target, t, occupancy=occupancy)))
        breakdown = peak_breakdown(objects, placement, occupancy, target, t)
        breakdown.hconcat = [c.properties(width=250) for c in breakdown.hconcat]
        sections.append(Section(heading=f"Tile {t}: live at its peak", name=f"tile{t}-peak", chart=breakdown))
    return Report(title=f"SRAM {case.path.name}", facts=facts, sections=tuple(sections), banner=case.staleness.label)


def case_target(case: Case) -> Target:
    """The target a case was compiled for, from its manifest (``ipu21`` with the recorded fields)."""
    try:   # load_case checked that the manifest's target is a table
        return ipu21().replace(**case.manifest.get("target", {}))
    except OptionError as exc:
        raise FormatError(f"manifest.json: target: {exc}", file=str(case.path), field=f"target.{exc.field}",
                          value=exc.value) from None


# -- writing -------------------------------------------------------------------------------------------------
def image_paths(path: str | Path, names: Iterable[str], formats: Iterable[str]) -> dict[Path, tuple[str, str]]:
    """The image beside ``path`` of every chart and format: ``<stem>.<chart>.<format>`` -> (chart, format)."""
    p = Path(path)
    stem = p.name.removesuffix(p.suffix) if p.suffix else p.name
    out: dict[Path, tuple[str, str]] = {}
    for fmt in formats:
        if fmt not in IMAGE_FORMATS:
            msg = f"image format {fmt!r} is not one of {list(IMAGE_FORMATS)}"
            raise OptionError(msg, field="images", value=fmt)
        out.update({p.with_name(f"{stem}.{n}.{fmt}"): (n, fmt) for n in names})
    return out


def write_report(report: Report, path: str | Path, *, images: Iterable[str] = ()) -> list[Path]:
    """Write ``report.html()`` to ``path`` and, per format in ``images`` (svg, png), every chart beside it.

    Every output is rendered in memory first and each file is written through a temporary sibling, so a
    failure leaves no half-written file. Returns the paths written, the HTML first.
    """
    import vl_convert as vlc

    check_output(path, "output")
    targets = image_paths(path, report.charts, tuple(images))
    for p in targets:
        check_parent(p, "output")
    specs = report.specs()
    page = report.html(specs).encode()
    version = _vl_version()
    rendered = {p: (vlc.vegalite_to_svg(specs[n], vl_version=version).encode() if fmt == "svg"
                    else vlc.vegalite_to_png(specs[n], vl_version=version, scale=2))
                for p, (n, fmt) in targets.items()}
    written = [atomic_write(path, lambda tmp: tmp.write_bytes(page))]
    for p, data in rendered.items():
        written.append(atomic_write(p, lambda tmp, data=data: tmp.write_bytes(data)))
    return written


def _vl_version() -> str:
    return "_".join(alt.SCHEMA_VERSION.split(".")[:2])


@functools.cache
def _bundle() -> str:
    """Vega-Embed, Vega-Lite and Vega as one script (vl-convert bundles them; no CDN)."""
    import vl_convert as vlc
    return vlc.javascript_bundle(vl_version=_vl_version()).replace("</script", "<\\/script")


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: sans-serif; max-width: {width}px; margin: 1em auto; color: #222; }}
h1 {{ font-size: 1.4em; }} h2 {{ font-size: 1.1em; margin-top: 1.6em; }} .note {{ color: #555; font-size: 0.9em; }}
table {{ border-collapse: collapse; font-size: 0.85em; margin: 0.4em 0; }} .facts th {{ width: 12em; }}
th, td {{ padding: 2px 8px; border-bottom: 1px solid #ddd; text-align: left; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
.stale {{ background: #fff3cd; border: 1px solid #d9a400; padding: 0.4em 0.6em; }}
.chart {{ max-width: {width}px; overflow-x: auto; }} .chart svg .mark-rect path {{ shape-rendering: crispEdges; }}
</style>
<script>
{bundle}
</script>
</head><body>
<h1>{title}</h1>
{banner}
<table class="facts">{facts}</table>
{body}
<script>
const specs = {specs};
for (const [name, spec] of Object.entries(specs)) {{
  vegaEmbed("#chart-" + name, spec, {{renderer: "svg", actions: false}}).catch(console.error);
}}
</script>
</body></html>
"""


__all__ = ["IMAGE_FORMATS", "Report", "Section", "bin_timeline", "case_target", "category_scale", "image_paths",
           "profile_report", "sram_report", "timeline_sections", "write_report"]
