"""The toolkit's exception family.

Every error a user can cause says what was wrong, where, the numbers involved
and, where there is one, a hint. Context (``field``, ``value``, ``tile``,
``op``, ``file``) is attached as attributes so callers and tests can inspect it
without parsing the message.
"""

from __future__ import annotations

from typing import Any

import polars as pl

MAX_SHOWN_ROWS = 20


class ToolkitError(Exception):
    """Base class of every error the toolkit raises on purpose."""

    def __init__(
        self,
        msg: str,
        *,
        field: str | None = None,
        value: Any = None,
        tile: int | None = None,
        op: str | None = None,
        row: int | None = None,
    ) -> None:
        super().__init__(msg)
        self.field = field
        self.value = value
        self.tile = tile
        self.op = op
        self.row = row


class ModelError(ToolkitError, ValueError):
    """A model, workload or shape that cannot be built (bad sizes, unknown names)."""


class OptionError(ToolkitError, ValueError):
    """An option or target override that is unknown or out of range."""


class InfeasibleError(ToolkitError):
    """The request is well formed but no plan satisfies it (pins, capacity)."""


class FormatError(ToolkitError, ValueError):
    """A file that cannot be read: names the file, the offset or field, and what was expected."""

    def __init__(
        self,
        msg: str,
        *,
        file: str | None = None,
        offset: int | None = None,
        field: str | None = None,
        value: Any = None,
        tile: int | None = None,
    ) -> None:
        where = f"{file}: " if file is not None else ""
        super().__init__(where + msg, field=field, value=value, tile=tile)
        self.file = file
        self.offset = offset


class InvalidIRError(ToolkitError):
    """A stage produced tables that break an invariant: a bug in the toolkit.

    Carries the offending rows (at most ``MAX_SHOWN_ROWS`` are shown in the
    message; ``rows`` holds them all).
    """

    def __init__(self, msg: str, rows: pl.DataFrame | None = None, **context: Any) -> None:
        self.rows = rows
        if rows is not None and rows.height:
            shown = rows.head(MAX_SHOWN_ROWS)
            more = rows.height - shown.height
            with pl.Config(tbl_rows=MAX_SHOWN_ROWS, tbl_cols=12, fmt_str_lengths=40):
                msg = f"{msg}\n{shown}"
            if more:
                msg += f"\n... and {more} more offending rows"
        super().__init__(msg, **context)


class ToolkitWarning(UserWarning):
    """Something the toolkit did that the caller should know of, though nothing failed (a field a format
    cannot say, for instance)."""


class NoEffectWarning(ToolkitWarning):
    """An option, switch or pin that is legal but changes nothing for this graph (it names the field and why)."""
