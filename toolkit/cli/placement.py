"""``toolkit placement ...``: single-arena placement problems."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import polars as pl
import typer

from toolkit.errors import FormatError, OptionError

app = typer.Typer(help="Solve and inspect SRAM placement problems.", no_args_is_help=True)

EXIT_FIT, EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_NOT_PROVEN = 0, 2, 3, 4


@app.callback()
def _group() -> None:
    """Solve and inspect SRAM placement problems."""


@app.command()
def solve(
    input: Annotated[Path, typer.Argument(help="MiniMalloc CSV: id,lower,upper,size (lifetimes [lower, upper)).")],
    capacity: Annotated[int, typer.Option("--capacity", help="Arena capacity in bytes.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Output CSV: the input rows plus an offset column.")],
    time_limit: Annotated[float, typer.Option("--time-limit", help="Seconds of search if greedy fails.")] = 60.0,
) -> None:
    """Place every buffer below CAPACITY; exit 0 fit, 3 proven infeasible, 4 not proven, 2 bad input."""
    from toolkit.files import check_not_input, check_output
    from toolkit.placement.arena import ArenaStatus, solve_arena
    from toolkit.placement.csvio import read_arena_csv, write_arena_csv

    try:
        if capacity < 0:
            msg = f"--capacity={capacity} is negative; give bytes >= 0"
            raise OptionError(msg, field="capacity", value=capacity)
        if time_limit <= 0:
            msg = f"--time-limit={time_limit} must be a positive number of seconds"
            raise OptionError(msg, field="time_limit", value=time_limit)
        check_output(output, "--output")
        check_not_input({"--output": output}, {"INPUT": input})
        df = read_arena_csv(input)
    except (FormatError, OptionError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    t0 = time.perf_counter()
    typer.echo(f"{input}: {df.height} buffers, capacity {capacity} bytes, time limit {time_limit:g} s", err=True)
    res = solve_arena(df["lower"].to_numpy(), df["upper"].to_numpy(), df["size"].to_numpy(), capacity,
                      time_limit=time_limit)
    typer.echo(
        f"{res.status.value}: peak {res.peak} bytes, lower bound {res.lower_bound}, greedy {res.stats.greedy_peak} "
        f"({res.stats.method}, {res.stats.nodes} search nodes, {time.perf_counter() - t0:.2f} s)",
        err=True,
    )
    if res.status is ArenaStatus.FIT:
        try:
            write_arena_csv(df.with_columns(pl.Series("offset", res.offsets)), output)
        except OptionError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None
        typer.echo(f"wrote {output}", err=True)
        raise typer.Exit(EXIT_FIT)
    if res.status is ArenaStatus.INFEASIBLE_PROVEN:
        typer.echo(f"infeasible: {_why(res, capacity)}; nothing written", err=True)
        raise typer.Exit(EXIT_INFEASIBLE)
    typer.echo("not proven: no placement found within the time limit and no proof of infeasibility; nothing written",
               err=True)
    raise typer.Exit(EXIT_NOT_PROVEN)


def _why(res, capacity: int) -> str:
    if res.lower_bound > capacity:
        return f"{res.lower_bound} bytes are live at once, above the capacity {capacity}"
    return "the exact search exhausted every canonical placement"
