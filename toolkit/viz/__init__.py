"""Frame -> altair chart functions (charts are data; tests read ``chart.to_dict()``)."""

from toolkit.viz.compare import delta_chart, peak_delta_heatmap  # noqa: F401
from toolkit.viz.layout import pareto, tradeoff  # noqa: F401
from toolkit.viz.memory import (  # noqa: F401
    heatmaps_side_by_side,
    memory_map,
    occupancy_heatmap,
    peak_breakdown,
    tile_peaks,
    weight_memory,
)
from toolkit.viz.occupancy import occupancy_over_time  # noqa: F401
from toolkit.viz.profile import barrier_chart, compare_chart, phase_bars, residual_chart, timeline  # noqa: F401
from toolkit.viz.sweeps import sweep_pareto  # noqa: F401
