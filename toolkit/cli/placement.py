"""``toolkit placement ...``: single-arena placement problems."""

from __future__ import annotations

import typer

app = typer.Typer(help="Solve and inspect SRAM placement problems.", no_args_is_help=True)
