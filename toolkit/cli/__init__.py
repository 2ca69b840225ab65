"""The ``toolkit`` command line: the notebooks' jobs from a shell.

Sub-commands live in sibling modules, one per area, each a ``typer.Typer``.
"""

from __future__ import annotations

import typer

from toolkit.cli import calibrate as calibrate_cli
from toolkit.cli import compile as compile_cli
from toolkit.cli import gitfilter, graph, lab, placement, profile, sram

app = typer.Typer(
    name="toolkit",
    help="Compile, place, simulate and inspect SigLIP blocks on the IPU21 tile machine.",
    no_args_is_help=True,
    add_completion=False,
)
app.command("compile")(compile_cli.compile_cmd)
app.command("sweep")(compile_cli.sweep_cmd)
app.command("calibrate")(calibrate_cli.calibrate_cmd)
app.command("workloads")(graph.workloads_cmd)
app.command("graph")(graph.graph_cmd)
app.command("git-filter")(gitfilter.git_filter_cmd)
app.command("lab")(lab.lab_cmd)
app.add_typer(profile.app, name="profile")
app.add_typer(placement.app, name="placement")
app.add_typer(sram.app, name="sram")
app.add_typer(compile_cli.artifacts_app, name="artifacts")


def main() -> None:
    app()
