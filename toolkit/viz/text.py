"""Text that fits where it is shown: chart titles wrapped to the chart's width, compact HTML tables."""

from __future__ import annotations

import html
import math
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


#: average width of an axis label character in Vega's default 10 px sans-serif label font, and the room kept
#: between two labels, in pixels
LABEL_CHAR_PX = 6.0
LABEL_GAP_PX = 14.0
#: a delta axis names its zero; every other tick reads with thousands separators (a Vega label expression)
ZERO_LABEL = "datum.value == 0 ? '0 (no change)' : format(datum.value, ',')"


def delta_ticks(lo: float, hi: float, width_px: int) -> list[int]:
    """Tick values for an axis of changes over ``[lo, hi]`` drawn ``width_px`` wide: multiples of a 1-2-5
    step, so 0 is always one of them (labelled ``0 (no change)``), spaced so that the widest label clears its
    neighbours. Vega's own ticks hide labels that would overlap, and the one it hid was often the zero."""
    lo, hi = math.floor(min(lo, 0)), math.ceil(max(hi, 0))
    if lo == hi:
        return [0]
    for power in range(19):
        for mult in (1, 2, 5):
            step = mult * 10**power
            first, last = (lo // step) * step, -(-hi // step) * step
            # the widest label is the zero's or an end's (the longest numbers); the list is built only once it fits
            widest = max(len("0 (no change)"), len(f"{first:,}"), len(f"{last:,}")) * LABEL_CHAR_PX
            if width_px * step / (last - first) >= widest + LABEL_GAP_PX:
                return list(range(first, last + step, step))
    return [lo, 0, hi]


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


__all__ = ["LABEL_CHAR_PX", "TITLE_CHAR_PX", "ZERO_LABEL", "delta_ticks", "fit_title", "html_table"]
