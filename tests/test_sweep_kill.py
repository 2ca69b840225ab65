"""A killed sweep leaves no process behind and a rerun finishes it (slow: real subprocesses).

The sweep runs as ``python -m toolkit sweep`` in its own session, so every
process it starts (its spawn workers, the multiprocessing resource tracker)
shares its process group; survivors are found by reading ``/proc``.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from toolkit.sweep import load_sweep

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")]

GRID = ["-g", "row_block=16,18,24", "-g", "batch=1,2"]   # 6 points
COMMAND = [sys.executable, "-m", "toolkit", "sweep", "mlp-small-repeat", *GRID, "--workers", "2"]


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes in process group ``pgid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        state, _ppid, pgrp = text.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            found.append(int(stat.parent.name))
    return found


def start(out: Path) -> subprocess.Popen:
    proc = subprocess.Popen([*COMMAND, "--out", str(out)], start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    workers = 0
    while not list(out.glob("point-*.parquet")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no point finished within 120 s"
        workers = max(workers, len(group_members(proc.pid)) - 1)
        time.sleep(0.05)
    assert workers >= 2, "the sweep's worker processes were never seen"
    return proc


def gone(pgid: int, seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while (alive := group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


def test_sigkill_leaves_no_orphans_and_a_rerun_finishes_every_point_once(tmp_path):
    out = tmp_path / "ds"
    proc = start(out)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert gone(proc.pid) == []
    before = load_sweep(out)
    assert before.height >= 1
    rerun = subprocess.run([*COMMAND, "--out", str(out), "--quiet"], capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    after = load_sweep(out)
    assert after.height == 6 and after["point_id"].n_unique() == 6 and (after["status"] == "ok").all()
    assert len(list(out.glob("point-*.parquet"))) == 6
    kept = after.join(before.select("point_id"), on="point_id", how="semi")
    assert kept.equals(before)   # the points done before the kill are not recomputed: identical rows


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_sigint_and_sigterm_stop_cleanly_and_say_what_remains(tmp_path, signum):
    out = tmp_path / "ds"
    proc = start(out)
    os.kill(proc.pid, signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert gone(proc.pid) == []
    done = load_sweep(out)
    assert f"{done.height} of 6 points done" in err and f"{6 - done.height} remain" in err, err
    assert "Traceback" not in err and done.height < 6
    assert (done["status"] == "ok").all() and done.filter(pl.col("point_id").is_duplicated()).height == 0


def test_a_local_worker_killed_mid_point_is_retried_and_written_once(tmp_path):
    """An out-of-memory kill of one pool worker breaks the pool; its points run again in a new one."""
    from toolkit.sweep import sweep
    me, killed, first_pool = os.getpid(), [], []

    def kill_a_worker(progress) -> None:
        if progress.done >= 1 and not killed:
            workers = [int(s.parent.name) for s in Path("/proc").glob("[0-9]*/stat")
                       if int(s.read_text().rsplit(")", 1)[1].split()[1]) == me
                       and "spawn_main" in (s.parent / "cmdline").read_text()]   # not the tracker or reaper
            os.kill(workers[0], signal.SIGKILL)
            killed.append(workers[0])
            first_pool.extend(workers)

    df = sweep(["mlp-small-repeat"], {"row_block": [16, 18, 24], "batch": [1, 2]}, workers=2, out=tmp_path / "ds",
               progress=kill_a_worker)
    assert killed and df.height == 6 and df["point_id"].n_unique() == 6 and (df["status"] == "ok").all()
    assert len(list((tmp_path / "ds").glob("point-*.parquet"))) == 6
    pids = {int(w.rsplit(":", 1)[1]) for w in df["worker"]}
    assert pids - set(first_pool)   # the retried points ran on a new pool's workers
