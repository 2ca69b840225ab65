"""``toolkit sweep``: the grid from ``-g`` flags and a grid file, a live progress bar, a clean stop on a signal.

SIGINT and SIGTERM stop the sweep the same way: the workers are ended, every
finished point is already in ``--out``, and the command says how many remain
(exit 130). SIGKILL cannot be caught; the workers notice their parent is gone
and exit (:mod:`toolkit.sweep.engines`).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from toolkit.cli.graph import fail, show
from toolkit.cli.table import legend
from toolkit.errors import OptionError, ToolkitError
from toolkit.sweep import SweepInterrupted, SweepProgress, merge_grids, read_grid_file, sweep
from toolkit.tables import SUMMARY_MEANINGS

SHOWN = ("workload", "batch", "blocks", "lowered_cycles", "cropped_cycles", "peak_sram_bytes", "placed",
         "compile_seconds", "error")
#: what each number of the table is, its unit and its scope, printed under the table (the summary's columns:
#: toolkit.tables.SUMMARY_MEANINGS; the sweep's own: toolkit.sweep.rows)
MEANING = {
    **SUMMARY_MEANINGS,
    "cropped_cycles": "simulated, cycles (the simulated profile cropped as the hardware renderer crops it; "
                      "empty: simulate off)",
    "compile_seconds": "wall-clock seconds to compile the point (the first point also pays the imports)",
}


def grid_from_flags(flags: list[str]) -> dict[str, list[object]]:
    """``-g key=v1,v2`` flags as a grid; a key given twice is refused by name."""
    from toolkit.cli.compile import parse_option
    axes: dict[str, list[object]] = {}
    for g in flags:
        key, value = parse_option(g)
        if key in axes:
            msg = f"grid key {key!r} is given twice (-g {key}=...); give every value once: -g {key}=v1,v2"
            raise OptionError(msg, field=key, value=g)
        axes[key] = list(value) if isinstance(value, tuple) else [value]
    return axes


def run_sweep_cmd(workloads: list[str], grid: list[str], grid_file: Path | None, out: Path | None,
                  scheduler: str | None, workers: int, as_json: bool, quiet: bool) -> None:
    try:
        axes = grid_from_flags(grid)
        if grid_file is not None:
            file_workloads, file_grid = read_grid_file(grid_file)
            workloads = [*workloads, *file_workloads]
            axes = merge_grids(axes, file_grid)
        with _signals_stop(), _progress(quiet) as update:
            rows = sweep(workloads, axes, scheduler=scheduler, workers=workers, out=out, progress=update)
    except SweepInterrupted as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(130) from None
    except ToolkitError as exc:
        fail(exc)
    if quiet:
        return
    if as_json:
        typer.echo(rows.write_json())
        return
    grid_cols = [f"opt_{k}" for k in axes if f"opt_{k}" in rows.columns]
    cols = list(dict.fromkeys([*SHOWN[:3], *grid_cols, *SHOWN[3:]]))
    show(rows.select(cols).with_columns(pl.col("compile_seconds").round(2)), "sweep")
    for line in legend(MEANING, cols):
        typer.echo(line)
    if out is not None:
        typer.echo(f"{rows.height} points in {out} (toolkit.load_sweep({str(out)!r}) reads every point there)",
                   err=True)


@contextmanager
def _signals_stop() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt like SIGINT while the sweep runs (the old handler comes back after)."""
    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextmanager
def _progress(quiet: bool) -> Iterator[object]:
    """A progress callback drawing points done / running / failed, points per minute and the ETA on stderr."""
    if quiet:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("running {task.fields[running]}  failed {task.fields[failed]}  "
                          "{task.fields[rate]:.1f} points/min"), TimeRemainingColumn())
    bar = Progress(*columns, console=Console(stderr=True))   # drawn from the first update: a bad grid shows none
    task = bar.add_task("sweep", total=None, running=0, failed=0, rate=0.0)

    def update(p: SweepProgress) -> None:
        if not bar.live.is_started:
            bar.start()
        skipped = f" ({p.skipped} already done)" if p.skipped else ""
        bar.update(task, description=f"sweep{skipped}", completed=p.done, total=p.total - p.skipped,
                   running=p.running, failed=p.failed, rate=p.points_per_minute)

    try:
        yield update
    finally:
        bar.stop()
