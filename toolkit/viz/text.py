"""Text that fits where it is shown: chart titles wrapped to the chart's width, compact HTML tables."""

from __future__ import annotations

import html
import textwrap
from collections.abc import Iterable

import polars as pl

#: average width of a title character in Vega's default bold 13 px sans-serif title font, in pixels
TITLE_CHAR_PX = 7.0


def fit_title(lines: str | Iterable[str], width_px: int) -> str | list[str]:
    """``lines`` (one string or several) wrapped so no title line is wider than ``width_px``: a long line (a
    plan listing, a sentence) becomes several, broken at spaces, never cut. One line comes back as a string:
    VegaFusion reads a one-element title list as an expression (and fails on a ``;`` in it)."""
    lines = [lines] if isinstance(lines, str) else list(lines)
    chars = max(20, int(width_px / TITLE_CHAR_PX))
    out: list[str] = []
    for line in lines:
        out.extend(textwrap.wrap(line, chars, break_long_words=False) or [""])
    return out[0] if len(out) == 1 else out


#: inline styles, so a table reads the same in a notebook widget and in an offline report page
_TABLE = "border-collapse:collapse;font-size:12px;margin:4px 0"
_CELL = "padding:2px 8px;border-bottom:1px solid #ddd;text-align:{align};white-space:nowrap"


def html_table(df: pl.DataFrame, max_rows: int = 200, *, title: str = "") -> str:
    """A compact HTML table of at most ``max_rows`` rows (a bold ``title`` first): column names with spaces,
    numbers right-aligned with thousands separators, nulls blank."""
    numeric = [dt.is_numeric() for dt in df.dtypes]
    # headers wrap at their spaces (the names are written with spaces), so a wide table still fits the page
    th = _CELL.format(align="left").replace("white-space:nowrap", "white-space:normal") + ";font-weight:bold"
    head = "".join(f"<th style='{th}'>{html.escape(c.replace('_', ' '))}</th>" for c in df.columns)
    # numbers never wrap; text wraps at spaces within a bounded width, so a long plan or source does not
    # widen the table past the page
    left = _CELL.format(align="left").replace("white-space:nowrap", "white-space:normal;max-width:26em")
    right = _CELL.format(align="right") + ";font-variant-numeric:tabular-nums"
    rows = []
    for row in df.head(max_rows).iter_rows():   # a bounded table (layouts, phases, kernels), never per sample
        cells = (f"<td style='{left}'>{html.escape(str(v))}</td>" if not num else f"<td style='{right}'></td>"
                 if v is None else f"<td style='{right}'>{v:,.3g}</td>" if isinstance(v, float) and abs(v) < 10
                 else f"<td style='{right}'>{v:,.1f}</td>" if isinstance(v, float)
                 else f"<td style='{right}'>{v:,}</td>"
                 for v, num in zip(row, numeric, strict=True))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = f"<p>... and {df.height - max_rows:,} more rows</p>" if df.height > max_rows else ""
    caption = f"<b>{html.escape(title)}</b>" if title else ""
    return (f"{caption}<table style='{_TABLE}'><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody>"
            f"</table>{more}")


__all__ = ["TITLE_CHAR_PX", "fit_title", "html_table"]
