"""``toolkit workloads`` and ``toolkit graph``: the presets and their graphs."""

from __future__ import annotations

import typer

from toolkit.cli.table import show
from toolkit.errors import ToolkitError
from toolkit.graph import build_graph, workloads


def switch_option(name: str, what: str):
    """A ``--NAME/--no-NAME`` graph switch (None: the preset's own), passed to ``build_graph`` by name."""
    flag = name.replace("_", "-")
    return typer.Option(None, f"--{flag}/--no-{flag}", help=f"{what} (default: the preset's).")


def switches(biases: bool | None, layernorm: bool | None, residual: bool | None, projection: bool | None,
             host_layout: bool | None) -> dict:
    """The graph switches given on the command line (unset ones stay the preset's)."""
    return {"biases": biases, "layernorm": layernorm, "residual": residual, "projection": projection,
            "host_layout": host_layout}


SWITCH_HELP = {
    "biases": "Linears add a bias", "layernorm": "Blocks normalize their input first",
    "residual": "Blocks add their input to their result", "projection": "Attention's output projection",
    "host_layout": "The host writes the input in its first consumer's operand layout",
}


__all__ = ["SWITCH_HELP", "fail", "graph_cmd", "show", "switch_option", "switches", "workloads_cmd"]


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
    biases: bool | None = switch_option("biases", SWITCH_HELP["biases"]),
    layernorm: bool | None = switch_option("layernorm", SWITCH_HELP["layernorm"]),
    residual: bool | None = switch_option("residual", SWITCH_HELP["residual"]),
    projection: bool | None = switch_option("projection", SWITCH_HELP["projection"]),
    host_layout: bool | None = switch_option("host_layout", SWITCH_HELP["host_layout"]),
    as_json: bool = typer.Option(False, "--json", help="JSON records instead of a table."),
) -> None:
    """Show a workload's ops (one symbolic block) and its repeat table."""
    try:
        g = build_graph(workload, batch=batch, blocks=blocks,
                        **switches(biases, layernorm, residual, projection, host_layout))
    except ToolkitError as exc:
        fail(exc)
    show(g.ops.drop("inputs"), f"{g.name}: ops", as_json=as_json)
    if g.repeats.height and not as_json:
        show(g.repeats, f"{g.name}: repeats")
