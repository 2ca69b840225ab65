"""Where points run: in the sweep's own process, in local worker processes, or on a Dask cluster.

Each engine is a generator of finished rows (in finishing order); the caller
writes each row as it arrives and closes the generator to stop early, which
ends the engine's work (local workers exit, Dask futures are cancelled).

Local workers are ``spawn``-started processes that cannot outlive the sweep,
whatever kills it. The sweep passes its own pid to each worker's initializer,
which (1) on Linux asks the kernel for SIGKILL when its parent dies
(``prctl(PR_SET_PDEATHSIG)`` through ctypes; the pool starts its workers from
the sweep's main thread, which lives as long as the sweep), (2) exits at once
if its parent is already not the sweep (the sweep died while the worker was
still importing: before this check it recorded the new parent and lived on),
and (3) runs a watchdog thread, the portable fallback, that polls
``os.getppid()`` every 0.2 s and exits when the parent changes or when the
sweep sets its stop flag (a lock-free shared byte, so a dying worker can never
leave the sweep waiting on a lock) (an interrupt or the end of a round). The
multiprocessing resource tracker the pool starts holds no work: it exits when
the last process holding its pipe (the sweep and its workers) is gone. A worker
still importing the toolkit (seconds, before its initializer runs) is ended by
the reaper, a tiny process the sweep tells its workers' pids: when the sweep
dies without saying "done" it SIGKILLs them.
Workers ignore SIGINT (a terminal's Ctrl-C reaches the whole process
group): the sweep decides how to stop. A worker that dies mid-point (an
out-of-memory kill) breaks its pool; the points it took down are retried in a
new pool, up to ``MAX_ATTEMPTS`` times, then recorded as ``crashed``.

On Dask, a lost worker's tasks are rescheduled by the scheduler itself; a
point the scheduler gives up on (``KilledWorker``) is recorded as ``crashed``.
Rows come back to the sweep's process, which alone writes the dataset, so the
workers need no shared file system and a point is written once.
"""

from __future__ import annotations

import contextlib
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
PR_SET_PDEATHSIG = 1   # linux/prctl.h
WATCH_SECONDS = 0.2
CONNECT_TIMEOUT = "10s"
PROBE_SECONDS = 5.0       # a scheduler's handshake arrives at once; silence this long means no scheduler
GREETING_BYTES = 256
WORKER_SECONDS = 10.0     # a scheduler with no worker for this long is named
POLL_SECONDS = 1.0        # how often a waiting sweep checks that the cluster still has workers


def inline_rows(points: Sequence[Point], target: Target) -> Iterator[dict[str, Any]]:
    """Run every point in this process, one after another."""
    for p in points:
        yield run_point(p, target)


def pool_rows(points: Sequence[Point], target: Target, workers: int) -> Iterator[dict[str, Any]]:
    """Run the points on ``workers`` local processes that exit when the sweep does (see the module docstring)."""
    ctx = multiprocessing.get_context("spawn")
    attempts = dict.fromkeys((p.id for p in points), 0)
    todo = list(points)
    reaper = start_reaper()
    try:
        while todo:
            stop = ctx.RawValue("b", 0)   # shared memory without a lock: a worker dying can never block the sweep
            pool = ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=ctx,
                                       initializer=watch_parent, initargs=(stop, os.getpid()))
            retry: list[Point] = []
            finished = False
            try:
                futures = {pool.submit(run_point, p, target): p for p in todo}
                pids = list(getattr(pool, "_processes", None) or {})   # started by the submits, importing still
                tell(reaper, [str(pid) for pid in pids])
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
                tell(reaper, [f"-{pid}" for pid in pids])   # joined: their pids may be reused
            todo = retry
    finally:
        tell(reaper, ["done"])
        if reaper is not None:
            with contextlib.suppress(OSError):   # the reaper was killed: nothing is waiting on the pipe
                reaper.stdin.close()
            reaper.wait()


# The reaper: a process of a few standard-library lines, up in milliseconds, that the sweep tells its workers'
# pids on a pipe. When the pipe closes without "done" (the sweep died, even by SIGKILL) it SIGKILLs them: a
# worker still importing the toolkit (seconds) has run neither its prctl nor its watchdog yet.
REAPER = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pids, done = set(), False
for line in sys.stdin:
    word = line.strip()
    if word == "done":
        done = True
        break
    if word.lstrip("-").isdigit():
        (pids.discard if word.startswith("-") else pids.add)(abs(int(word)))
