"""What every headline number of a compilation is, where it comes from, and how far it is from hardware.

A compilation carries several numbers for one quantity: the layout search's
screen estimate (O(1) per op, every operand panel counted as received), its
refined estimate (every operand routed), the lowered estimate (compute as
scheduled, exchange phases as lowered), the simulated profile (cropped as the
hardware renderer crops it) and, where the real compiler's program for the
same workload was measured on a C600, that measurement
(:func:`hardware_programs`). :func:`numbers` puts them in one frame, each
with its kind, unit and source, and the ratio to the hardware figure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import polars as pl

#: kinds of number, in the order a reader meets them
KINDS = ("screen estimate", "refined estimate", "lowered estimate", "simulated", "measured on hardware", "placed",
         "count", "checked")
NUMBERS_SCHEMA = {
    "quantity": pl.String, "kind": pl.String, "value": pl.Float64, "unit": pl.String,
    "vs_hardware": pl.Float64,    # value / the hardware's figure (cycles; the check's max abs error) where one exists
    "source": pl.String,
    # the whole-program prediction's evidence (toolkit.evidence), on the simulated cycles row (the lowered
    # estimate's without a profile): the measured programs sharing its plan kinds, or "extrapolation: ...", and
    # its relative error band (prediction / hardware - 1) from their residuals; null on every other row
    "evidence": pl.String, "band_low": pl.Float64, "band_high": pl.Float64,
}
#: ``toolkit/data/hardware_programs.csv``, the one table of the real compiler's measured programs: one row per
#: hardware figure. ``workload`` names the figure (the seeds' case directories keep their names, others are
#: ``<preset>/<case>``); ``preset``, ``batch``, ``blocks`` and ``graph`` (JSON: further workload fields, e.g.
#: ``{"fused_qkv": true}``) are the graph that ran, built by ``toolkit.build_graph``; ``options`` (JSON) are the
#: compile options that express its program (weight format, pinned GEMM plans); ``lines`` the same program as
#: ipu-stack's ``--gemm-plan-constraint`` lines where its docs print them (``;``-separated, empty otherwise);
#: ``families`` the experiment families it belongs to (``;``-separated), ``member`` its label there and
#: ``control_of`` the families whose control it is (:func:`plan_experiments` is that view); ``region`` the part
#: of the program the figure measures (empty: the whole program, renderer-cropped; else a region of
#: :func:`toolkit.profile.region_cycles`, e.g. ``layer[1:]`` for a repeat-remainder sample); ``missing`` names
#: what we cannot express yet (empty: the row compiles as the hardware ran it)
HARDWARE_SCHEMA = {"workload": pl.String, "preset": pl.String, "batch": pl.Int64, "blocks": pl.Int64,
                   "graph": pl.String, "options": pl.String, "lines": pl.String, "hardware_cycles": pl.Int64,
                   "families": pl.String, "member": pl.String, "control_of": pl.String, "source": pl.String,
                   "note": pl.String, "region": pl.String, "missing": pl.String}
#: one row per (family, member) of :func:`plan_experiments`
EXPERIMENTS_SCHEMA = {"family": pl.String, "member": pl.String, "workload": pl.String, "preset": pl.String,
                      "batch": pl.Int64, "blocks": pl.Int64, "graph": pl.String, "options": pl.String,
                      "lines": pl.String, "hardware_cycles": pl.Int64, "control": pl.Boolean,
                      "expressible": pl.Boolean, "source": pl.String, "note": pl.String, "missing": pl.String}


@cache
def _hardware() -> pl.DataFrame:
    text = resources.files("toolkit").joinpath("data", "hardware_programs.csv").read_bytes()
    d = pl.read_csv(text, schema=HARDWARE_SCHEMA)
    text_cols = ("lines", "families", "member", "control_of", "missing", "note", "region")
    d = d.with_columns(pl.col(c).fill_null("") for c in text_cols)
    return d.with_columns((pl.col("missing") == "").alias("expressible"))


def hardware_programs() -> pl.DataFrame:
    """Whole programs the real compiler ran on a C600, renderer-cropped cycles, each with the graph and options that
    express it here (HARDWARE_SCHEMA plus ``expressible``: nothing is ``missing``); sources: HARDWARE.md section 5,
    the seeds and ``ipu-stack``'s documents named per row."""
    return _hardware().clone()


