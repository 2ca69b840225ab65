"""How explorers draw: one ``alt.JupyterChart`` per chart, updated in place, with vega bundled offline.

Explorers never redraw through ``with output: display(...)`` (that stalls
headless notebook runs, nbclient #312): each chart is one
:class:`altair.JupyterChart` whose ``chart`` trait is replaced, and the
front end re-renders it. :func:`setup` is the one call a notebook makes first.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from toolkit.errors import OptionError
from toolkit.viz import text

#: rows VegaFusion may hand to the browser after it has run a chart's transforms
DEFAULT_MAX_ROWS = 100_000


def setup(*, vegafusion: bool = True, max_rows: int = DEFAULT_MAX_ROWS) -> None:
    """Render altair charts through JupyterChart with vega loaded offline (no CDN), and, with
    ``vegafusion``, run chart transforms in the kernel with at most ``max_rows`` rows sent on.

    After this call ``chart.to_dict()`` needs ``format="vega"`` (a VegaFusion rule); tests that
    read Vega-Lite specs leave VegaFusion off.
    """
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows <= 0:
        msg = f"max_rows={max_rows!r} must be a positive number of rows"
        raise OptionError(msg, field="max_rows", value=max_rows)
    alt.renderers.enable("jupyter", offline=True)
    if vegafusion:
        alt.data_transformers.enable("vegafusion", max_rows=max_rows)
    else:
        alt.data_transformers.enable("default")


#: compiled charts a widget keeps, so a control moved back to a value seen before redraws without a compile
COMPILED_CHARTS = 16


class ChartWidget(alt.JupyterChart):
    """A JupyterChart that compiles each chart object once.

    With VegaFusion, assigning a chart validates its Vega-Lite spec and compiles
    it into a chart state (about 0.2 s for a layout chart); assigning the same
    chart object again (an explorer's cached view) reuses that state and its
    transformed spec. Charts are immutable once built, so the object is the key.
    """

    def __init__(self, *args, **kwargs) -> None:
        self._states: dict[tuple[int, str], tuple] = {}
        super().__init__(*args, **kwargs)

    def _init_with_vegafusion(self, local_tz: str) -> None:
        key = (id(self.chart), local_tz)
        hit = self._states.get(key)
        if hit is not None and hit[0] is self.chart:
            with self.hold_sync():
                _, self._chart_state, self._js_watch_plan, self.spec = hit
            return
        super()._init_with_vegafusion(local_tz)
        if self.chart is not None:
            self._states[key] = (self.chart, self._chart_state, self._js_watch_plan, self.spec)
            while len(self._states) > COMPILED_CHARTS:
                self._states.pop(next(iter(self._states)))


def chart_widget(chart: alt.TopLevelMixin | None) -> alt.JupyterChart:
    """A chart widget (offline) showing ``chart``; replace ``widget.chart`` to update it in place.

    Drawn as SVG, so titles and labels are text a browser test (or a reader's search) can find.
    """
    alt.JupyterChart.enable_offline()
    return ChartWidget(chart, embed_options={"renderer": "svg"})  # type: ignore[arg-type]  # None is allowed


#: the class of an explorer's busy line: set at once when a control moves, replaced when the charts are drawn
BUSY_CLASS = "toolkit-busy"


def busy(what: str) -> str:
    """An explorer's status while it works (``what``: "compiling row_block=36"), marked for the browser test."""
    return f"<span class='{BUSY_CLASS}' style='color:gray'>&#8987; {what} ...</span>"


def html_table(df: pl.DataFrame, *, title: str = "") -> str:
    """A small frame as a compact HTML table (:func:`toolkit.viz.text.html_table`), with an optional bold title."""
    return text.html_table(df, max(df.height, 1), title=title)
