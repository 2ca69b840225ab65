"""A sweep on a 2-worker Dask LocalCluster survives losing a worker mid-sweep (slow: starts a cluster)."""

import json
import os
import signal

import pytest
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.sweep import load_sweep, sweep

pytestmark = pytest.mark.slow


def test_a_lost_worker_still_gives_every_point_exactly_once(tmp_path):
    distributed = pytest.importorskip("distributed")
    grid = {"row_block": [16, 18, 24], "batch": [1, 2]}
    killed: list[int] = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        pids = client.run(os.getpid)   # worker address -> worker process id

        def kill_one(progress) -> None:
            if progress.done >= 1 and not killed:   # mid-sweep: one point in, the rest queued or running
                victim = next(iter(pids.values()))
                os.kill(victim, signal.SIGKILL)
                killed.append(victim)

        df = sweep(["mlp-small-repeat"], grid, scheduler=client, out=tmp_path / "ds", progress=kill_one)
        # the same grid by address from the command line: every point is already there, nothing is resubmitted
        r = CliRunner().invoke(app, ["sweep", "mlp-small-repeat", "-g", "row_block=16,18,24", "-g", "batch=1,2",
                                     "--scheduler", cluster.scheduler_address, "--out", str(tmp_path / "ds"),
                                     "--json"])
        assert r.exit_code == 0, r.output
        assert "6 already done" in r.stderr and len(json.loads(r.stdout)) == 6
    assert killed, "no worker was killed"
    assert df.height == 6 and df["point_id"].n_unique() == 6
    assert set(df["status"]) <= {"ok", "crashed"} and (df["status"] == "ok").sum() >= 5
    on_disk = load_sweep(tmp_path / "ds")
    assert on_disk.height == 6 and len(list((tmp_path / "ds").glob("point-*.parquet"))) == 6
