"""``sweep``: every point of a grid, each written the moment it finishes, the done ones skipped on a rerun."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import OptionError
from toolkit.sweep.engines import check_scheduler, connect, dask_rows, dask_slots, inline_rows, pool_rows
from toolkit.sweep.points import sweep_points
from toolkit.sweep.rows import to_frame
from toolkit.sweep.store import check_out, finished_ids, load_sweep, refuse_damaged, write_row
from toolkit.target import Target, ipu21

#: the most local worker processes one sweep starts (README: Limits)
MAX_WORKERS = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepProgress:
    """Where a sweep is: ``skipped`` points were already in the dataset, ``done`` finished in this run (of
    them ``failed`` with an error or a crash), ``running`` are on workers now."""

    total: int
    skipped: int
    done: int
    failed: int
    running: int
    elapsed_seconds: float

    @property
    def remaining(self) -> int:
        return self.total - self.skipped - self.done

    @property
    def points_per_minute(self) -> float:
        return 60.0 * self.done / self.elapsed_seconds if self.elapsed_seconds > 0 else 0.0


class SweepInterrupted(KeyboardInterrupt):
    """The sweep was interrupted (SIGINT); every finished point is in the dataset, the rest can be rerun."""

    def __init__(self, msg: str, *, done: int, remaining: int, out: str | None) -> None:
        super().__init__(msg)
        self.done, self.remaining, self.out = done, remaining, out


def sweep(workloads: Sequence[str], grid: Mapping[str, Sequence[Any]] | None = None, *,
          scheduler: Any = None, workers: int = 2, out: str | Path | None = None, target: Target | None = None,
          progress: Callable[[SweepProgress], None] | None = None) -> pl.DataFrame:
    """Compile every workload at every grid point and return this sweep's points (SWEEP_SCHEMA), in grid order.

    ``grid`` maps option names (and the workload parameters ``batch`` and ``blocks``) to lists of values.
    With ``out`` every finished point is written at once as its own file there, and points already in the
    dataset are not run again (a rerun finishes a killed sweep); other points in ``out`` are kept
    (:func:`load_sweep` reads them all). ``workers`` local processes (1: this process), or ``scheduler``
    (a Dask address or a ``distributed.Client``). ``progress`` is called after every change. Everything
    about the request is checked before the first point runs. On SIGINT the workers are stopped and
    :class:`SweepInterrupted` says how many points finished and how many remain.
    """
    target = target or ipu21()
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        msg = f"workers={workers!r} must be a number of local processes from 1 to {MAX_WORKERS}"
        raise OptionError(msg, field="workers", value=workers)
    if scheduler is not None:
        scheduler = check_scheduler(scheduler)   # a malformed address fails before the dataset folder is made
    points = sweep_points(workloads, grid, target)
    out_dir = check_out(out) if out is not None else None
    if out_dir is not None:
        refuse_damaged(out_dir, {p.id for p in points})
    skip = finished_ids(out_dir, {p.id for p in points}) if out_dir is not None else set()
    todo = [p for p in points if p.id not in skip]
    client, owned = connect(scheduler) if scheduler is not None else (None, False)
    slots = dask_slots(client) if client is not None else max(workers, 1)
    start, rows, failed = time.perf_counter(), {}, 0

    def notify() -> None:
        if progress is not None:
            progress(SweepProgress(total=len(points), skipped=len(skip), done=len(rows), failed=failed,
                                   running=min(slots, len(todo) - len(rows)),
                                   elapsed_seconds=time.perf_counter() - start))

    engine = (dask_rows(todo, target, client) if client is not None else
              inline_rows(todo, target) if workers <= 1 or len(todo) <= 1 else pool_rows(todo, target, workers))
    try:
        with closing(engine):
            notify()
            for row in engine:
                if out_dir is not None:
                    write_row(out_dir, row)
                rows[row["point_id"]] = row
                failed += row["status"] != "ok"
                notify()
    except KeyboardInterrupt:
        remaining = len(todo) - len(rows)
        where = f" in {out_dir}; rerun the same sweep to finish it" if out_dir is not None else ""
        msg = f"sweep interrupted: {len(skip) + len(rows)} of {len(points)} points done{where}, {remaining} remain"
        raise SweepInterrupted(msg, done=len(skip) + len(rows), remaining=remaining,
                               out=str(out_dir) if out_dir else None) from None
    finally:
        if owned:
            client.close()
    order = pl.DataFrame({"point_id": [p.id for p in points]}).with_row_index("_order")
    got = load_sweep(out_dir, ids={p.id for p in points}) if out_dir is not None else to_frame(list(rows.values()))
    return got.join(order, on="point_id").sort("_order").drop("_order")
