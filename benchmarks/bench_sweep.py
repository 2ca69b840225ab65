"""Sweep throughput: a 48-point grid on mlp-single-b1, in this process, on 1 and 2 local workers, on a 2-worker
Dask LocalCluster, and the rerun of a finished sweep; beside a plain ``compile`` loop over the same points.

Run: ``python -m benchmarks.bench_sweep [--points 48]``. Writes the "sweep" section of benchmarks/RESULTS.md.
Every run writes its points to a fresh dataset directory (one Parquet file per point, written as it finishes),
so the figures include the durability the sweep promises. Simulation is on (the rows carry cropped cycles).
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

import toolkit
from benchmarks._results import write_section
from toolkit.sweep import sweep, sweep_points

WORKLOAD = "mlp-single-b1"
GRID = {"row_block": [12, 16, 18, 24, 36, 48], "weight_class": ["interleaved", "standard"],
        "inner_split": [1, 2], "partials": ["f16", "f32"]}   # 6 x 2 x 2 x 2 = 48 points


def _grid(points: int) -> dict[str, list]:
    """The first ``points`` row blocks' worth of GRID (48: all of it)."""
    per_row_block = 8
    return {**GRID, "row_block": GRID["row_block"][:max(points // per_row_block, 1)]}


def _plain_loop(grid: dict[str, list]) -> float:
    start = time.perf_counter()
    for p in sweep_points([WORKLOAD], grid, toolkit.ipu21()):
        with contextlib.suppress(toolkit.ToolkitError):   # a failed point costs its compile in both
            toolkit.compile(WORKLOAD, options=p.options)
    return time.perf_counter() - start


def _timed_sweep(grid: dict[str, list], out: Path, **engine) -> tuple[float, int, int]:
    start = time.perf_counter()
    df = sweep([WORKLOAD], grid, out=out, **engine)
    return time.perf_counter() - start, df.height, int((df["status"] != "ok").sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--points", type=int, default=48)
    args = ap.parse_args()
    grid = _grid(args.points)
    toolkit.compile(WORKLOAD, options={"row_block": 18})   # numba and imports warm in this process
    results: list[tuple[str, float, int, int]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        plain = _plain_loop(grid)
        n = len(sweep_points([WORKLOAD], grid, toolkit.ipu21()))
        results.append(("plain `compile` loop, this process (no dataset)", plain, n, 0))
        results.append(("sweep, 1 worker (this process)", *_timed_sweep(grid, root / "w1", workers=1)))
        results.append(("sweep, 2 local workers", *_timed_sweep(grid, root / "w2", workers=2)))
        from distributed import Client, LocalCluster
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            client.run(toolkit.compile, WORKLOAD, options={"row_block": 18})   # warm both workers
            results.append(("sweep, 2-worker Dask LocalCluster", *_timed_sweep(grid, root / "dask",
                                                                                scheduler=client)))
        rerun, height, _ = _timed_sweep(grid, root / "w2", workers=2)
    lines = ["| run | points | failed | seconds | points per minute | seconds per point |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, seconds, points, failed in results:
        lines.append(f"| {name} | {points} | {failed} | {seconds:.1f} | {60 * points / seconds:.0f} | "
                     f"{seconds / points:.2f} |")
    w1 = results[1][1]
    body = (f"{n}-point grid on `{WORKLOAD}` (simulate on): {', '.join(f'{k} {v}' for k, v in grid.items())}.\n\n"
            + "\n".join(lines)
            + f"\n\nOverhead of the sweep per point against the plain loop in the same process (1 worker): "
              f"{(w1 - plain) / n * 1000:+.0f} ms (writing each point's Parquet file, the row's cropped cycles "
              f"and RSS). The 2-worker figures include starting the workers (spawn, import) and share a "
              f"2-core machine with the sweep's own process.\n\n"
              f"Rerun of the finished 2-worker sweep (all {height} points already on disk, nothing runs): "
              f"{rerun:.2f} s.\n")
    print(body)
    write_section("sweep", body)


if __name__ == "__main__":
    main()
