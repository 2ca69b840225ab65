"""Which measured programs stand behind a prediction, and the error band they give it.

A prediction of a compilation's cycles is only as good as the measured
programs that ran the same kinds of plan. Every GEMM op of a chosen layout has
a *plan kind*: a key of the properties that change how the cost model prices
it, not its exact sizes::

    linear normal rows f16 standard complete gathered
    ^op    ^orientation ^result grid ^precision ^weight class ^staging ^weight store
    scores grid f16          (attention products: their form, shared-rows or grid, and precision)

- result grid: ``none`` (no inner split), ``rows`` (each cell's reduced output
  cut by rows), ``columns`` (by columns; the default split), ``2d``;
- staging: ``complete`` (every partial at once), ``streamed`` (one per
  epoch), ``batched`` (N per epoch);
- weight store: ``resident`` or ``gathered``.

The evidence table (``toolkit/data/evidence.csv``, EVIDENCE_SCHEMA) has one row
per (measured program, plan kind of our compile of it) with the program's residuals: the current
cost model's (simulated / hardware - 1, ``residual``) and the calibrated model's
held out of the fit (``held_out_residual``: the program's family, or the
program alone, left out; :func:`toolkit.calibrate.calibrate`). It is generated,
never edited by hand, together with the fitted kernel build::

    python -m toolkit calibrate --exclude-preset siglip-vit --features-out benchmarks/calibrate_features.parquet \
        --evidence toolkit/data/evidence.csv --out toolkit/data/kernel_builds/calibrated.json --verify 5

(every expressible program but the 27-layer ones compiled once; ``--features
benchmarks/calibrate_features.parquet`` in place of ``--features-out`` refits
from the committed feature counts without compiling).

:func:`evidence` gives a compilation (or a set of plan kinds) its evidence: the
programs that contain every one of its kinds (else those sharing any), their
count, and a band of relative error from their residuals (the spread around
the median, widened when few: ``half-width x (1 + 2 / n) + 1 %``). Only pinned
programs stand behind a kind: their options pin every plan, so our compile's
plan kinds are the ones the hardware ran; a searched program ran the real
compiler's own layout, whose kinds we do not know (its rows are in the table,
marked ``pinned = false``, and never count). A kind no pinned program has is an
*extrapolation*: the band is then the spread of all pinned residuals, doubled.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import polars as pl

from toolkit.costs import PRECISION

EVIDENCE_SCHEMA = {
    "workload": pl.String, "families": pl.String, "pinned": pl.Boolean, "kind": pl.String,
    "hardware_cycles": pl.Int64, "simulated": pl.Int64,
    "residual": pl.Float64,             # current cost model: simulated / hardware - 1
    "calibrated": pl.Float64,           # linear prediction with the fitted constants, fitted on every program
    "held_out": pl.Float64,             # the same with the program's group (family, or itself) left out of the fit
    "held_out_residual": pl.Float64,    # held_out / hardware - 1
}
#: columns :func:`evidence` gives (and ``Compilation.numbers()`` / ``layout.candidates`` carry)
EVIDENCE_COLUMNS = {"evidence": pl.String, "evidence_programs": pl.Int64, "band_low": pl.Float64,
                    "band_high": pl.Float64}
EXTRAPOLATION = "extrapolation"
#: the band's floor (relative) and its widening with few programs: half-width x (1 + WIDEN / n) + FLOOR
FLOOR = 0.01
WIDEN = 2.0

KINDS_SCHEMA = {"op": pl.String, "kind": pl.String}


def _result_class(plan: Any) -> str:
    if plan.k == 1:
        return "none"
    rows, cols = plan.result_rows, plan.result_cols if plan.result_cols else None
    if cols is None:          # the default split: by columns over min(k / rows, width / 8) tiles
        return "columns" if rows == 1 else "2d"
    if rows > 1 and cols > 1:
        return "2d"
    return "rows" if rows > 1 else "columns" if cols > 1 else "none"


def _staging(plan: Any) -> str:
    return "complete" if not plan.staging else "streamed" if plan.staging == 1 else "batched"


def _gemm_ops(graph: Any) -> list[tuple[str, str, str]]:
    """(name, rule, AMP precision) of every GEMM op of ``graph``."""
    p = graph.params
    tensors = dict(zip(graph.tensors["name"].to_list(), graph.tensors["dtype"].to_list(), strict=True))
    out = []
    for op in graph.ops.filter(pl.col("kind") == "matmul").select("name", "rule").iter_rows():
        name, rule = op
        if rule in ("scores", "values"):
            dtype = p.get("qk_dtype" if rule == "scores" else "pv_dtype") or "f16"
        else:
            dtype = tensors.get(f"{name}.weight", p.get("weight_dtype") or "f16")
        out.append((name, rule, PRECISION.get(dtype, dtype)))
    return out


def _kinds(ops: list[tuple[str, str, str]], params: Any) -> list[str]:
    from toolkit.layout.gemm import GemmPlan
    kinds = []
    for name, rule, precision in ops:
        plan = params.plan_of(name)
        if rule in ("scores", "values"):
            kinds.append(f"{rule} {'grid' if plan is not None else 'shared-rows'} {precision}")
            continue
        if plan is None:   # the global grid: inner split over inner_split tiles, default result split
            plan = GemmPlan(m=1, n=1, k=max(1, params.inner_split))
        kinds.append(f"{rule} {plan.orientation} {_result_class(plan)} {precision} "
                     f"{plan.memory or params.weight_class} {_staging(plan)} {plan.weights}")
    return kinds


def plan_kinds(graph: Any, params: Any) -> pl.DataFrame:
    """The plan kind of every GEMM op of ``graph`` under layout ``params`` (KINDS_SCHEMA, op order)."""
    ops = _gemm_ops(graph)
    return pl.DataFrame({"op": [o[0] for o in ops], "kind": _kinds(ops, params)}, schema=KINDS_SCHEMA)


def compilation_kinds(c: Any) -> pl.DataFrame:
    """:func:`plan_kinds` of compilation ``c``'s chosen layout."""
    return plan_kinds(c.layout.graph, c.layout.chosen)


