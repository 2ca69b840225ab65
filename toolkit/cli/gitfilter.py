"""``toolkit git-filter``: keep notebook outputs out of git in this checkout.

``.gitattributes`` sends every notebook through the ``nbstripout`` clean filter;
this command defines that filter (``nbstripout --install``) and the metadata it
also strips: what a kernel writes when it runs (``language_info``), so a
notebook run and saved in JupyterLab is, to git, the committed one. (The
committed notebooks name the kernel as ipykernel does, ``Python 3 (ipykernel)``:
the schema requires a display name, so it cannot be stripped.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

#: notebook metadata a run rewrites, stripped besides nbstripout's defaults (outputs, counts, widget state)
EXTRA_KEYS = ("metadata.language_info",)


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)


def git_filter_cmd(
    path: Annotated[Path, typer.Argument(help="Any directory inside the checkout.")] = Path("."),
) -> None:
    """Install the output-stripping git filter for notebooks in the checkout holding PATH."""
    if not path.exists():
        typer.echo(f"error: path={str(path)!r} does not exist; give a directory inside the checkout", err=True)
        raise typer.Exit(2)
    if not path.is_dir():
        typer.echo(f"error: path={str(path)!r} is a file; give a directory inside the checkout", err=True)
        raise typer.Exit(2)
    try:
        top = _git("rev-parse", "--show-toplevel", cwd=path)
    except FileNotFoundError:
        typer.echo("error: git is not on PATH; the notebook filter is a git filter", err=True)
        raise typer.Exit(2) from None
    except NotADirectoryError:
        top = None
    if top is None or top.returncode:
        typer.echo(f"error: path={str(path)!r} is not inside a git checkout (git rev-parse --show-toplevel failed)",
                   err=True)
        raise typer.Exit(2)
    root = Path(top.stdout.strip())
    subprocess.run([sys.executable, "-m", "nbstripout", "--install"], cwd=root, check=True)
    subprocess.run(["git", "config", "filter.nbstripout.extrakeys", " ".join(EXTRA_KEYS)], cwd=root, check=True)
    typer.echo(f"{root}: notebooks pass through nbstripout (outputs, counts, {', '.join(EXTRA_KEYS)} stripped)")
