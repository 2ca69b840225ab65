"""ipywidgets explorers over the pipeline and the profile, drawn with :mod:`toolkit.viz`.

Call :func:`setup` once in a notebook (offline vega, VegaFusion), then display
an explorer. Each explorer owns its controls as attributes (so tests and
notebooks can set them) and one ``alt.JupyterChart`` per chart, updated in place.
"""

from toolkit.widgets.layout import LayoutExplorer, compare_layouts, pin_label
from toolkit.widgets.profile import ProfileExplorer
from toolkit.widgets.render import chart_widget, setup
from toolkit.widgets.sram import SramExplorer

__all__ = ["LayoutExplorer", "ProfileExplorer", "SramExplorer", "chart_widget", "compare_layouts", "pin_label",
           "setup"]
