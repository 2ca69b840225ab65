"""Layout trade-off charts: every candidate's cycles against its peak SRAM, and the best per parameter value.

Both functions take ``layout.candidates`` (``CANDIDATES_SCHEMA`` of
:mod:`toolkit.layout.search`), reduce it in polars, and return an altair chart
built on the reduced frame; the tests read ``chart.to_dict()``. Candidates the
screen rejected before estimating cycles (null ``est_cycles``) cannot be drawn
on the cycles axis: they are counted in the title instead.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from toolkit.errors import OptionError
from toolkit.layout.search import pareto_front
from toolkit.viz.text import fit_title

DEFAULT_MAX_ROWS = 20_000   # one point per candidate: the search screens about 5,000-10,000 layouts
PARAMETERS = ("row_block", "local_rows", "stream_block", "row_shard", "panel_groups", "inner_split", "inner_block",
              "weight_class", "fused_qkv", "stream_weights")
STATUSES = ("chosen", "pareto", "feasible", "rejected")
_NEEDED = ("candidate_id", "est_cycles", "peak_live_bytes", "feasible", "pareto", "chosen")
_TOOLTIP = ("candidate_id", *PARAMETERS, "plans", "status", "est_cycles", "peak_live_bytes", "launches",
            "sched_cycles", "reject_reason")


def pareto(candidates: pl.DataFrame, *, color: str = "row_block", row_block: int | None = None,
           max_rows: int = DEFAULT_MAX_ROWS, context: bool = True) -> alt.LayerChart:
    """Estimated cycles (x) against peak live bytes per tile (y) for every estimated candidate.

    Points are coloured by ``color`` (a layout parameter column) and shaped by
    feasibility; the Pareto front (feasible, not dominated in both) is a step
    line; the chosen candidate is ringed. With ``row_block``, candidates of other
    row blocks fade, so a slider can walk through the row blocks on one scale; with ``context=False`` they are
    left out (the front and the chosen point stay, the scales still span every candidate), which keeps an
    explorer's redraw to the points of one row block.
    """
    if color not in PARAMETERS:
        msg = f"color={color!r} is not a layout parameter column; use one of {list(PARAMETERS)}"
        raise OptionError(msg, field="color", value=color)
    cand = _columns(candidates, (*_NEEDED, color))
    if row_block is not None and "row_block" not in cand.columns:
        msg = "row_block= needs a 'row_block' column in candidates"
        raise OptionError(msg, field="row_block", value=row_block)
    drawn = cand.filter(pl.col("est_cycles").is_not_null() & pl.col("peak_live_bytes").is_not_null())
    _guard(drawn.height, max_rows, "pareto draws one point per estimated candidate")
    # the front of what is drawn, computed here: a candidate added to a search's frame (a pinned layout) is on
    # the front only if nothing drawn dominates it, and the front never keeps a point it dominates
    drawn = drawn.with_columns(pareto_front(drawn).alias("pareto"))
    focus = pl.lit(True) if row_block is None else pl.col("row_block") == row_block
    data = drawn.with_columns(
        pl.when(pl.col("chosen")).then(pl.lit("chosen"))
        .when(pl.col("pareto")).then(pl.lit("pareto"))
        .when(pl.col("feasible")).then(pl.lit("feasible"))
        .otherwise(pl.lit("rejected")).alias("status"),
        focus.alias("focus"),
    )
    # one row per candidate reaches the browser (thousands): only the columns drawn or that say what a point is
    # (a parameter that is null for every candidate, or the same for all, is left out of the payload)
    said = [c for c in _TOOLTIP if c in data.columns and (c in _NEEDED or c in ("status", "plans", color)
                                                          or data[c].n_unique() > 1)]
    keep = dict.fromkeys([*said, color, "row_block", "feasible", "pareto", "chosen", "focus"])
    data = data.select([c for c in keep if c in data.columns])
    values = data[color].drop_nulls().unique().sort().to_list()   # the colour scale spans every candidate
    if not context and row_block is not None:
        data = data.filter(pl.col("focus") | pl.col("pareto") | pl.col("chosen"))
    tooltip = [alt.Tooltip(c, format=",") if c in ("est_cycles", "peak_live_bytes", "sched_cycles") else alt.Tooltip(c)
               for c in data.columns if c in _TOOLTIP]
    low, high = drawn["est_cycles"].min(), drawn["est_cycles"].max()
    wide = low is not None and high is not None and low > 0 and high > 10 * low   # a decade or more: log axis
    span = [low, high] if low is not None else alt.Undefined
    peak = ([drawn["peak_live_bytes"].min(), drawn["peak_live_bytes"].max()] if drawn.height else alt.Undefined)
    x = alt.X("est_cycles:Q", title="screen estimate, cycles" + (" (log)" if wide else ""),
              axis=alt.Axis(labelOverlap="greedy", labelSeparation=6),   # log ticks crowd: never overprint
              scale=alt.Scale(type="log", nice=False, padding=14, domain=span) if wide
              else alt.Scale(zero=False, padding=14, domain=span))
    # padded scales: a point at the edge of the data (the chosen ring is 20 px across) is drawn whole; the domains
    # span every candidate, drawn or not
    y = alt.Y("peak_live_bytes:Q", title="peak live bytes per tile (screen estimate)",
              scale=alt.Scale(zero=False, padding=14, domain=peak))
    points = alt.Chart(data).mark_point(filled=True, size=45).encode(
        x=x, y=y,
        color=(alt.Color(f"{color}:O", title=color, scale=alt.Scale(scheme="viridis", domain=values))
               if data.schema[color].is_numeric() else alt.Color(f"{color}:N", title=color,
                                                                 scale=alt.Scale(domain=values))),
        # a legend entry only for a class drawn: no "false" entry when every drawn candidate is feasible
        shape=alt.Shape("feasible:N", title="feasible", scale=alt.Scale(
            domain=[v for v in (True, False) if v in set(data["feasible"].to_list())],
            range=[m for v, m in ((True, "circle"), (False, "cross")) if v in set(data["feasible"].to_list())])),
        opacity=alt.condition("datum.focus", alt.value(0.9), alt.value(0.12)),
        tooltip=tooltip,
    )
    front = data.filter(pl.col("pareto")).sort("est_cycles", "peak_live_bytes")
    front_line = alt.Chart(front).mark_line(
        interpolate="step-after", color="black", strokeWidth=1.2, opacity=0.7).encode(x=x, y=y, order="est_cycles:Q")
    picked = data.filter(pl.col("chosen"))
    ring = alt.Chart(picked).mark_point(shape="circle", size=320, filled=False, color="red", strokeWidth=2.5).encode(
        x=x, y=y, tooltip=tooltip)
    label = alt.Chart(picked).mark_text(align="left", dx=12, dy=-10, color="red", fontWeight="bold").encode(
        x=x, y=y, text=alt.value("chosen"))
    return alt.LayerChart(layer=[points, front_line, ring, label], width=560, height=360,
                          title=fit_title(_title(cand, drawn, picked, row_block, context), 560))


def tradeoff(candidates: pl.DataFrame, x: str = "row_block", *, max_rows: int = DEFAULT_MAX_ROWS
             ) -> alt.HConcatChart:
    """For every value of the layout parameter ``x``: the fewest estimated cycles over feasible
    candidates, and beside it the peak live bytes of that fastest candidate and the smallest peak.
    The chosen candidate's value is drawn in red on both panels.
    """
    if x not in PARAMETERS:
        msg = f"x={x!r} is not a layout parameter column; use one of {list(PARAMETERS)}"
        raise OptionError(msg, field="x", value=x)
    cand = _columns(candidates, (*_NEEDED, x))
    feas = cand.filter(pl.col("feasible") & pl.col("est_cycles").is_not_null())
    chosen_x = cand.filter(pl.col("chosen"))[x].to_list()
    best = (
        feas.sort("est_cycles", "peak_live_bytes", "candidate_id")
        .group_by(x, maintain_order=True)
        .agg(
            pl.col("est_cycles").first().alias("best_cycles"),
            pl.col("peak_live_bytes").first().alias("fastest_peak_bytes"),
            pl.col("peak_live_bytes").min().alias("smallest_peak_bytes"),
            pl.col("candidate_id").first().alias("fastest_candidate"),
            pl.len().alias("feasible_candidates"),
        )
        .sort(x, nulls_last=True)
        .with_columns(pl.col(x).is_in(pl.Series(chosen_x, dtype=cand.schema[x]).implode()).alias("chosen"))
    )
    _guard(best.height * 2, max_rows, f"tradeoff draws two rows per {x} value")
    xe = alt.X(f"{x}:O", title=x, sort=None)
    tooltip = [alt.Tooltip(c, format=",") if c.endswith(("_cycles", "_bytes")) else alt.Tooltip(c)
               for c in best.columns]
    red = alt.condition("datum.chosen", alt.value("red"), alt.value("steelblue"))
    base = alt.Chart(best)
    cycles = (base.mark_line(color="steelblue").encode(x=xe, y=alt.Y("best_cycles:Q", title="cycles (screen estimate)"))
              + base.mark_point(filled=True, size=70).encode(x=xe, y="best_cycles:Q", color=red, tooltip=tooltip)
              ).properties(width=300, height=240, title=f"fewest cycles (screen estimate) by {x}")
    peaks = best.unpivot(index=[x, "chosen"], on=["fastest_peak_bytes", "smallest_peak_bytes"],
                         variable_name="which", value_name="bytes").with_columns(
        pl.col("which").replace_strict(SERIES))
    # one channel per series: a dash channel with its legend switched off took the colour legend with it
    memory = alt.Chart(peaks).mark_line(point=True).encode(
        x=xe, y=alt.Y("bytes:Q", title="peak live bytes per tile"),
        color=alt.Color("which:N", legend=alt.Legend(title="peak of", orient="bottom"), sort=list(SERIES.values())),
        tooltip=[x, "which", alt.Tooltip("bytes:Q", format=","), "chosen"],
    ).properties(width=300, height=240, title=f"peak live bytes by {x}")
    return alt.hconcat(cycles, memory).properties(
        title=fit_title(f"{feas.height} feasible of {cand.height} candidates; chosen {x} = "
                        + (", ".join(str(v) for v in chosen_x) or "none"), 640))


#: the trade-off chart's memory series, as its legend names them
SERIES = {"fastest_peak_bytes": "the fastest candidate", "smallest_peak_bytes": "the smallest candidate"}


# -- helpers ------------------------------------------------------------------------
def _columns(candidates: pl.DataFrame, needed: tuple[str, ...]) -> pl.DataFrame:
    if not isinstance(candidates, pl.DataFrame):
        msg = f"candidates must be a polars DataFrame (layout.candidates), got {type(candidates).__name__}"
        raise OptionError(msg, field="candidates", value=type(candidates).__name__)
    missing = [c for c in dict.fromkeys(needed) if c not in candidates.columns]
    if missing:
        msg = f"candidates lacks columns {missing}; pass compilation.layout.candidates"
        raise OptionError(msg, field="candidates", value=missing)
    return candidates


def _guard(rows: int, max_rows: int, what: str) -> None:
    if rows > max_rows:
        msg = f"{what}: {rows:,} rows > max_rows={max_rows:,}; filter the candidates or raise max_rows"
        raise OptionError(msg, field="max_rows", value=max_rows)


def _title(cand: pl.DataFrame, drawn: pl.DataFrame, picked: pl.DataFrame, row_block: int | None,
           context: bool = True) -> list[str]:
    feasible = int(cand["feasible"].sum())
    on_front = int(drawn["pareto"].sum())
    head = (f"{cand.height} candidates, {feasible} feasible, {on_front} on the Pareto front"
            + (f"; {cand.height - drawn.height} rejected before costing" if drawn.height < cand.height else ""))
    if picked.height == 0:
        return [head, "no candidate chosen", *_showing(row_block, context)]
    p = picked.row(0, named=True)
    # a stream block or local rows equal to the row block say nothing new
    same = {"stream_block": p.get("row_block"), "local_rows": p.get("row_block")}
    grid = ("row_shard", "panel_groups", "inner_split", "inner_block") if p.get("plans") else ()  # unused by plans
    params = " ".join(f"{k}={p[k]}" for k in PARAMETERS
                      if k in p and p[k] is not None and k not in grid and (k not in same or p[k] != same[k]))
    if p.get("plans"):
        params += f" plans: {p['plans']}"
    last = (f"chosen: {p['est_cycles']:,} cycles (screen estimate), {p['peak_live_bytes']:,} B peak per tile "
            f"(screened)")
    return [head, f"chosen: {params}", last, *_showing(row_block, context)]


def _showing(row_block: int | None, context: bool) -> list[str]:
    if row_block is None:
        return []
    return [f"showing row_block={row_block}" + ("" if context else " (other row blocks: their front only)")]
