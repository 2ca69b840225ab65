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
}
HARDWARE_SCHEMA = {"workload": pl.String, "hardware_cycles": pl.Int64, "source": pl.String, "note": pl.String}


@cache
def _hardware() -> pl.DataFrame:
    text = resources.files("toolkit").joinpath("data", "hardware_programs.csv").read_bytes()
    return pl.read_csv(text, schema=HARDWARE_SCHEMA)


def hardware_programs() -> pl.DataFrame:
    """Whole programs the real compiler ran on a C600, renderer-cropped cycles (HARDWARE.md section 5, the seeds)."""
    return _hardware().clone()


def hardware_check_errors() -> pl.DataFrame:
    """The hardware's own functional-check figures (max abs error) with their programs and sources
    (:func:`toolkit.check.hardware.hardware_errors`)."""
    from toolkit.check.hardware import hardware_errors
    return hardware_errors()


def hardware_figure(workload: str, options: Any = None) -> dict | None:
    """The hardware measurement of ``workload`` as its preset defines it (None when options change its graph)."""
    if options is not None and (getattr(options, "weight_dtype", None) is not None
                                or getattr(options, "early_casts", None) is not None
                                or any((getattr(options, f"{p}_dtype", None) or "f16") != "f16" for p in ("qk", "pv"))):
        return None
    rows = _hardware().filter(pl.col("workload") == workload)
    return rows.row(0, named=True) if rows.height else None


def numbers(c: Any, summary: pl.DataFrame | None = None) -> pl.DataFrame:
    """Every headline number of compilation ``c`` (NUMBERS_SCHEMA), labelled with what it is (``summary``:
    ``c.summary()`` when the caller has it already)."""
    from toolkit.profile import crop

    chosen = c.layout.candidates.filter(pl.col("chosen")).row(0, named=True)
    s = (c.summary() if summary is None else summary).row(0, named=True)
    hw = hardware_figure(c.workload, c.options)
    rows = [
        ("cycles", "screen estimate", chosen["est_cycles"], "cycles",
         "layout search, O(1) per op: every operand panel counted as received (layout.candidates.est_cycles)"),
        ("cycles", "refined estimate", chosen["sched_cycles"], "cycles",
         "layout search beam: every operand routed (layout.candidates.sched_cycles)"),
        ("cycles", "lowered estimate", s["est_cycles"], "cycles",
         "compute as scheduled, exchange phases as lowered, repeat instances multiplied in (est_cycles())"),
        *((f"{k} cycles", "lowered estimate", s[f"{k}_cycles"], "cycles", f"the {k} phases of the lowered estimate")
          for k in ("compute", "exchange", "sync")),
    ]
    if c.profile is not None:
        rows.append(("cycles", "simulated", crop(c.profile).cropped_cycles, "cycles",
                     "simulated profile, cropped as the hardware renderer crops it (profile.crop)"))
    if hw is not None:
        rows.append(("cycles", "measured on hardware", hw["hardware_cycles"], "cycles",
                     f"the real compiler's own program for {c.workload} (its layout, not this one): {hw['note']}; "
                     f"{hw['source']}"))
    rows += [
        ("peak SRAM per tile", "screen estimate", chosen["peak_live_bytes"], "bytes",
         "layout search: resident weights + the largest transient set + package support"),
        ("peak SRAM per tile", "placed", s["peak_sram_bytes"], "bytes",
         "joint placement: the fullest tile's live bytes at its peak event"),
        ("launches", "lowered estimate", s["launches"], "launches", "worker launches on the busiest tile per phase"),
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
    return frame.with_columns(ratio.alias("vs_hardware")).cast(NUMBERS_SCHEMA).select(list(NUMBERS_SCHEMA))


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
    base = pl.col(f"{items[0][0]}_cycles")
    return out.with_columns(*((pl.col(f"{n}_cycles") - base).alias(f"{n}_delta_cycles") for n, _ in items[1:]))


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


__all__ = ["KINDS", "NUMBERS_SCHEMA", "compare_peaks", "compare_programs", "hardware_check_errors",
           "hardware_figure", "hardware_programs", "numbers", "op_cycles"]
