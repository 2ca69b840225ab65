"""How the CLI prints a frame: a table that fits the terminal, or one record per block when it cannot.

A cell is never split inside a number and a name is never cut into pieces:
every column is at least as wide as its longest word (numbers are one word),
text wraps at spaces inside its column, and a frame whose columns cannot all
fit side by side at those widths is printed vertically (``field  value``, one
block per row, long values wrapped at spaces). ``--json`` prints every row
and column in full. The width is the terminal's (``COLUMNS`` when set; 80 on
a pipe).
"""

from __future__ import annotations

import shutil
import textwrap

import polars as pl
import typer

#: a column of words longer than this wraps inside the word rather than widening the table past the terminal
LONGEST_WORD = 32
#: "| " before, " " after each column, and the closing "|"
GUTTER = 3


def terminal_width() -> int:
    """The width to print to: ``COLUMNS`` when set, else the terminal's, else 80 (a pipe)."""
    return shutil.get_terminal_size((80, 24)).columns


def cell(value: object) -> str:
    """One value as the table shows it: ints with thousands separators, floats from 1,000 up to one decimal,
    smaller ones to 4 significant digits."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.1f}" if 1e3 <= abs(value) < 1e15 else f"{value:.4g}"
    return str(value)


def render(df: pl.DataFrame, title: str, *, width: int | None = None) -> list[str]:
    """The lines that print ``df`` under ``title`` within ``width`` columns (see the module docstring)."""
    width = width or terminal_width()
    rows = [[cell(v) for v in row] for row in df.iter_rows()]
    numeric = [dt.is_numeric() for dt in df.dtypes]
    need = [max([_longest_word(name), *(_longest_word(r[i], cap=not numeric[i]) for r in rows)])
            for i, name in enumerate(df.columns)]
    full = [max([len(name), *(len(r[i]) for r in rows)]) for i, name in enumerate(df.columns)]
    head = textwrap.wrap(title, width, break_long_words=False) or [""]
    if df.width and sum(need) + GUTTER * df.width + 1 <= width:
        return head + _table(df.columns, rows, numeric, _widths(need, full, width))
    note = f"({df.height} row(s); too wide for {width} columns, shown one row per block; --json for the table)"
    return head + textwrap.wrap(note, width) + _vertical(df.columns, rows, width)


def legend(meanings: dict[str, str], columns: list[str], *, width: int | None = None) -> list[str]:
    """The lines under a table that say what each of its ``columns`` named in ``meanings`` is (its kind of
    number, unit and scope), each wrapped to ``width`` (the terminal's by default)."""
    width = width or terminal_width()
    return [line for name in columns if name in meanings
            for line in textwrap.wrap(f"{name}: {meanings[name]}", width, subsequent_indent="    ")]


def show(df: pl.DataFrame, title: str, *, as_json: bool = False) -> None:
    """Print a frame as a table that fits the terminal (or as JSON records)."""
    if as_json:
        typer.echo(df.write_json())
        return
    typer.echo("\n".join(render(df, title)))


# -- helpers ---------------------------------------------------------------------
def _longest_word(text: str, *, cap: bool = True) -> int:
    longest = max((len(w) for w in text.split()), default=0)
    return min(longest, LONGEST_WORD) if cap else longest


def _widths(need: list[int], full: list[int], width: int) -> list[int]:
    """Give every column its need, then widen the columns that would wrap: those whose full width fits in
    what is left first, fewest missing characters first, then the rest of the room to the widest."""
    widths = list(need)
    room = width - (sum(widths) + GUTTER * len(widths) + 1)
    for i in sorted(range(len(widths)), key=lambda j: full[j] - widths[j]):
        gap = full[i] - widths[i]
        if 0 < gap <= room:
            widths[i], room = full[i], room - gap
    short = [i for i in range(len(widths)) if widths[i] < full[i]]
    if short and room > 0:
        i = max(short, key=lambda j: full[j] - widths[j])
        widths[i] += room
    return widths


def _table(names: list[str], rows: list[list[str]], numeric: list[bool], widths: list[int]) -> list[str]:
    def lines(cells: list[str], right: list[bool]) -> list[str]:
        wrapped = [textwrap.wrap(c, w, break_long_words=True, break_on_hyphens=False) or [""]
                   for c, w in zip(cells, widths, strict=True)]
        height = max(len(p) for p in wrapped)
        out = []
        for k in range(height):
            parts = [(p[k] if k < len(p) else "") for p in wrapped]
            out.append("| " + " | ".join(s.rjust(w) if r else s.ljust(w)
                                         for s, w, r in zip(parts, widths, right, strict=True)) + " |")
        return out

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = [line for r in rows for line in lines(r, numeric)]
    return [*lines(names, [False] * len(names)), rule, *body]


def _vertical(names: list[str], rows: list[list[str]], width: int) -> list[str]:
    key = min(max(len(n) for n in names), width // 3)
    room = max(width - key - 2, 16)
    out: list[str] = []
    for k, row in enumerate(rows):
        out.append(f"-- row {k + 1} " + "-" * max(width - len(f"-- row {k + 1} "), 0))
        for name, value in zip(names, row, strict=True):
            label = textwrap.wrap(name, key, break_long_words=True) or [""]
            text = textwrap.wrap(value, room, break_long_words=True, break_on_hyphens=False) or [""]
            for j in range(max(len(label), len(text))):
                left = label[j] if j < len(label) else ""
                right = text[j] if j < len(text) else ""
                out.append(f"{left.ljust(key)}  {right}".rstrip())
    return out
