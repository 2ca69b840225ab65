"""``LayoutExplorer``: move the row block and the layout pins, see cycles and peak SRAM move.

Every control change re-runs the layout search (every row block, the other
pins as set) and compiles the pinned layout; both are cached per option value,
so going back to a setting is instant. The Pareto chart and the per-row-block
trade-off chart are updated in place; the table lists every layout compiled so
far side by side (cycles, launches, exchange steps, peak SRAM).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as w
import polars as pl

from toolkit.errors import OptionError, ToolkitError, ToolkitWarning
from toolkit.graph import Graph, Workload
from toolkit.layout import LayoutResult, search_layouts
from toolkit.layout.search import pareto_front
from toolkit.options import CONSTRAINT_KEY, WEIGHT_CLASSES, Options, as_options
from toolkit.pipeline import Compilation, compile, resolve_graph
from toolkit.report import no_placed_peak
from toolkit.target import Target, ipu21
from toolkit.viz.layout import PARAMETERS, pareto, tradeoff
from toolkit.widgets.render import busy, chart_widget, html_table

#: compare_layouts columns after ``layout``: cycles named by what they are (lowered estimate, simulated, the ratio
#: of simulated to the real compiler's measured program for the workload), then summary columns
COMPARE_COLUMNS = ("lowered_cycles", "simulated_cycles", "vs_hardware", "lowered_compute_cycles",
                   "lowered_exchange_cycles", "lowered_sync_cycles", "lowered_launches", "kernel_calls",
                   "exchange_steps", "peak_sram_bytes", "screen_peak_bytes", "placed", "tiles_used", "row_block",
                   "row_shard", "inner_split", "plans", "weight_class", "fused_qkv", "evidence", "band_low",
                   "band_high")
#: what the explorer's comparison table shows: the layout, its numbers, what it placed (the rest: compare_layouts)
TABLE_COLUMNS = ("layout", "plans", "lowered_cycles", "simulated_cycles", "vs_hardware", "band_low", "band_high",
                 "evidence", "lowered_exchange_cycles", "lowered_launches", "peak_sram_bytes", "placed")
TABLE_TITLE = ("compiled layouts so far, side by side (cycles: lowered estimate and simulated; peak_sram_bytes: "
               "placed, the fullest tile, empty when the layout did not place)")
#: plans offered per GEMM control: the best by screen estimate (plus the chosen one)
PLAN_CHOICES = 10
#: a dropdown choice that leaves the parameter to the search
AUTO = ("auto", "auto")


def compare_layouts(compilations: Mapping[str, Compilation] | Sequence[Compilation]) -> pl.DataFrame:
    """One row per compilation, side by side: ``layout`` (the mapping key, or the pins that differ
    from the defaults) then ``COMPARE_COLUMNS`` from :meth:`Compilation.numbers` and :meth:`Compilation.summary`."""
    items = (list(compilations.items()) if isinstance(compilations, Mapping)
             else [(pin_label(c.options), c) for c in compilations])
    if not items:
        msg = "compilations is empty; pass at least one Compilation"
        raise OptionError(msg, field="compilations", value=0)
    rows = [compared_row(c).with_columns(pl.lit(str(k)).alias("layout")) for k, c in items]
    return pl.concat(rows, how="vertical_relaxed").select("layout", *COMPARE_COLUMNS)


def compared_row(c: Compilation) -> pl.DataFrame:
    """One compilation's compare row: its summary (every number named by what it is) with the simulated cycles
    and their ratio to the hardware."""
    summary = c.summary()
    n = c.numbers(summary).filter(pl.col("quantity") == "cycles")
    simulated = n.filter(pl.col("kind") == "simulated")
    sim = simulated["value"].item() if simulated.height else None
    ratio = simulated["vs_hardware"].item() if simulated.height else None
    ev = n.filter(pl.col("evidence").is_not_null()).select("evidence", "band_low", "band_high")
    ev = ev.row(0, named=True) if ev.height else {"evidence": None, "band_low": None, "band_high": None}
    return summary.with_columns(
        pl.lit(sim, dtype=pl.Int64).alias("simulated_cycles"), pl.lit(ratio, dtype=pl.Float64).alias("vs_hardware"),
        pl.lit(ev["evidence"], dtype=pl.String).alias("evidence"),
        pl.lit(ev["band_low"], dtype=pl.Float64).alias("band_low"),
        pl.lit(ev["band_high"], dtype=pl.Float64).alias("band_high"),
    ).select(list(COMPARE_COLUMNS))


def band_note(row: Mapping[str, Any]) -> str:
    """The prediction's error band and its evidence (``extrapolation`` named in red), for the status line."""
    if row.get("band_low") is None:
        return "no evidence table"
    text = (f"band {100 * row['band_low']:+.1f}% .. {100 * row['band_high']:+.1f}% against hardware; "
            f"{row['evidence']}")
    return f"<span style='color:darkorange'>{text}</span>" if str(row["evidence"]).startswith("extrapolation") else text


