"""``toolkit lab``: JupyterLab on the checkout's ``notebooks/``, with the notebook git filter in place.

The notebooks live in the repository, not in the package: ``toolkit lab`` finds
them beside the installed package (an editable install, ``pip install -e .``)
and says where it looked when they are not there. Each notebook's first cell
sets up the offline chart renderer (``toolkit.widgets.setup()``); this command
makes sure the checkout strips outputs from saved notebooks (``toolkit
git-filter``, skipped with a warning outside a git checkout), then runs
``python -m jupyterlab`` with this interpreter and waits for it. One Ctrl-C
stops the server (no "shut down?" prompt); SIGTERM or SIGHUP (a closed terminal)
ends it as well, so the server never outlives the command.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

#: environment set for the server besides the caller's: kernels come from this environment's Jupyter data
#: (its ipykernel, so the kernel imports this toolkit), ahead of a per-user kernelspec for another Python
ENV = {"JUPYTER_PREFER_ENV_PATH": "1"}
#: seconds the server has to stop after Ctrl-C before it is terminated
STOP_SECONDS = 10.0


def notebooks_dir() -> Path:
    """The repository's ``notebooks/`` beside the installed ``toolkit`` package (it may not exist)."""
    import toolkit
    return Path(toolkit.__file__).resolve().parents[1] / "notebooks"


def lab_command(notebooks: Path, port: int, browser: bool) -> list[str]:
    """The JupyterLab command: this interpreter, rooted at ``notebooks``, on exactly ``port`` (a busy port
    fails instead of moving, so the address printed is the one served); as root (in a container) it passes
    ``--allow-root``, which JupyterLab otherwise asks for and exits."""
    root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []   # a container's user
    return [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={notebooks}", f"--port={port}",
            "--ServerApp.port_retries=0", "--ServerApp.answer_yes=True", *([] if browser else ["--no-browser"]),
            *root]


def lab_cmd(
    port: Annotated[int, typer.Option(help="Port to serve on (fails if busy).", min=1, max=65535)] = 8888,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Do not open a browser.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the command and environment, run nothing.")
                       ] = False,
) -> None:
    """Open JupyterLab on the repository's notebooks (outputs stripped from git by the notebook filter)."""
    notebooks = notebooks_dir()
    if not notebooks.is_dir():
        typer.echo(f"error: no notebooks directory at {notebooks}; `toolkit lab` needs the repository checkout "
                   f"beside the package (install it with `pip install -e .` from the checkout)", err=True)
        raise typer.Exit(2)
    command = lab_command(notebooks, port, browser=not no_browser)
    env_text = " ".join(f"{k}={shlex.quote(v)}" for k, v in ENV.items())
    if dry_run:
        typer.echo(f"cd {shlex.quote(str(notebooks))}")
        typer.echo(f"{env_text} {shlex.join(command)}")
        typer.echo(f"git filter: {_filter_state(notebooks)[1]}")
        return
    state, why = _filter_state(notebooks)
    if state == "missing":
        from toolkit.cli.gitfilter import git_filter_cmd
        try:
            git_filter_cmd(notebooks)
        except subprocess.CalledProcessError as exc:   # the lab still opens; say what to run by hand
            typer.echo(f"warning: installing the notebook filter failed ({exc}); run `toolkit git-filter`", err=True)
    elif state == "none":
        typer.echo(f"warning: {why}; saved notebooks keep their outputs", err=True)
    typer.echo(f"serving {notebooks} at http://localhost:{port}/lab (JupyterLab prints the address with its token "
               f"below; Ctrl-C stops it)", err=True)
    raise typer.Exit(_run(command, notebooks))


def _filter_state(notebooks: Path) -> tuple[str, str]:
    """Whether the checkout holding ``notebooks`` has the output-stripping filter: ``installed``, ``missing``
    (a checkout without it) or ``none`` (not a git checkout), with a sentence saying so."""
    from toolkit.cli.gitfilter import EXTRA_KEYS
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=notebooks, capture_output=True, text=True)
    except FileNotFoundError:
        return "none", "git is not on PATH, so the notebook output filter cannot be installed"
    if top.returncode:
        return "none", f"{notebooks} is not inside a git checkout, so the notebook output filter is not installed"
    root = Path(top.stdout.strip())

    def config(key: str) -> str:
        got = subprocess.run(["git", "config", "--get", key], cwd=root, capture_output=True, text=True)
        return got.stdout.strip()

    if config("filter.nbstripout.clean") and config("filter.nbstripout.extrakeys") == " ".join(EXTRA_KEYS):
        return "installed", f"installed in {root}"
    return "missing", f"not installed in {root}; `toolkit lab` installs it (as `toolkit git-filter` does)"


class _Stop(Exception):
    """SIGTERM or SIGHUP reached ``toolkit lab``: the server is ended before the command exits."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: signals that end ``toolkit lab`` and, with it, its server (a closed terminal sends SIGHUP, a service
#: manager or ``kill`` SIGTERM); the server is a child, not in the caller's process group, so it would live on
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


def _run(command: list[str], cwd: Path) -> int:
    """Run the server and wait; Ctrl-C (which the terminal also sends the server) waits for it to stop;
    SIGTERM and SIGHUP stop it too (terminated, then killed after ``STOP_SECONDS``), exiting 128 + the signal."""
    def stop(signum: int, frame: object) -> None:
        raise _Stop(signum)

    old = {s: signal.signal(s, stop) for s in STOP_SIGNALS}
    proc = None
    try:
        proc = subprocess.Popen(command, cwd=cwd, env={**os.environ, **ENV})
        while True:   # short waits: a blocking waitpid is restarted after SIGINT once polars is imported
            try:
                return proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
    except KeyboardInterrupt:
        _end(proc, signal.SIGINT)   # in case the interrupt reached only this process
        return 0
    except _Stop as exc:
        _end(proc, signal.SIGTERM)
        return 128 + exc.signum
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def _end(proc: subprocess.Popen | None, signum: int) -> None:
    """Send the server ``signum``, wait ``STOP_SECONDS`` for it to exit, then kill it."""
    if proc is None:
        return
    if proc.poll() is None:
        proc.send_signal(signum)
    try:
        proc.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    typer.echo("JupyterLab stopped", err=True)
