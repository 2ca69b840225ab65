"""``toolkit workloads`` and ``toolkit graph``: the presets and their graphs."""

from __future__ import annotations

import typer

from toolkit.cli.table import show
from toolkit.errors import ToolkitError
from toolkit.graph import build_graph, workloads

__all__ = ["fail", "graph_cmd", "show", "workloads_cmd"]


def fail(exc: ToolkitError) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


def workloads_cmd(as_json: bool = typer.Option(False, "--json", help="JSON records instead of a table.")) -> None:
    """List the preset workloads."""
    show(workloads(), "workloads", as_json=as_json)


def graph_cmd(
    workload: str = typer.Argument(..., help="Preset name (see `toolkit workloads`)."),
    batch: int | None = typer.Option(None, help="Override the preset's batch."),
    blocks: int | None = typer.Option(None, help="Override the preset's repeat count."),
    as_json: bool = typer.Option(False, "--json", help="JSON records instead of a table."),
) -> None:
    """Show a workload's ops (one symbolic block) and its repeat table."""
    try:
        g = build_graph(workload, batch=batch, blocks=blocks)
    except ToolkitError as exc:
        fail(exc)
    show(g.ops.drop("inputs"), f"{g.name}: ops", as_json=as_json)
    if g.repeats.height and not as_json:
        show(g.repeats, f"{g.name}: repeats")