def peak_note(s: Mapping[str, Any]) -> str:
    """The peak SRAM of a summary row, saying whose figure it is: the placed peak, or (when the layout did not
    place) that there is none, with the screen's estimate."""
    why = no_placed_peak(s)
    if why is None:
        return f"peak {s['peak_sram_bytes']:,} B per tile (placed)"
    return (f"<span style='color:firebrick'>{why}: no placed peak</span> (screen estimate "
            f"{s['screen_peak_bytes']:,} B per tile)")


def hardware_note(table: pl.DataFrame, workload: str) -> str:
    """What the ``vs_hardware`` column is, and why it is empty where it is (never a blank without a reason)."""
    what = "vs hardware: simulated over the real compiler's own program for the workload, measured on hardware"
    missing = table["vs_hardware"].null_count()
    if missing == table.height:
        return f"vs hardware empty: no hardware measurement of {workload} as compiled here"
    return what + ("" if not missing else "; empty: no hardware measurement of that program")


def pin_label(options: Options) -> str:
    """The layout pins of ``options`` as ``name=value`` (``searched`` when nothing is pinned)."""
    pins = [f"{k}={getattr(options, k)}" for k in PARAMETERS if getattr(options, k, None) is not None]
    pins += [f"{op}={plan}" for op, plan in options.plans]
    return ", ".join(pins) or "searched"


