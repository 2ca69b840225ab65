"""``toolkit profile ...``: crop, query and export cycle profiles."""

from __future__ import annotations

import typer

app = typer.Typer(help="Read, crop, query and export cycle profiles (simulated or hardware).", no_args_is_help=True)
