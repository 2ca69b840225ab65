"""Stage ``layout``: the first-class Layout type, op plans, the cost model and the search."""

from toolkit.layout.layout import Layout, route
from toolkit.layout.plans import LayoutParams, OpPlan, plan_graph
from toolkit.layout.search import CANDIDATES_SCHEMA, LayoutResult, search_layouts

__all__ = ["CANDIDATES_SCHEMA", "Layout", "LayoutParams", "LayoutResult", "OpPlan", "plan_graph", "route",
           "search_layouts"]
