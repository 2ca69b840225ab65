"""Where points run: in the sweep's own process, in local worker processes, or on a Dask cluster.

Each engine is a generator of finished rows (in finishing order); the caller
writes each row as it arrives and closes the generator to stop early, which
ends the engine's work (local workers exit, Dask futures are cancelled).

Local workers are ``spawn``-started processes that cannot outlive the sweep:
each runs a watchdog thread that polls ``os.getppid()`` (every 0.2 s) and
exits when the parent changes (the sweep died, even by SIGKILL, and the worker
was re-parented) or when the sweep sets its stop flag (a lock-free shared byte,
so a dying worker can never leave the sweep waiting on a lock) (an interrupt or the
end of a round). Polling was chosen over ``prctl(PR_SET_DEATHSIG)`` because
the kernel ties that signal to the *thread* that forked the worker, which in
a process pool is not the thread that lives longest, and because it is
portable. Workers ignore SIGINT (a terminal's Ctrl-C reaches the whole process
group): the sweep decides how to stop. A worker that dies mid-point (an
out-of-memory kill) breaks its pool; the points it took down are retried in a
new pool, up to ``MAX_ATTEMPTS`` times, then recorded as ``crashed``.

On Dask, a lost worker's tasks are rescheduled by the scheduler itself; a
point the scheduler gives up on (``KilledWorker``) is recorded as ``crashed``.
Rows come back to the sweep's process, which alone writes the dataset, so the
workers need no shared file system and a point is written once.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from toolkit.errors import OptionError
from toolkit.sweep.points import Point
from toolkit.sweep.rows import crashed_row, run_point
from toolkit.target import Target

MAX_ATTEMPTS = 3
WATCH_SECONDS = 0.2
CONNECT_TIMEOUT = "10s"


def inline_rows(points: Sequence[Point], target: Target) -> Iterator[dict[str, Any]]:
    """Run every point in this process, one after another."""
    for p in points:
        yield run_point(p, target)


def pool_rows(points: Sequence[Point], target: Target, workers: int) -> Iterator[dict[str, Any]]:
    """Run the points on ``workers`` local processes that exit when the sweep does (see the module docstring)."""
    ctx = multiprocessing.get_context("spawn")
    attempts = dict.fromkeys((p.id for p in points), 0)
    todo = list(points)
    while todo:
        stop = ctx.RawValue("b", 0)   # shared memory without a lock: a worker dying can never block the sweep
        pool = ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=ctx, initializer=watch_parent,
                                   initargs=(stop,))
        retry: list[Point] = []
        finished = False
        try:
            futures = {pool.submit(run_point, p, target): p for p in todo}
            for fut in as_completed(futures):
                p = futures[fut]
                try:
                    row = fut.result()
                except BrokenProcessPool as exc:
                    attempts[p.id] += 1
                    if attempts[p.id] < MAX_ATTEMPTS:
                        retry.append(p)
                        continue
                    row = crashed_row(p, f"the worker process died {attempts[p.id]} times running it ({exc})")
                yield row
            finished = True
        finally:
            if finished:   # idle workers take the pool's own shutdown; an early stop ends them at once
                pool.shutdown(wait=True)
                stop.value = 1
            else:
                stop.value = 1
                pool.shutdown(wait=True, cancel_futures=True)
        todo = retry


def watch_parent(stop: Any) -> None:
    """Worker initializer: ignore SIGINT, and exit when the parent changes or ``stop.value`` is set."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()

    def watch() -> None:
        while not stop.value:
            time.sleep(WATCH_SECONDS)
            if os.getppid() != parent:
                os._exit(1)
        os._exit(0)

    threading.Thread(target=watch, name="toolkit-sweep-watchdog", daemon=True).start()


def connect(scheduler: Any) -> tuple[Any, bool]:
    """A ``distributed.Client`` for an address (owned: the caller closes it) or the client given."""
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        msg = "a Dask scheduler was given but dask.distributed is not installed: pip install 'toolkit[distributed]'"
        raise OptionError(msg, field="scheduler", value=scheduler) from exc
    if isinstance(scheduler, Client):
        return scheduler, False
    if not isinstance(scheduler, str):
        msg = f"scheduler={scheduler!r} must be an address such as 'tcp://10.0.0.5:8786' or a distributed.Client"
        raise OptionError(msg, field="scheduler", value=scheduler)
    try:
        return Client(scheduler, timeout=CONNECT_TIMEOUT), True
    except (OSError, TimeoutError, ValueError) as exc:
        msg = f"cannot reach the Dask scheduler at {scheduler!r} within {CONNECT_TIMEOUT}: {exc}"
        raise OptionError(msg, field="scheduler", value=scheduler) from None


def dask_slots(client: Any) -> int:
    return max(sum(client.nthreads().values()), 1)


def dask_rows(points: Sequence[Point], target: Target, client: Any) -> Iterator[dict[str, Any]]:
    """Submit every point to the cluster; rows in finishing order; a point the cluster loses is ``crashed``."""
    from distributed import as_completed as completed
    run = uuid.uuid4().hex[:8]
    futures = {client.submit(run_point, p, target, key=f"toolkit-sweep-{run}-{p.id}"): p for p in points}
    try:
        for fut in completed(futures):
            p = futures[fut]
            try:
                row = fut.result()
            except Exception as exc:   # KilledWorker, a cancelled or lost task: the point is a row
                row = crashed_row(p, f"lost on the Dask cluster: {type(exc).__name__}: {exc}")
            yield row
    finally:
        client.cancel(list(futures))
