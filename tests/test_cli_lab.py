"""``toolkit lab``: the command it runs, a missing notebooks directory, the filter check, a clean Ctrl-C."""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import toolkit
from toolkit.cli import app, lab

runner = CliRunner()


def test_dry_run_prints_the_command_and_environment():
    r = runner.invoke(app, ["lab", "--dry-run", "--port", "9123", "--no-browser"])
    assert r.exit_code == 0, r.output
    notebooks = lab.notebooks_dir()
    assert notebooks.name == "notebooks" and notebooks.is_dir()
    command = next(ln for ln in r.stdout.splitlines() if "-m jupyterlab" in ln)
    assert f"--ServerApp.root_dir={notebooks}" in command and "--port=9123" in command
    assert "--no-browser" in command and command.startswith("JUPYTER_PREFER_ENV_PATH=1 ")
    assert sys.executable in command
    assert f"cd {notebooks}" in r.stdout and "git filter: " in r.stdout
    r = runner.invoke(app, ["lab", "--dry-run"])
    assert "--port=8888" in r.stdout and "--no-browser" not in r.stdout


def test_missing_notebooks_directory_exits_2_naming_the_path(monkeypatch, tmp_path):
    site = tmp_path / "site-packages"
    (site / "toolkit").mkdir(parents=True)
    monkeypatch.setattr(toolkit, "__file__", str(site / "toolkit" / "__init__.py"))   # a non-editable install
    r = runner.invoke(app, ["lab", "--dry-run"])
    assert r.exit_code == 2
    assert f"no notebooks directory at {site.resolve() / 'notebooks'}" in r.stderr
    assert "pip install -e ." in r.stderr


def test_outside_a_checkout_it_warns_and_serves(monkeypatch, tmp_path):
    (tmp_path / "notebooks").mkdir()
    ran = []
    monkeypatch.setattr(lab, "notebooks_dir", lambda: tmp_path / "notebooks")
    monkeypatch.setattr(lab, "_run", lambda command, cwd: ran.append((command, cwd)) or 0)
    r = runner.invoke(app, ["lab", "--port", "9124", "--no-browser"])
    assert r.exit_code == 0, r.output
    assert f"warning: {tmp_path / 'notebooks'} is not inside a git checkout" in r.stderr
    assert f"serving {tmp_path / 'notebooks'} at http://localhost:9124/lab" in r.stderr
    [(command, cwd)] = ran
    assert cwd == tmp_path / "notebooks" and command[1:3] == ["-m", "jupyterlab"] and "--port=9124" in command


def test_ctrl_c_stops_the_server_and_returns(tmp_path):
    main = threading.main_thread().ident   # a signal sent to the process may land on the timer's thread
    threading.Timer(1.0, signal.pthread_kill, (main, signal.SIGINT)).start()   # Ctrl-C reaching this process only
    start = time.monotonic()
    code = lab._run([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path)   # stands in for the server
    assert code == 0 and time.monotonic() - start < lab.STOP_SECONDS   # the server was told to stop, and did


FAKE_SERVER = """
import pathlib, sys, time
pathlib.Path(sys.argv[1]).write_text(str(__import__("os").getpid()))
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    import os
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:   # a zombie (exited, not yet reaped) counts as gone
        return f.read().split(")")[-1].split()[0] != "Z"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_end_the_server_too(tmp_path, signum):
    """``toolkit lab``'s process gets the signal; a fake server (a plain sleeping Python) must not outlive it."""
    import os
    import subprocess
    pid_file = tmp_path / "server.pid"
    code = ("import sys; from pathlib import Path; from toolkit.cli import lab; "
            f"sys.exit(lab._run([sys.executable, '-c', {FAKE_SERVER!r}, {str(pid_file)!r}], Path('.')))")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(Path(toolkit.__file__).parents[1])})
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and proc.poll() is None, "the fake server never started"
        time.sleep(0.1)
    server = int(pid_file.read_text())
    proc.send_signal(signum)
    assert proc.wait(timeout=30) == 128 + signum
    deadline = time.monotonic() + 10
    while _alive(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(server), "the server outlived toolkit lab"
