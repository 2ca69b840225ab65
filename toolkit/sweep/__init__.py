"""Sweeps: a grid of options over workloads, durable point by point, run locally or on a Dask cluster.

``sweep(["mlp-single-b1"], {"row_block": [18, 36]}, out="sweeps/rb")``
compiles every (workload, grid point) and returns one row per point
(``SWEEP_SCHEMA``: the workload and its parameters, every option as a typed
column, the summary's numbers under its names (lowered cycles and launches,
exchange steps, the placed and the screen's peak SRAM), simulated cropped
cycles, placement and its first failure, compile seconds, peak RSS, and the
error of a failed point). Each finished point is written at once to ``out`` as
its own Parquet file named by the point's stable id (:mod:`.points`), so a
killed sweep keeps what finished, a rerun runs only the rest, and another grid
into the same directory adds its points beside the old ones.
``load_sweep(out)`` reads the whole dataset back.

Modules: :mod:`.points` (grids, grid files, point ids), :mod:`.rows` (the
schema and the worker function), :mod:`.store` (the dataset directory),
:mod:`.engines` (in-process, local processes that never outlive the sweep,
Dask), :mod:`.run` (``sweep``).
"""

from toolkit.sweep.points import Point, grid_points, merge_grids, read_grid_file, sweep_points
from toolkit.sweep.rows import SWEEP_SCHEMA, run_point
from toolkit.sweep.run import SweepInterrupted, SweepProgress, sweep
from toolkit.sweep.store import load_sweep

__all__ = [
    "SWEEP_SCHEMA",
    "Point",
    "SweepInterrupted",
    "SweepProgress",
    "grid_points",
    "load_sweep",
    "merge_grids",
    "read_grid_file",
    "run_point",
    "sweep",
    "sweep_points",
]