if not done:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
"""


def start_reaper() -> Any:
    """The reaper process (see ``REAPER``), or None where it cannot start (the workers' own checks remain)."""
    import subprocess
    import sys
    try:
        return subprocess.Popen([sys.executable, "-S", "-c", REAPER], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, text=True, close_fds=True)
    except OSError:   # pragma: no cover - no second interpreter could start
        return None


def tell(reaper: Any, words: list[str]) -> None:
    if reaper is None or not words:
        return
    try:
        reaper.stdin.write("".join(f"{w}\n" for w in words))
        reaper.stdin.flush()
    except (OSError, ValueError):   # the reaper is gone: the workers' prctl and watchdog still end them
        pass


def die_with_parent() -> None:
    """Ask the kernel (Linux) to SIGKILL this process when the thread that started it exits; a no-op elsewhere."""
    import sys
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):   # no prctl (an unusual libc): the watchdog below still ends the worker
        pass


def watch_parent(stop: Any, parent: int | None = None) -> None:
    """Worker initializer: ignore SIGINT; die with the sweep process ``parent`` (default: the current parent),
    at once if it is already gone, and exit when ``stop.value`` is set."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    parent = os.getppid() if parent is None else parent
    if os.getppid() != parent:   # the sweep died before this worker finished starting
        os._exit(1)

    def watch() -> None:
        while not stop.value:
            time.sleep(WATCH_SECONDS)
            if os.getppid() != parent:
                os._exit(1)
        os._exit(0)

    threading.Thread(target=watch, name="toolkit-sweep-watchdog", daemon=True).start()


SCHEMES = ("tcp",)   # what probe() can check and Client() reaches without a security object


def check_scheduler(scheduler: Any) -> Any:
    """Refuse, before any work, a scheduler that is neither a ``distributed.Client`` nor a ``tcp://host:port``
    address (a bare ``host:port`` means tcp): a scheme outside ``SCHEMES`` (``tls://`` needs certificates the
    sweep does not take: pass a Client built with them; ``inproc://`` lives in another process's memory), no
    host, no port or a port outside 1..65535. Returns the address, ``tcp://`` prefixed, or the Client."""
    from urllib.parse import urlsplit
    if not isinstance(scheduler, str):
        try:
            from distributed import Client
        except ImportError:  # pragma: no cover - the extra is installed in tests
            Client = ()
        if isinstance(scheduler, Client):
            return scheduler
        msg = f"scheduler={scheduler!r} must be an address such as 'tcp://10.0.0.5:8786' or a distributed.Client"
        raise OptionError(msg, field="scheduler", value=scheduler)
    address = scheduler.strip()
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    if scheme.lower() not in SCHEMES:
        hint = {"tls": "TLS needs certificates the sweep does not take: pass toolkit.sweep(scheduler=Client("
                       "address, security=...)) from Python, or use a tcp:// address",
                "inproc": "an inproc scheduler lives inside another process: pass its distributed.Client from "
                          "Python"}.get(scheme.lower(), "use a tcp:// address")
        msg = (f"scheduler {scheduler!r}: the scheme {scheme + '://'!r} is not supported (supported: "
               f"{', '.join(s + '://' for s in SCHEMES)}); {hint}")
        raise OptionError(msg, field="scheduler", value=scheduler)
    where = urlsplit(f"tcp://{rest}")
    try:
        host, port = where.hostname, where.port
    except ValueError:   # a port that is not a number or out of range
        raw = where.netloc.rpartition(":")[2]
        msg = (f"scheduler {scheduler!r}: the port {raw!r} is not a number from 1 to 65535 "
               f"(e.g. tcp://10.0.0.5:8786)")
        raise OptionError(msg, field="scheduler", value=scheduler) from None
    if where.path not in ("", "/") or where.query or where.fragment:
        msg = f"scheduler {scheduler!r}: an address is scheme://host:port, with nothing after the port"
        raise OptionError(msg, field="scheduler", value=scheduler)
    if not host:
        msg = f"scheduler {scheduler!r} names no host (e.g. tcp://10.0.0.5:8786)"
        raise OptionError(msg, field="scheduler", value=scheduler)
    if port is None or not 1 <= port <= 65535:
        what = "names no port" if port is None else f"has port {port}, outside 1..65535"
        msg = f"scheduler {scheduler!r} {what} (a Dask scheduler listens on 8786 by default: tcp://{host}:8786)"
        raise OptionError(msg, field="scheduler", value=scheduler)
    return f"tcp://{rest}"


def probe(address: str, seconds: float | None = None) -> None:
    """Refuse, within ``seconds``, a ``tcp://`` address where nothing listens or something other than a Dask
    scheduler does: a scheduler greets every connection at once with its handshake (its ``compression`` and
    ``pickle-protocol`` settings); a silent or foreign server would otherwise hold the client for minutes."""
    import socket
    from urllib.parse import urlsplit
    seconds = PROBE_SECONDS if seconds is None else seconds
    if not address.startswith("tcp://"):
        return
    where = urlsplit(address)
    try:
        host, port = where.hostname, where.port
    except ValueError:
        host = port = None
    if not host or not port:
        raise OptionError(f"scheduler {address!r} is not a host:port address (e.g. tcp://10.0.0.5:8786)",
                          field="scheduler", value=address)
    greeting = b""
    try:
        with socket.create_connection((host, port), timeout=seconds) as sock:
            sock.settimeout(seconds)
            while len(greeting) < GREETING_BYTES and b"compression" not in greeting:
                got = sock.recv(GREETING_BYTES)
                if not got:
                    break
                greeting += got
    except TimeoutError:
        pass
    except OSError as exc:
        msg = f"cannot reach the Dask scheduler at {address!r} within {seconds:g} s: {exc.strerror or exc}"
        raise OptionError(msg, field="scheduler", value=address) from None
    if b"compression" not in greeting:
        said = "said nothing" if not greeting else f"answered {greeting[:24]!r}"
        msg = (f"{address!r} is not a Dask scheduler: waited {seconds:g} s for its handshake and the server {said} "
               f"(is another program listening on that port?)")
        raise OptionError(msg, field="scheduler", value=address)


def connect(scheduler: Any) -> tuple[Any, bool]:
    """A ``distributed.Client`` for an address (owned: the caller closes it) or the client given; the address
    must answer as a Dask scheduler (:func:`probe`) and have a worker within ``WORKER_SECONDS``."""
    try:
        from distributed import Client
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        msg = "a Dask scheduler was given but dask.distributed is not installed: pip install 'toolkit[distributed]'"
        raise OptionError(msg, field="scheduler", value=scheduler) from exc
    if isinstance(scheduler, Client):
        return scheduler, False
    scheduler = check_scheduler(scheduler)
    probe(scheduler)
    try:
        client = Client(scheduler, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as exc:
        msg = f"cannot reach the Dask scheduler at {scheduler!r} within {CONNECT_TIMEOUT}: {exc}"
        raise OptionError(msg, field="scheduler", value=scheduler) from None
    try:
        client.wait_for_workers(1, timeout=WORKER_SECONDS)
    except (TimeoutError, OSError) as exc:
        client.close()
        msg = (f"the Dask scheduler at {scheduler!r} has no workers (waited {WORKER_SECONDS:g} s); start some with "
               f"`dask worker {scheduler}`")
        raise OptionError(msg, field="scheduler", value=scheduler) from exc
    return client, True


def dask_slots(client: Any) -> int:
    return max(sum(client.nthreads().values()), 1)


def dask_rows(points: Sequence[Point], target: Target, client: Any) -> Iterator[dict[str, Any]]:
    """Submit every point to the cluster; rows in finishing order; a point the cluster loses is ``crashed``.

    Waits in steps of ``POLL_SECONDS``; when the cluster has had no worker for ``WORKER_SECONDS`` (all lost,
    none joined) or the scheduler connection is gone, the sweep stops with an error saying how many points
    still wait (the finished ones are already written)."""
    from distributed import wait
    run = uuid.uuid4().hex[:8]
    futures = {client.submit(run_point, p, target, key=f"toolkit-sweep-{run}-{p.id}"): p for p in points}
    pending = set(futures)
    idle_since: float | None = None
    try:
        while pending:
            if client.status != "running":
                msg = (f"lost the connection to the Dask scheduler ({client.status}) while {len(pending)} points "
                       f"were waiting; rerun the sweep to finish them")
                raise OptionError(msg, field="scheduler", value=str(client.scheduler.address))
            try:
                done, pending = wait(pending, timeout=POLL_SECONDS, return_when="FIRST_COMPLETED")
            except TimeoutError:
                done = set()
            for fut in done:
                p = futures[fut]
                try:
                    row = fut.result()
                except Exception as exc:   # KilledWorker, a cancelled or lost task: the point is a row
                    row = crashed_row(p, f"lost on the Dask cluster: {type(exc).__name__}: {exc}")
                yield row
            if done or not pending or client.nthreads():
                idle_since = None
            else:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > WORKER_SECONDS:
                    msg = (f"the Dask scheduler has had no workers for {WORKER_SECONDS:g} s while {len(pending)} "
                           f"points wait for one; start workers (or rerun the sweep to finish them)")
                    raise OptionError(msg, field="scheduler", value=str(client.scheduler.address))
    finally:
        client.cancel(list(futures))
