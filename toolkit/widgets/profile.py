"""``ProfileExplorer``: a tile range, the crop / shared-clock toggle and a colouring over one profile's
per-tile timeline, with cycles per phase (or kernel, operation, tile) beside it."""

from __future__ import annotations

import ipywidgets as w
import polars as pl

from toolkit.errors import OptionError, ToolkitError
from toolkit.profile import Crop, Profile, crop, query, timeline_categories
from toolkit.viz.profile import COLOR_BY, phase_bars, timeline
from toolkit.widgets.render import busy, chart_widget

GROUPS = ("phase", "kernel", "operation", "kind", "tile")


class ProfileExplorer:
    """Per-tile timeline of ``profile`` for a range of tiles (``tiles`` wide to start with).

    The crop toggle switches between the hardware renderer's cropped view and
    the shared clock; the chart is replaced in place on every change.
    """

    def __init__(self, profile: Profile, *, tiles: int = 16, color: str = "kind", by: str = "phase") -> None:
        if not isinstance(profile, Profile):
            msg = f"profile must be a toolkit.profile.Profile, got {type(profile).__name__}"
            raise OptionError(msg, field="profile", value=type(profile).__name__)
        if profile.samples.height == 0:
            msg = "profile has no samples; there is nothing to draw"
            raise OptionError(msg, field="profile", value=0)
        if color not in COLOR_BY:
            msg = f"color={color!r} is not a sample column to colour by; use one of {list(COLOR_BY)}"
            raise OptionError(msg, field="color", value=color)
        if by not in GROUPS:
            msg = f"by={by!r} is not a profile grouping; use one of {list(GROUPS)}"
            raise OptionError(msg, field="by", value=by)
        if isinstance(tiles, bool) or not isinstance(tiles, int) or tiles < 1:
            msg = f"tiles={tiles!r} must be a positive number of tiles to show"
            raise OptionError(msg, field="tiles", value=tiles)
        self.profile = profile
        self._crops: dict[bool, Crop] = {}
        self._categories: dict[bool, pl.DataFrame] = {}
        ids = profile.samples["tile"].unique().sort()
        lo, hi = int(ids[0]), int(ids[-1])
        self.tiles = w.IntRangeSlider(value=(lo, min(hi, lo + tiles - 1)), min=lo, max=hi, description="tiles",
                                      continuous_update=False)
        self.shared_clock = w.Checkbox(value=False, description="shared clock (no crop)")
        self.color = w.Dropdown(options=list(COLOR_BY), value=color, description="colour by")
        self.by = w.Dropdown(options=list(GROUPS), value=by, description="cycles by")
        self.status = w.HTML()
        self.timeline_chart = chart_widget(None)
        self.bars_chart = chart_widget(None)
        for control in (self.tiles, self.shared_clock, self.color, self.by):
            control.observe(lambda _: self.update(), names="value")
        self.widget = w.VBox([w.HBox([self.tiles, self.shared_clock]), w.HBox([self.color, self.by]), self.status,
                              self.timeline_chart, self.bars_chart])
        self.update()

    @property
    def crop(self) -> Crop:
        """The profile cropped as the toggle says (cached per setting)."""
        return self._crop(bool(self.shared_clock.value))

    def _crop(self, shared: bool) -> Crop:
        if shared not in self._crops:
            self._crops[shared] = crop(self.profile, shared_clock=shared)
        return self._crops[shared]

    def _views(self) -> str:
        """Why the two views give the numbers they give: they differ by the tiles' spread at the initial sync."""
        cropped, shared = self._crop(False), self._crop(True)
        skew = shared.cropped_cycles - cropped.cropped_cycles
        if skew == 0:
            return ("cropped and shared clock agree: every tile enters the initial sync at the same cycle (as in "
                    "every simulated profile; a hardware capture's tiles enter it apart, and the crop drops that)")
        return (f"the shared clock adds {skew:,} cycles: tiles enter the initial sync up to {skew:,} cycles apart, "
                f"which the crop drops")

    def categories(self, shared: bool) -> pl.DataFrame:
        """The renderer's timeline categories on the toggle's clock (cached per setting; idle gaps included)."""
        if shared not in self._categories:
            self._categories[shared] = timeline_categories(self.profile, shared_clock=shared)
        return self._categories[shared]

    def bars(self) -> pl.DataFrame:
        """The cycles-per-group frame the bars draw: :func:`query` over the tiles the slider selects (the wall
        clock, for ``wall_share``, is the whole profile's)."""
        c = self.crop
        lo, hi = self.tiles.value
        shown = c.samples.filter(pl.col("tile").is_between(lo, hi))
        return query(Crop(origin_cycle=c.origin_cycle, cropped_cycles=c.cropped_cycles, shared_clock=c.shared_clock,
                          clock_hz=c.clock_hz, tiles=hi - lo + 1, samples=shown), by=self.by.value)

    def update(self) -> None:
        """Redraw the timeline and the cycles-per-group bars in place."""
        self.status.value = busy("drawing")
        c = self.crop
        lo, hi = self.tiles.value
        clock = "shared clock" if c.shared_clock else "cropped"
        try:
            frame = self.categories(c.shared_clock) if self.color.value == "category" else c
            self.timeline_chart.chart = timeline(frame, tiles=range(lo, hi + 1), color=self.color.value).properties(
                width=720, title=f"tiles {lo}..{hi}, {clock}")
            self.bars_chart.chart = phase_bars(self.bars(), scope=f"tiles {lo}..{hi}, {clock}")
        except ToolkitError as err:
            self.status.value = (f"<span style='color:firebrick'>{err}</span><br><small>the charts below still show "
                                 "the last setting that drew</small>")
            return
        self.status.value = (f"{c.tiles} tiles; {'shared clock' if c.shared_clock else 'cropped'}: "
                             f"{c.cropped_cycles:,} cycles = {c.cropped_seconds * 1e6:,.1f} us at "
                             f"{c.clock_hz / 1e9:g} GHz ({self.profile.source} profile); timeline and bars: "
                             f"tiles {lo}..{hi}"
                             f"<br><small>{self._views()}</small>")

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
