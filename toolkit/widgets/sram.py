"""``SramExplorer``: pick a tile (slider, busiest-tiles list, or a click on the chip heat map) and see
its memory map with lifetimes, what is live at its peak, and its live bytes over time; with an ipu-stack
memory profile of the same program (:func:`toolkit.profile.read_memory_profile`), its chip map beside ours
and its estimate for the tile beside our placed bytes."""

from __future__ import annotations

from typing import Any

import ipywidgets as w
import polars as pl

from toolkit.errors import OptionError
from toolkit.pipeline import Compilation
from toolkit.profile.memory_profile import MemoryProfile
from toolkit.viz.memory import (
    MAP_COLORS,
    event_count,
    heatmaps_side_by_side,
    memory_map,
    occupancy_heatmap,
    peak_breakdown,
    tile_peaks,
)
from toolkit.viz.occupancy import occupancy_over_time
from toolkit.widgets.render import busy, chart_widget

BUSIEST = 12


class SramExplorer:
    """Chip heat map, then one tile's memory map and peak breakdown, for one :class:`Compilation`.

    ``tile`` defaults to the tile with the highest peak. Clicking a heat-map cell
    (selection ``picked_tile``) moves the tile slider. ``memory_profile`` (a
    :class:`toolkit.profile.MemoryProfile` of the same program on the same tiles) adds its chip map beside
    ours on one colour scale, and the selected tile's estimate by class per step beside our placement.
    """

    def __init__(self, compilation: Compilation, *, tile: int | None = None, color: str = "kind",
                 by: str = "kind", memory_profile: MemoryProfile | None = None) -> None:
        if color not in MAP_COLORS:
            msg = f"color={color!r} is not a memory-map colouring; use one of {list(MAP_COLORS)}"
            raise OptionError(msg, field="color", value=color)
        self.compilation = compilation
        self.memory_profile = memory_profile
        if memory_profile is not None and memory_profile.tile_count != compilation.target.tiles:
            msg = (f"memory_profile covers {memory_profile.tile_count} tiles, the compilation "
                   f"{compilation.target.tiles}: pass a profile of the same program on the same target")
            raise OptionError(msg, field="memory_profile", value=memory_profile.tile_count)
        self._objects: pl.DataFrame | None = None
        self.target = compilation.target
        self.by = by
        occ = compilation.placement.occupancy
        self.peaks = tile_peaks(occ, self.target).sort("peak_bytes", "tile", descending=[True, False])
        busiest = self.peaks.head(BUSIEST)
        start = int(busiest["tile"][0]) if tile is None else tile
        if isinstance(start, bool) or not isinstance(start, int) or not 0 <= start < self.target.tiles:
            msg = f"tile={tile!r} is not a tile of {self.target.name} (0..{self.target.tiles - 1})"
            raise OptionError(msg, field="tile", value=tile, tile=tile if isinstance(tile, int) else None)
        self.tile = w.IntSlider(value=start, min=0, max=self.target.tiles - 1, description="tile",
                                continuous_update=False)
        self.busiest = w.Dropdown(
            options=[("busiest tiles ...", -1),
                     *((f"tile {t}: {b:,} B ({p:.1f}%)", t)
                       for t, b, p in busiest.select("tile", "peak_bytes", "percent").iter_rows())],
            value=-1, description="pick")
        self.color = w.Dropdown(options=list(MAP_COLORS), value=color, description="colour by")
        self.status = w.HTML()
        # free bytes at each tile's peak, over the tiles' own range: near-equal tiles stay apart (a 0..100 %
        # capacity scale paints a lightly used chip one flat colour)
        self.heatmap = chart_widget(occupancy_heatmap(occ, self.target, color="headroom",
                                                      failures=compilation.placement.failures))
        self.heatmap.selections.observe(self._clicked, names="picked_tile")
        self.map_chart = chart_widget(None)
        self.breakdown_chart = chart_widget(None)
        self.over_time_chart = chart_widget(None)
        self.compare_chart = chart_widget(None if memory_profile is None else heatmaps_side_by_side(
            {"toolkit placement (placed addresses)": occ, memory_profile.label: memory_profile.occupancy},
            self.target))
        self.profile_chart = chart_widget(None)
        self.tile.observe(self._moved, names="value")
        self.color.observe(lambda _: self.update(), names="value")
        self.busiest.observe(self._picked, names="value")
        self.widget = w.VBox([self.heatmap, w.HBox([self.tile, self.busiest, self.color]), self.status,
                              self.map_chart, self.breakdown_chart, self.over_time_chart,
                              *([] if memory_profile is None else [self.compare_chart, self.profile_chart])])
        self.update()

    def update(self) -> None:
        """Redraw the memory map and the peak breakdown of the selected tile in place."""
        self.status.value = busy("drawing")
        objects, placement, occ = self._frames()
        tile = int(self.tile.value)
        events = event_count(objects, occ)   # one event axis under the map and the line chart
        self.map_chart.chart = memory_map(objects, placement, self.target, tile, color=self.color.value,
                                          occupancy=occ, events=events)
        row = self.peaks.filter(pl.col("tile") == tile).row(0, named=True)
        if row["peak_event"] is None:
            self.breakdown_chart.chart = None
            self.over_time_chart.chart = None
            self.status.value = f"tile {tile} holds no objects: nothing is live on it"
            return
        self.breakdown_chart.chart = peak_breakdown(objects, placement, occ, self.target, tile, by=self.by)
        self.over_time_chart.chart = occupancy_over_time(occ, [tile], target=self.target, events=events).properties(
            title=f"tile {tile}: live bytes per event")
        span = ("" if row["largest_free_at_peak_bytes"] is None else
                f"; largest free span {row['largest_free_at_peak_bytes']:,} B at the peak, "
                f"{row['min_largest_free_bytes']:,} B at its most fragmented event")
        self.status.value = (f"tile {tile}: placed peak {row['peak_bytes']:,} B ({row['percent']:.1f}% of "
                             f"{row['capacity_bytes']:,} B) at event {row['peak_event']}{span}"
                             f"{self._profile_line(tile)}")

    def _profile_line(self, tile: int) -> str:
        """The memory profile's estimate for ``tile`` (and its chart), or nothing without a profile."""
        mp = self.memory_profile
        if mp is None:
            return ""
        occ = mp.occupancy.filter(pl.col("tile") == tile)
        if occ.height == 0 or int(occ["live_bytes"].max() or 0) == 0:
            self.profile_chart.chart = None
            return f"<br>{mp.label}: nothing on tile {tile}"
        top = occ.sort(["live_bytes", "event"], descending=[True, False]).row(0, named=True)
        self.profile_chart.chart = occupancy_over_time(
            mp.occupancy, [tile], target=self.target, values=["standard_bytes", "interleaved_bytes"],
        ).properties(title=f"tile {tile} in the {mp.label}: bytes per step by class")
        return (f"<br>{mp.label}: peak {top['live_bytes']:,} B at step {top['event']} "
                f"(estimate before address placement)")

    def _frames(self) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        """Every placed object (the program's and the package's code and tables), their placement, occupancy."""
        c = self.compilation
        if self._objects is None:
            self._objects = pl.concat([c.schedule.objects, c.package.objects], how="vertical_relaxed")
        return self._objects, c.placement.placement, c.placement.occupancy

    def _moved(self, _: dict) -> None:
        # the busiest-tiles list follows the tile, whichever control moved it (it showed a stale pick)
        listed = {value for _, value in self.busiest.options}
        self.busiest.value = self.tile.value if self.tile.value in listed else -1
        self.update()

    def _picked(self, change: dict) -> None:
        if change["new"] >= 0:
            self.tile.value = int(change["new"])

    def _clicked(self, change: dict) -> None:
        picked: Any = change["new"]
        values = getattr(picked, "value", None) or []
        if values and "tile" in values[0]:
            self.tile.value = int(values[0]["tile"])

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