@cache
def _table() -> pl.DataFrame:
    f = resources.files("toolkit").joinpath("data", "evidence.csv")
    if not f.is_file():
        return pl.DataFrame(schema=EVIDENCE_SCHEMA)
    return pl.read_csv(f.read_bytes(), schema=EVIDENCE_SCHEMA)


def evidence_table() -> pl.DataFrame:
    """The committed evidence table (EVIDENCE_SCHEMA; empty when it has not been generated)."""
    return _table().clone()


def band(residuals: list[float], *, extrapolation: bool = False) -> tuple[float, float]:
    """(low, high) relative error band from ``residuals`` (prediction / hardware - 1): the spread around their
    median widened when few (half-width x (1 + 2 / n) + 1 %); doubled for an extrapolation."""
    if not residuals:
        return (-0.5, 0.5)
    r = sorted(residuals)
    n = len(r)
    mid = r[n // 2] if n % 2 else 0.5 * (r[n // 2 - 1] + r[n // 2])
    half = max(abs(r[0] - mid), abs(r[-1] - mid)) * (1 + WIDEN / n) + FLOOR
    if extrapolation:
        half *= 2
    return (mid - half, mid + half)


def evidence(kinds: list[str] | pl.DataFrame, *, calibrated: bool = False,
             table: pl.DataFrame | None = None) -> dict[str, Any]:
    """The evidence behind a prediction of plan kinds ``kinds`` (a list, or a :func:`plan_kinds` frame):
    ``evidence`` (text: the programs and how many, or ``extrapolation: <kinds without a measurement>``),
    ``evidence_programs`` (how many measured programs share every kind), and the relative error band
    ``band_low`` / ``band_high`` (prediction / hardware - 1; the calibrated model's held-out residuals when
    ``calibrated``, else the current model's)."""
    if isinstance(kinds, pl.DataFrame):
        kinds = kinds["kind"].to_list()
    kinds = list(dict.fromkeys(kinds))
    t = _table() if table is None else table
    col = "held_out_residual" if calibrated else "residual"
    t = t.filter(pl.col(col).is_not_null() & (pl.col("pinned") if "pinned" in t.columns else pl.lit(True)))
    measured = set(t["kind"].to_list())
    unmeasured = [k for k in kinds if k not in measured]
    per = t.group_by("workload").agg(pl.col("kind"), pl.col(col).first())
    every = [pl.col("kind").list.contains(pl.lit(k)) for k in kinds]
    has = per.filter(pl.all_horizontal(every)) if every else per
    n = has.height
    if unmeasured or not t.height:
        lo, hi = band(t.group_by("workload").agg(pl.col(col).first())[col].to_list(), extrapolation=True)
        what = f"{EXTRAPOLATION}: no measured program has {'; '.join(unmeasured) or 'any kind'}"
        return {"evidence": what, "evidence_programs": 0, "band_low": lo, "band_high": hi}
    if n == 0:   # every kind measured, never together: the programs sharing any of them
        has = per.filter(pl.any_horizontal(pl.col("kind").list.contains(pl.lit(k)) for k in kinds))
        lo, hi = band(has[col].to_list())
        return {"evidence": f"{has.height} measured programs share some of its {len(kinds)} plan kinds, none all",
                "evidence_programs": 0, "band_low": lo, "band_high": hi}
    lo, hi = band(has[col].to_list())
    names = sorted(has["workload"].to_list())
    shown = ", ".join(names[:3]) + (f", ... ({n} in all)" if n > 3 else "")
    return {"evidence": f"{n} measured program{'s' * (n != 1)} with its plan kinds: {shown}",
            "evidence_programs": n, "band_low": lo, "band_high": hi}


def compilation_evidence(c: Any) -> dict[str, Any]:
    """:func:`evidence` of compilation ``c`` (its chosen plan kinds; calibrated residuals when it was compiled
    with a calibrated kernel build)."""
    return evidence(compilation_kinds(c), calibrated=is_calibrated(c))


def is_calibrated(c: Any) -> bool:
    """Whether ``c`` was compiled with fitted constants (a kernel build or target marked calibrated)."""
    return "calibrated" in str(getattr(c.options, "kernel_build", "")) or "calibrated" in str(
        getattr(c.target, "name", ""))


def candidate_evidence(layout: Any, *, calibrated: bool = False) -> pl.DataFrame:
    """EVIDENCE_COLUMNS per candidate of a layout search (``candidate_id`` plus the columns), from each
    candidate's plan kinds (no compile: the plans alone, one lookup per distinct set of kinds)."""
    ops = {fused: _gemm_ops(g) for fused, g in layout.graphs.items()}
    memo: dict[tuple, dict] = {}
    cols: dict[str, list] = {"candidate_id": [], **{k: [] for k in EVIDENCE_COLUMNS}}
    for cid in layout.candidates["candidate_id"].to_list():
        params = layout.params.get(cid)
        key = None if params is None else tuple(_kinds(ops[params.fused_qkv], params))
        if key not in memo:
            memo[key] = ({k: None for k in EVIDENCE_COLUMNS} if key is None
                         else evidence(list(key), calibrated=calibrated))
        cols["candidate_id"].append(cid)
        for k in EVIDENCE_COLUMNS:
            cols[k].append(memo[key][k])
    return pl.DataFrame(cols, schema={"candidate_id": layout.candidates.schema["candidate_id"], **EVIDENCE_COLUMNS})


def with_evidence(layout: Any, *, calibrated: bool = False) -> Any:
    """``layout`` (a LayoutResult) with EVIDENCE_COLUMNS joined onto its candidates."""
    import dataclasses
    ev = candidate_evidence(layout, calibrated=calibrated)
    cand = layout.candidates.drop([k for k in EVIDENCE_COLUMNS if k in layout.candidates.columns])
    return dataclasses.replace(layout, candidates=cand.join(ev, on="candidate_id", how="left"))


__all__ = ["EVIDENCE_COLUMNS", "EVIDENCE_SCHEMA", "EXTRAPOLATION", "KINDS_SCHEMA", "band", "candidate_evidence",
           "compilation_evidence", "compilation_kinds", "evidence", "evidence_table", "plan_kinds", "with_evidence"]
