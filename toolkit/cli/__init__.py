"""The ``toolkit`` command line: the notebooks' jobs from a shell.

Sub-commands live in sibling modules, one per area, each a ``typer.Typer``.
"""

from __future__ import annotations

import typer

from toolkit.cli import graph, placement, profile

app = typer.Typer(
    name="toolkit",
    help="Compile, place, simulate and inspect SigLIP blocks on the IPU21 tile machine.",
    no_args_is_help=True,
    add_completion=False,
)
app.command("workloads")(graph.workloads_cmd)
app.command("graph")(graph.graph_cmd)
app.add_typer(profile.app, name="profile")
app.add_typer(placement.app, name="placement")


def main() -> None:
    app()