def plan_experiments(family: str | None = None) -> pl.DataFrame:
    """The experiment families of :func:`hardware_programs` (EXPERIMENTS_SCHEMA): one row per (family, member),
    ``control`` marking each family's control, in the table's order (``family``: that family only)."""
    d = (_hardware().filter(pl.col("families") != "")
         .with_columns(pl.col("families").str.split(";").alias("family"))
         .explode("family")
         .with_columns(pl.col("control_of").str.split(";").list.contains(pl.col("family")).alias("control")))
    if family is not None:
        known = d["family"].unique(maintain_order=True).to_list()
        if family not in known:
            from toolkit.errors import OptionError
            raise OptionError(f"unknown experiment family {family!r}; known: {', '.join(known)}", field="family",
                              value=family)
        d = d.filter(pl.col("family") == family)
    return d.select(list(EXPERIMENTS_SCHEMA)).cast(EXPERIMENTS_SCHEMA)


def hardware_check_errors() -> pl.DataFrame:
    """The hardware's own functional-check figures (max abs error) with their programs and sources
    (:func:`toolkit.check.hardware.hardware_errors`)."""
    from toolkit.check.hardware import hardware_errors
    return hardware_errors()


def hardware_program(row: dict) -> tuple[str, dict, dict]:
    """The graph and options of one :func:`hardware_programs` row: ``(preset, build_graph overrides, options)``,
    so ``toolkit.compile(toolkit.graph.get_workload(preset, **overrides), options=options)`` compiles what ran."""
    overrides = {"batch": row["batch"], "blocks": row["blocks"], **json.loads(row["graph"] or "{}")}
    return row["preset"], overrides, json.loads(row["options"] or "{}")


#: workload fields whose value, when a compiled graph's differs from its preset's, makes it another graph
GRAPH_FIELDS = ("tokens", "width", "hidden", "heads", "batch", "blocks", "fused_qkv", "biases", "layernorm",
                "residual", "projection", "host_layout")


def hardware_figure(workload: str, options: Any = None, params: dict | None = None) -> dict | None:
    """The hardware measurement of ``workload``: the figure named so, for the graph its preset defines (None when
    options change its graph, or when ``params``, the compiled graph's parameters, differ from the preset's in a
    graph field); else, given ``options`` and ``params``, the first figure whose program (preset, graph fields,
    weight format, program options) is exactly the one compiled."""
    whole = _hardware().filter(pl.col("region") == "")   # figures of one region of a program are not the program's
    named = whole.filter(pl.col("workload") == workload)
    if named.height and _same_graph(workload, options, params):
        return named.row(0, named=True)
    if options is None or params is None:
        return None
    for row in whole.filter(pl.col("expressible")).iter_rows(named=True):
        if _runs(row, options, params):   # the figure of this very program (the first listed: the newest kernels)
            return row
    return None


def _same_graph(workload: str, options: Any, params: dict | None) -> bool:
    """Whether a compile of preset ``workload`` with ``options`` (graph ``params``) is the graph its name means: the
    preset's own weight format, casts, FP16 attention products and graph fields."""
    from toolkit.graph import PRESETS
    preset = PRESETS.get(workload)
    if options is not None:
        for name in ("weight_dtype", "early_casts"):   # a format other than the preset's is another graph
            value = getattr(options, name, None)
            if value is not None and (preset is None or value != getattr(preset, name)):
                return False
        if any((getattr(options, f"{q}_dtype", None) or "f16") != "f16" for q in ("qk", "pv")):
            return False
    return params is None or preset is None or all(
        k not in params or params[k] == getattr(preset, k) for k in GRAPH_FIELDS)


#: compile options that change the program a figure's options express (beside the graph's weight format)
PROGRAM_OPTIONS = ("plans", "plan_search", "row_block", "stream_block", "row_shard", "panel_groups", "inner_split",
                   "inner_block", "weight_class", "fused_qkv", "partials", "stream_weights", "tile_mapping",
                   "qk_dtype", "qk_cast", "pv_dtype", "pv_cast", "qk_preparation", "attention_products", "kernel_build")


def _runs(row: dict, options: Any, params: dict) -> bool:
    """Whether compiling a graph of ``params`` with ``options`` is the program of hardware figure ``row``: the same
    graph (whatever preset name built it) and the same program options."""
    from toolkit.graph import PRESETS, get_workload
    from toolkit.options import as_options
    preset, overrides, wanted = hardware_program(row)
    if preset not in PRESETS:
        return False
    ran = get_workload(preset, **overrides)
    wanted = as_options(wanted)
    dtype = wanted.weight_dtype or ran.weight_dtype
    return (all(params.get(k) == getattr(ran, k) for k in GRAPH_FIELDS) and params.get("weight_dtype") == dtype
            and all(getattr(wanted, f) == getattr(options, f, None) for f in PROGRAM_OPTIONS))


