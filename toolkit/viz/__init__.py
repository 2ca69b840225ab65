"""Frame -> altair chart functions (charts are data; tests read ``chart.to_dict()``)."""

from toolkit.viz.layout import pareto, tradeoff  # noqa: F401
from toolkit.viz.memory import memory_map, occupancy_heatmap, occupancy_over_time, peak_breakdown, tile_peaks  # noqa: F401
from toolkit.viz.profile import barrier_chart, compare_chart, phase_bars, residual_chart, timeline  # noqa: F401
