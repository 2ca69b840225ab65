"""A sweep killed by SIGKILL leaves no process of it running after 5 s, whenever it is killed: while its workers
are still starting, mid-point, or between points (slow: real subprocesses).

Every process the sweep starts (spawn workers, the multiprocessing resource tracker) inherits its environment,
so survivors are found by a marker variable unique to the test in ``/proc/*/environ``, whatever their process
group or parent (orphans are re-parented to PID 1 or a subreaper).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")]

GRID = ["-g", "row_block=16,18,24", "-g", "batch=1,2"]   # 6 small points
MARKER = "TOOLKIT_ORPHAN_TEST"


def marked(tag: str) -> list[int]:
    """Live (not zombie) processes whose environment holds ``MARKER=tag``."""
    needle = f"{MARKER}={tag}".encode()
    found = []
    for env in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle not in env.read_bytes().split(b"\0"):
                continue
            state = (env.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            found.append(int(env.parent.name))
    return found


def wait_for(what, seconds: float, proc: subprocess.Popen, why: str) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, why
        time.sleep(0.02)


@pytest.mark.parametrize("when", ["starting", "mid-point", "between-points"])
def test_sigkill_at_any_moment_leaves_no_process_after_5_s(tmp_path, when) -> None:
    tag, out = uuid.uuid4().hex, tmp_path / "ds"
    env = {**os.environ, MARKER: tag}
    proc = subprocess.Popen([sys.executable, "-m", "toolkit", "sweep", "mlp-small-repeat", *GRID, "--workers", "2",
                             "--out", str(out), "-q"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    points = lambda: list(out.glob("point-*.parquet"))  # noqa: E731
    try:
        # the sweep and its two workers exist (a third, the resource tracker, may too): the workers still import
        wait_for(lambda: len(marked(tag)) >= 3, 120, proc, "the sweep's workers were never seen")
        if when == "mid-point":     # the workers have started their points: a worker's first point is running
            time.sleep(4.0)
        elif when == "between-points":   # a worker has just finished a point and takes its next
            wait_for(points, 180, proc, "no point finished within 180 s")
        if when == "starting":
            assert not points()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 5.0
        while (alive := marked(tag)) and time.monotonic() < deadline:
            time.sleep(0.1)
        cmdlines = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:120] for pid in alive
                    if Path(f"/proc/{pid}/cmdline").exists()}
        assert alive == [], f"still running 5 s after SIGKILL ({when}): {cmdlines}"
    finally:
        for pid in marked(tag):   # only this test's own processes, by their marker
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
