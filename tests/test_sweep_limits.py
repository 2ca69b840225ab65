"""Sweeps are bounded and never hang: a grid past the point limit is refused before it is expanded, a point
file of the wrong types is an error naming it (and a rerun recomputes it), rows name their target, and a
scheduler address where no Dask scheduler answers, or one without workers, is named within seconds."""

from __future__ import annotations

import os
import socket
import threading

import polars as pl
import pytest
from typer.testing import CliRunner

from toolkit.cli import app
from toolkit.errors import FormatError, OptionError
from toolkit.sweep import engines, load_sweep, sweep, sweep_points
from toolkit.sweep.points import MAX_POINTS
from toolkit.target import ipu21

SMALL = "mlp-small-repeat"


def test_a_grid_past_the_point_limit_is_refused_before_it_is_expanded() -> None:
    grid = {"row_block": list(range(1, 1001)), "seed": list(range(1000))}   # 1,000,000 points
    with pytest.raises(OptionError, match=rf"1,000,000 points .*the limit is {MAX_POINTS:,}"):
        sweep([SMALL], grid)
    with pytest.raises(OptionError, match="the limit is"):
        sweep_points([SMALL, "mlp-single-b1"], {"seed": list(range(MAX_POINTS // 2 + 1))}, ipu21())


def test_rows_carry_the_target_digest(tmp_path) -> None:
    out = tmp_path / "ds"
    a = sweep([SMALL], {"row_block": [36]}, out=out, workers=1)
    b = sweep([SMALL], {"row_block": [36]}, out=out, workers=1, target=ipu21().replace(sync_cycles=700)
              if hasattr(ipu21(), "sync_cycles") else ipu21().replace(costs={"sync_cycles": 700}))
    both = load_sweep(out)
    assert both.height == 2 and both["target_digest"].n_unique() == 2
    assert a["target_digest"][0] != b["target_digest"][0] and len(a["target_digest"][0]) == 16


def test_a_wrong_typed_point_file_is_named_and_a_rerun_recovers(tmp_path) -> None:
    out = tmp_path / "ds"
    first = sweep([SMALL], {"row_block": [36]}, out=out, workers=1)
    f = next(out.glob("point-*.parquet"))
    pl.read_parquet(f).with_columns(pl.lit("many").alias("lowered_cycles")).write_parquet(f)
    with pytest.raises(FormatError, match=r"column 'lowered_cycles' holds String"):
        load_sweep(out)
    again = sweep([SMALL], {"row_block": [36]}, out=out, workers=1)   # the point runs again, its file replaced
    assert again["lowered_cycles"][0] == first["lowered_cycles"][0] and load_sweep(out).height == 1
    os.unlink(f)
    os.mkfifo(f)   # a FIFO named like a point file blocks neither a load nor a rerun
    with pytest.raises(FormatError, match="FIFO"):
        load_sweep(out)
    assert sweep([SMALL], {"row_block": [36]}, out=out, workers=1).height == 1


@pytest.mark.parametrize(("text", "match"), [
    ("[grid]\nrow_block = " + "[" * 5000 + "]" * 5000, "nests deeper"),
    (b"workloads = [\"caf\xe9\"]\n", "not UTF-8"),
])
def test_grid_files_nested_or_not_utf8_are_errors(tmp_path, text, match) -> None:
    p = tmp_path / "g.toml"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    r = CliRunner().invoke(app, ["sweep", SMALL, "--grid-file", str(p)])
    assert r.exit_code == 2 and match in r.output and "Traceback" not in r.output, r.output


def _server(reply: bytes):
    """A plain TCP server on 127.0.0.1 that is not Dask: it accepts, sends ``reply`` and stays silent."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held = []

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)
            if reply:
                conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    return srv, f"tcp://127.0.0.1:{srv.getsockname()[1]}"


@pytest.mark.parametrize("reply", [b"", b"SSH-2.0-OpenSSH_9.2\r\n"])
def test_a_port_where_something_else_listens_is_named_within_seconds(monkeypatch, reply) -> None:
    pytest.importorskip("distributed")
    monkeypatch.setattr(engines, "PROBE_SECONDS", 1.0)
    srv, address = _server(reply)
    try:
        with pytest.raises(OptionError, match=r"is not a Dask scheduler: waited 1 s") as err:
            sweep([SMALL], {"row_block": [18]}, scheduler=address)
    finally:
        srv.close()
    assert err.value.field == "scheduler"


def test_a_closed_port_is_named() -> None:
    pytest.importorskip("distributed")
    with socket.socket() as s:   # a port that was free a moment ago: nothing listens
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(OptionError, match="cannot reach the Dask scheduler"):
        sweep([SMALL], {"row_block": [18]}, scheduler=address)


@pytest.mark.slow
def test_a_scheduler_without_workers_is_named_within_seconds(monkeypatch) -> None:
    """(slow: starts a scheduler)"""
    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr(engines, "WORKER_SECONDS", 1.0)
    with distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        with pytest.raises(OptionError, match=r"has no workers \(waited 1 s\)"):
            sweep([SMALL], {"row_block": [18]}, scheduler=cluster.scheduler_address)
        with distributed.Client(cluster) as client, pytest.raises(OptionError, match="no workers for 1 s"):
            sweep([SMALL], {"row_block": [18]}, scheduler=client)


def test_a_killed_sweeps_half_written_point_file_is_removed_by_the_next_sweep(tmp_path) -> None:
    out = tmp_path / "ds"
    out.mkdir()
    half = out / ".point-0123456789abcdef.parquet.999999.tmp"   # no process 999999
    half.write_bytes(b"PAR1 half")
    sweep([SMALL], {"row_block": [36]}, out=out, workers=1)
    assert not half.exists() and len(list(out.iterdir())) == 1