def numbers(c: Any, summary: pl.DataFrame | None = None) -> pl.DataFrame:
    """Every headline number of compilation ``c`` (NUMBERS_SCHEMA), labelled with what it is (``summary``:
    ``c.summary()`` when the caller has it already)."""
    from toolkit.profile import crop

    chosen = c.layout.candidates.filter(pl.col("chosen")).row(0, named=True)
    s = (c.summary() if summary is None else summary).row(0, named=True)
    hw = hardware_figure(c.workload, c.options, c.graph.params)
    rows = [
        ("cycles", "screen estimate", chosen["est_cycles"], "cycles",
         "layout search, O(1) per op: every operand panel counted as received (layout.candidates.est_cycles)"),
        ("cycles", "refined estimate", chosen["sched_cycles"], "cycles",
         "layout search beam: every operand routed (layout.candidates.sched_cycles)"),
        ("cycles", "lowered estimate", s["lowered_cycles"], "cycles",
         "compute as scheduled, exchange phases as lowered, repeat instances multiplied in (summary lowered_cycles)"),
        *((f"{k} cycles", "lowered estimate", s[f"lowered_{k}_cycles"], "cycles",
           f"the {k} phases of the lowered estimate (summary lowered_{k}_cycles)")
          for k in ("compute", "exchange", "sync")),
    ]
    if c.profile is not None:
        rows.append(("cycles", "simulated", crop(c.profile).cropped_cycles, "cycles",
                     "simulated profile, cropped as the hardware renderer crops it (profile.crop)"))
    if hw is not None:
        pinned = set(json.loads(hw["options"] or "{}")) & set(PROGRAM_OPTIONS)
        whose = (f"the real compiler's own program for {c.workload} (its layout, not this one)"
                 if hw["workload"] == c.workload else f"this program as the hardware ran it ({hw['workload']})"
                 if pinned else f"this graph as the hardware ran it, with its own layout search ({hw['workload']})")
        rows.append(("cycles", "measured on hardware", hw["hardware_cycles"], "cycles",
                     f"{whose}: {hw['note']}; {hw['source']}"))
    rows += [
        ("peak SRAM per tile", "screen estimate", s["screen_peak_bytes"], "bytes",
         "layout search: resident weights + the largest transient set + package support (summary screen_peak_bytes)"),
        ("peak SRAM per tile", "placed", s["peak_sram_bytes"], "bytes", _placed_peak_source(s)),
        ("launches", "screen estimate", chosen["launches"], "launches",
         "layout search: worker launches on the busiest tile per phase (layout.candidates.launches)"),
        ("launches", "lowered estimate", s["lowered_launches"], "launches",
         "worker launches on the busiest tile per phase (summary lowered_launches)"),
        ("tiles used", "count", s["tiles_used"], "tiles", "tiles with any step"),
        ("phases", "count", s["phases"], "phases", "BSP phases, repeat instances expanded"),
        ("transfers", "count", s["transfers"], "transfers", "one row per destination"),
        ("exchange steps", "count", s["exchange_steps"], "steps", "lowered exchange steps"),
    ]
    hw_err = _check_rows(c, rows)
    frame = pl.DataFrame(rows, schema=["quantity", "kind", "value", "unit", "source"], orient="row")
    cycles = (pl.col("quantity") == "cycles") & (pl.col("kind") != "measured on hardware")
    error = (pl.col("quantity") == "max abs error") & (pl.col("kind") == "checked")
    ratio = (pl.when(cycles).then(pl.col("value") / (hw["hardware_cycles"] if hw is not None else None))
             .when(error).then(pl.col("value") / hw_err).otherwise(None))
    from toolkit.evidence import compilation_evidence
    ev = compilation_evidence(c)
    kind = "simulated" if c.profile is not None else "lowered estimate"
    on = (pl.col("quantity") == "cycles") & (pl.col("kind") == kind)
    frame = frame.with_columns(*(pl.when(on).then(pl.lit(ev[k])).otherwise(None).alias(k)
                                 for k in ("evidence", "band_low", "band_high")))
    return frame.with_columns(ratio.alias("vs_hardware")).cast(NUMBERS_SCHEMA).select(list(NUMBERS_SCHEMA))


def no_placed_peak(s: Mapping[str, Any]) -> str | None:
    """Why a summary row has no placed peak (``peak_sram_bytes`` null), or None when it has one."""
    if s["peak_sram_bytes"] is not None:
        return None
    return "placement produced no occupancy" if s["placed"] else "did not place"