class LayoutExplorer:
    """Controls (row-block slider; row shard, inner split, weight class, fused QKV; a plan per GEMM) over one workload.

    Each GEMM control offers the per-op plans the search screened best (``m x n x k``
    with its result grid); choosing one pins that op's plan, ``auto`` leaves it to the search.

    ``pins`` are :class:`toolkit.Options` fields: layout pins set the controls'
    starting values, other options (``tiles``, ``beam_width`` ...) apply to
    every compile. Display the explorer (or ``.widget``) in a notebook.
    """

    def __init__(self, workload: str | Workload | Graph, *, target: Target | None = None, history: int = 8,
                 **pins: Any) -> None:
        self.target = target or ipu21()
        self.graph = resolve_graph(workload)
        self.options = as_options(pins)
        self.history = history
        self._compiled: dict[Options, Compilation] = {}
        self._views: dict[Options, tuple] = {}   # per setting: status line, both charts, the comparison row
        self._searched: dict[Options, LayoutResult] = {}
        self._order: list[Options] = []
        self._programs: dict[int, tuple] = {}   # by id of a compilation held in _compiled
        self._quiet = False
        params = self.graph.params
        self._rows = int(params["tokens"])
        self._images = int(params["batch"])
        self._auto = self._compile(self._unpinned())   # the searched program, for "changes nothing" notes
        first = self._compile(self.options)
        chosen = first.layout.chosen
        blocks = sorted({*self.options.row_blocks, chosen.row_block, *([self.options.row_block]
                                                                       if self.options.row_block else [])})
        # "auto" leaves the row block to the search: every control has it, so all-auto is the searched program
        self.row_block = w.SelectionSlider(options=[AUTO, *((str(b), b) for b in blocks)],
                                           value=_control(self.options.row_block), description="row block",
                                           continuous_update=False)
        self.row_shard = w.Dropdown(description="row shard")
        self.inner_split = w.Dropdown(
            options=[AUTO, *((str(s), s) for s in sorted({*self.options.inner_splits, chosen.inner_split}))],
            value=_control(self.options.inner_split), description="inner split")
        self.weight_class = w.Dropdown(options=[AUTO, *((c, c) for c in WEIGHT_CLASSES)],
                                       value=_control(self.options.weight_class), description="weights")
        attention = params.get("kind") in ("attention", "encoder")
        # a control that cannot change the program says so in the value it shows
        self.fused_qkv = w.Dropdown(options=[AUTO, ("separate", False), ("fused", True)] if attention else
                                    [("none: no attention", AUTO[1])],
                                    value=_control(self.options.fused_qkv), description="QKV", disabled=not attention)
        self._set_shards(self.options.row_block or self._auto.layout.chosen.row_block, self.options.row_shard)
        self.gemm = self._gemm_controls(first)
        # ipu-stack's constraint lines of the compiled program; pasted lines pin their ops on "apply lines"
        self._pasted = tuple(text for key, text in self.options.plans if key == CONSTRAINT_KEY)
        self.constraint_lines = w.Textarea(description="ipu-stack", placeholder="OP:RxCxK:RRxRC:BLOCK:MEMORY:...",
                                           layout=w.Layout(width="70%", height="6em"))
        self.apply_lines = w.Button(description="apply lines", tooltip="pin the pasted constraint lines' ops")
        self.apply_lines.on_click(self._apply_lines)
        self.status = w.HTML()
        self.pareto_chart = chart_widget(None)
        self.tradeoff_chart = chart_widget(None)
        self.table = w.HTML()
        for control in (self.row_block, self.row_shard, self.inner_split, self.weight_class, self.fused_qkv,
                        *self.gemm.values()):
            control.observe(self._changed, names="value")
        self.widget = w.VBox([
            w.HBox([self.row_block, self.row_shard, self.inner_split]),
            w.HBox([self.weight_class, self.fused_qkv]),
            w.HBox(list(self.gemm.values())),
            w.HBox([self.constraint_lines, self.apply_lines]),
            self.status, self.pareto_chart, self.tradeoff_chart, self.table,
        ])
        self.compilation = first
        self.update()

    # -- state ---------------------------------------------------------------------
    def current_options(self) -> Options:
        """The options the controls select: a function of the controls' values alone (``auto`` searches; the
        applied ipu-stack lines pin their ops)."""
        plans = {op: v for op, c in self.gemm.items() if (v := _pin(c.value)) is not None}
        lines = tuple((CONSTRAINT_KEY, text) for text in self._pasted)
        return dataclasses.replace(
            self.options, row_block=_pin(self.row_block.value),
            row_shard=_pin(self.row_shard.value), inner_split=_pin(self.inner_split.value),
            weight_class=_pin(self.weight_class.value), fused_qkv=_pin(self.fused_qkv.value),
            plans=tuple(sorted((*plans.items(), *lines))))

    @property
    def candidates(self) -> pl.DataFrame:
        """Every row block's candidates under the current pins, ``chosen`` = the compiled layout."""
        return self._candidates(self.current_options(), self.compilation)

    def _candidates(self, opts: Options, compilation: Compilation) -> pl.DataFrame:
        """The search over every row block (the other pins as set), its rows of the compiled layout replaced by
        the compiled layout's own row (``chosen``, exactly one, with the numbers its own search gave it), and
        the Pareto front recomputed over the result."""
        search = self._search(dataclasses.replace(opts, row_block=None, row_shard=None))
        keys = [k for k in (*PARAMETERS, "partials", "plans") if k in search.candidates.columns]
        own = compilation.layout.candidates.filter(pl.col("chosen"))
        rest = search.candidates.join(own.select(keys), on=keys, how="anti", nulls_equal=True)
        own = own.with_columns(pl.lit(int(search.candidates["candidate_id"].max() or 0) + 1,
                                      dtype=search.candidates.schema["candidate_id"]).alias("candidate_id"))
        hit = pl.concat([rest.with_columns(pl.lit(False).alias("chosen")),
                         own.select([c for c in rest.columns if c in own.columns])], how="diagonal_relaxed")
        return hit.with_columns(pareto_front(hit).alias("pareto")).select(search.candidates.columns)

    def compared(self) -> pl.DataFrame:
        """The compiled layouts so far, most recent first (``compare_layouts`` columns). Settings that compiled
        the same program (the slider moved onto the searched row block) are one row, their labels joined."""
        recent = list(reversed(self._order))[: self.history]
        rows = pl.concat([self._view(o)[3].with_columns(pl.lit(pin_label(o)).alias("layout")) for o in recent],
                         how="vertical_relaxed").select("layout", *COMPARE_COLUMNS)
        same = [c for c in COMPARE_COLUMNS if c not in ("vs_hardware",)]
        return (rows.with_row_index("_at").group_by(same, maintain_order=True)
                .agg(pl.col("layout").str.join(" = "), pl.col("vs_hardware").first(), pl.col("_at").min())
                .sort("_at").select("layout", *COMPARE_COLUMNS))

    # -- updates -------------------------------------------------------------------
    def update(self) -> None:
        """Compile the selected layout (cached) and redraw the charts and the table in place."""
        opts = self.current_options()
        shown = pin_label(self.compilation.options)
        self.status.value = busy(f"compiling {pin_label(opts)}" if opts not in self._views
                                 else f"drawing {pin_label(opts)}")
        try:
            self.compilation = self._compile(opts)
            status, pareto_chart, tradeoff_chart, _ = self._view(opts)
            self._shown(opts)
        except ToolkitError as err:
            self.status.value = (f"<span style='color:firebrick'>{pin_label(opts)}: {err}</span><br><small>the "
                                 f"charts below still show the last layout that compiled: {shown}</small>")
            return
        with warnings.catch_warnings():   # what a line cannot say is the compiled layout's, shown by its labels
            warnings.simplefilter("ignore", ToolkitWarning)
            self.constraint_lines.value = "\n".join(self.compilation.layout.constraints())
        self.pareto_chart.chart = pareto_chart
        self.tradeoff_chart.chart = tradeoff_chart
        self._label_plans(self.compilation)
        table = self.compared().select(TABLE_COLUMNS)
        self.table.value = html_table(table, title=f"{TABLE_TITLE}; {hardware_note(table, self.graph.name)}")
        # the status's final line comes last, as in the other explorers: once it names the setting, every other
        # output (dropdown marks, charts, table) already shows that setting, never the one before
        self.status.value = status + self._unchanged(opts)

    def _view(self, opts: Options) -> tuple[str, Any, Any, pl.DataFrame]:
        """What one setting shows (built once per setting; the chart objects are reused, so their widgets
        skip the compile): the status line, the Pareto and trade-off charts, its comparison row."""
        if opts not in self._views:
            c = self._compile(opts)
            cand = self._candidates(opts, c)
            summary = c.summary()
            s = summary.row(0, named=True)
            status = (f"<b>{self.graph.name}</b> {pin_label(opts)} &rarr; {self._shape(c, s)}: "
                      f"{s['lowered_cycles']:,} cycles (lowered estimate), {s['lowered_launches']:,} launches, "
                      f"{s['exchange_steps']:,} exchange steps, " + peak_note(s)
                      + "<br><small>" + band_note(compared_row(c).row(0, named=True)) + "</small>")
            # the row block's own points and the whole front: a redraw sends hundreds of points, not thousands
            self._views[opts] = (status, pareto(cand, color="local_rows", row_block=s["row_block"], context=False),
                                 tradeoff(cand, x="local_rows"), compared_row(c))
        return self._views[opts]

    def _shape(self, c: Compilation, s: dict) -> str:
        """What the compiled layout is: its per-op plans with each op's local rows (ceil(rows / m), the row
        block a plan really runs), or the global grid when no op has a plan of its own."""
        plans = c.layout.chosen.plans
        if not plans:
            return f"row_block={s['row_block']} row_shard={s['row_shard']} inner_split={s['inner_split']}"
        ops = {op["name"]: op for op in c.graph.ops.iter_rows(named=True)}
        tokens = int(c.graph.params["tokens"])
        local = ", ".join(f"{name.rsplit('.', 1)[-1]} {c.layout.chosen.local_rows(ops[name], tokens)}"
                          for name, _ in plans if name in ops)
        return f"plans {s['plans']} (local rows: {local})"

    def _unchanged(self, opts: Options) -> str:
        """A note on pins that cannot change the program: all of them when the program is the searched one,
        else each pin whose removal compiles the same program (when that compile is at hand)."""
        if opts == self._unpinned():
            return ""
        program = self._program(self.compilation)
        if program == self._program(self._auto):
            return f"<br><small>changes nothing: {pin_label(opts)} compiles the searched program</small>"
        names = [k for k in ("row_block", "row_shard", "inner_split", "weight_class", "fused_qkv")
                 if getattr(opts, k) is not None]
        same = []
        for name in [*names, *(op for op, _ in opts.plans)]:
            without = (dataclasses.replace(opts, **{name: None}) if name in names else
                       dataclasses.replace(opts, plans=tuple(p for p in opts.plans if p[0] != name)))
            if without in self._compiled and self._program(self._compiled[without]) == program:
                same.append(f"{name}={dict(opts.plans).get(name, getattr(opts, name, None))} compiles the same "
                            f"program as {name}=auto")
        return f"<br><small>changes nothing: {'; '.join(same)}</small>" if same else ""

    def _program(self, c: Compilation) -> tuple:
        """:func:`_program` of ``c``, once per compilation (a summary expands the program)."""
        key = id(c)
        if key not in self._programs:
            self._programs[key] = _program(c)
        return self._programs[key]

    def _label_plans(self, c: Compilation) -> None:
        """Each GEMM dropdown marks the plan the shown program runs "(chosen)" (it marked the first program's)."""
        chosen = {name.rsplit(".", 1)[-1]: g.label() for name, g in c.layout.chosen.plans}
        self._quiet = True
        try:
            for short, control in self.gemm.items():
                labels = list(dict.fromkeys([*self._plan_choices[short], *(x for x in (chosen.get(short),
                                                                                     _pin(control.value)) if x)]))
                options = [AUTO, *((lab + (" (chosen)" if lab == chosen.get(short) else ""), lab) for lab in labels)]
                if list(control.options) != options:
                    value = control.value
                    control.options = options
                    control.value = value
        finally:
            self._quiet = False

    def _unpinned(self) -> Options:
        """The options with every control on auto."""
        return dataclasses.replace(self.options, row_block=None, row_shard=None, inner_split=None,
                                   weight_class=None, fused_qkv=None, plans=())

    def _changed(self, change: dict) -> None:
        if self._quiet:
            return
        if change["owner"] is self.row_block:
            row_block = _pin(self.row_block.value) or self._auto.layout.chosen.row_block
            self._set_shards(row_block, _pin(self.row_shard.value))
        self.update()

    def _apply_lines(self, _button: Any = None) -> None:
        """Pin the ops of the pasted constraint lines (their GEMM controls go back to auto) and compile."""
        self._pasted = tuple(line.strip() for line in self.constraint_lines.value.splitlines() if line.strip())
        self._quiet = True
        try:
            for control in self.gemm.values():
                control.value = AUTO[1]
        finally:
            self._quiet = False
        self.update()

    def _gemm_controls(self, first: Compilation) -> dict[str, w.Dropdown]:
        """One dropdown per linear op of the compiled graph: auto, the best screened plans and the chosen one."""
        per_op = self._auto.layout.op_candidates
        chosen = {name.rsplit(".", 1)[-1]: g.label() for name, g in first.layout.chosen.plans}
        pinned = dict(self.options.plans)
        self._plan_choices: dict[str, list[str]] = {}
        out = {}
        for op in per_op["op"].unique(maintain_order=True).to_list():
            short = op.rsplit(".", 1)[-1]
            best = (per_op.filter(pl.col("op") == op).sort("est_cycles", "weight_bytes")
                    .unique("plan", maintain_order=True).head(PLAN_CHOICES)["plan"].to_list())
            self._plan_choices[short] = best
            labels = list(dict.fromkeys([*(x for x in (chosen.get(short), pinned.get(short)) if x), *best]))
            out[short] = w.Dropdown(options=[AUTO, *((f"{lab}" + (" (chosen)" if lab == chosen.get(short) else ""),
                                                      lab) for lab in labels)],
                                    value=pinned.get(short, AUTO[1]), description=short)
        return out

    def _set_shards(self, row_block: int, keep: int | None) -> None:
        """Row-shard choices for ``row_block``: auto and the shards the search enumerates."""
        n_r = self._images * math.ceil(self._rows / min(row_block, self._rows))
        shards = sorted({max(1, math.ceil(n_r / d)) for d in (1, 2, 4, 8, 16, 32, 64)} | {1, 2})
        self._quiet = True
        try:
            self.row_shard.options = [AUTO, *((str(s), s) for s in shards)]
            self.row_shard.value = keep if keep in shards else AUTO[1]
        finally:
            self._quiet = False

    def _compile(self, opts: Options) -> Compilation:
        if opts not in self._compiled:
            self._compiled[opts] = compile(self.graph, self.target, opts)
            if opts.row_block is None and opts.row_shard is None:   # its search already spans every row block
                self._searched.setdefault(opts, self._compiled[opts].layout)
        return self._compiled[opts]

    def _shown(self, opts: Options) -> None:
        """Record ``opts`` as the most recently shown setting (the comparison table's order)."""
        if opts in self._order:
            self._order.remove(opts)
        self._order.append(opts)

    def _search(self, opts: Options) -> LayoutResult:
        if opts not in self._searched:
            from toolkit.evidence import with_evidence  # each candidate's evidence, from its plan kinds
            self._searched[opts] = with_evidence(search_layouts(self.graph, self.target, opts))
        return self._searched[opts]

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


def _program(c: Compilation) -> tuple:
    """What makes two compilations the same program: the chosen layout's plans and numbers."""
    s = c.summary().row(0, named=True)
    return (s["plans"], s["row_block"], s["row_shard"], s["inner_split"], s["weight_class"], s["lowered_cycles"],
            s["peak_sram_bytes"], s["screen_peak_bytes"])


def _pin(value: Any) -> Any:
    """A control value as an option pin (``auto`` searches)."""
    return None if isinstance(value, str) and value == AUTO[1] else value


def _control(pin: Any) -> Any:
    """An option pin as a control value."""
    return AUTO[1] if pin is None else pin