def _placed_peak_source(s: dict) -> str:
    """Where the placed peak comes from, or why there is none (never the screen's figure in its place)."""
    why = no_placed_peak(s)
    if why is None:
        return "joint placement: the fullest tile's live bytes at its peak event (summary peak_sram_bytes)"
    detail = " every object (placement.failures says which tiles and by how much)" if why == "did not place" else ""
    return f"none: {why}{detail}"


def _check_rows(c: Any, rows: list) -> float | None:
    """The functional check's max abs error and the hardware's own check figure for the same program (appended to
    ``rows``); returns the hardware's figure (None without one)."""
    from toolkit.check import hardware_error
    if getattr(c, "check", None) is None:
        return None
    r = c.check
    rows.append(("max abs error", "checked", r.max_abs_error, "output units",
                 f"functional check against the host reference as ipu-stack's hardware check computes it (input "
                 f"std {r.input_std:g}, F143 scale {r.scale}); against the exact model {r.max_abs_error_exact:.3g}"))
    hw = hardware_error(c.workload, c.options)
    if hw is None:
        return None
    rows.append(("max abs error", "measured on hardware", hw["max_abs_error"], "output units",
                 f"ipu-stack's check of {hw['hardware_program']}: {hw['note']}; {hw['source']}"))
    return float(hw["max_abs_error"])


def op_cycles(c: Any) -> pl.DataFrame:
    """Lowered cycles and bytes received per (op, phase kind) of compilation ``c``, repeat instances multiplied in."""
    from toolkit.pipeline import phase_cycles
    order = {n: i for i, n in enumerate(c.graph.ops["name"].to_list())}
    return (phase_cycles(c.schedule, c.exchange)
            .group_by(pl.col("name").alias("op"), "kind").agg(pl.col("cycles").sum(), pl.col("bytes").sum())
            .with_columns(pl.col("op").replace_strict(order, default=len(order)).alias("_at"))
            .sort("_at", "kind").drop("_at"))


def compare_programs(compilations: Any) -> pl.DataFrame:
    """Two or more compilations aligned by (op, phase kind): ``<name>_cycles`` (lowered) and ``<name>_bytes``
    (exchanged) per compilation, and for every one after the first its cycle delta against the first.
    ``compilations``: a mapping of names to compilations (or a sequence, named by position)."""
    from toolkit.errors import OptionError
    items = list(compilations.items()) if isinstance(compilations, dict) else [
        (f"c{i}", c) for i, c in enumerate(compilations)]
    if len(items) < 2:
        msg = f"compare_programs needs at least two compilations, got {len(items)}"
        raise OptionError(msg, field="compilations", value=len(items))
    out = None
    for name, c in items:
        part = op_cycles(c).rename({"cycles": f"{name}_cycles", "bytes": f"{name}_bytes"})
        out = part if out is None else out.join(part, on=["op", "kind"], how="full", coalesce=True)
    # an (op, kind) one program lacks (a phase kind it never runs) counts 0 there in the delta, as the delta
    # chart draws it; its cycles stay null (absent)
    base = pl.col(f"{items[0][0]}_cycles").fill_null(0)
    return out.with_columns(*((pl.col(f"{n}_cycles").fill_null(0) - base).alias(f"{n}_delta_cycles")
                              for n, _ in items[1:]))


def compare_peaks(compilations: Any) -> pl.DataFrame:
    """Per tile, the placed peak bytes of each compilation and every later one's delta against the first."""
    items = list(compilations.items()) if isinstance(compilations, dict) else [
        (f"c{i}", c) for i, c in enumerate(compilations)]
    out = None
    for name, c in items:
        part = c.placement.occupancy.group_by("tile").agg(pl.col("live_bytes").max().alias(f"{name}_peak_bytes"))
        out = part if out is None else out.join(part, on="tile", how="full", coalesce=True)
    base = pl.col(f"{items[0][0]}_peak_bytes")
    return out.with_columns(*((pl.col(f"{n}_peak_bytes") - base).alias(f"{n}_delta_bytes")
                              for n, _ in items[1:])).sort("tile")


__all__ = ["EXPERIMENTS_SCHEMA", "HARDWARE_SCHEMA", "KINDS", "NUMBERS_SCHEMA", "compare_peaks", "compare_programs",
           "hardware_check_errors", "hardware_figure", "hardware_program", "hardware_programs", "numbers", "op_cycles",
           "plan_experiments"]
