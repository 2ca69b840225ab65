"""``toolkit.calibrate``: fit a handful of cost constants to the measured programs, and say how well it holds out.

Contract: takes rows of the one table of measured programs
(:func:`toolkit.report.hardware_programs`; default every expressible row),
compiles each ONCE and takes its feature counts (:mod:`toolkit.calibrate.features`:
simulated cycles per unit of each fitted constant, on the program's critical
path), then fits the constants (:mod:`toolkit.calibrate.fit`: Huber-weighted
relative least squares, ridge toward the current values, at most
:data:`MAX_PARAMETERS`) in sample and leave-one-family-out: every experiment
family (and every program in no family, alone) is held out in turn and
predicted by the constants fitted on the rest. Returns a :class:`Calibration`
of polars frames; its :meth:`Calibration.kernel_build` is the fitted build as
data (:mod:`toolkit.calibrate.build`), never a code edit.

Errors are relative: ``prediction / hardware - 1``. Spearman within a family is
of its members' changes from the family's control (members other than the
control; nan below three).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from toolkit.calibrate.build import build_document, build_target, check_build_path, load_kernel_build, write_build
from toolkit.calibrate.fit import fit_theta, predict, spearman
from toolkit.errors import OptionError
from toolkit.target import DATA_BUILDS, KERNEL_BUILDS, ipu21

#: the constants fitted by default (toolkit.target.Costs fields no older kernel build overrides): the AMP call
#: and per-panel overhead, the supervisor launch, the reduction and local-copy calls, the global sync, the
#: exchange phase overrun and the receive cutover's arrival latency
PARAMETERS = ("amp_call_cycles", "amp_panel_cycles", "launch_cycles", "reduce_call_cycles", "copy_call_cycles",
              "sync_cycles", "exchange_phase_cycles", "exchange_arrival_cycles")
MAX_PARAMETERS = 8
SPLITS = ("leave-one-family-out", "none")
#: which programs the constants are fitted on: ``pinned`` (their options pin every plan, so ours is the program the
#: hardware ran; a searched program runs our own layout, not the real compiler's, and its error is not a cost
#: constant's) or ``all``. Every program is predicted and reported either way.
FIT_ON = ("pinned", "all")

PARAMETERS_SCHEMA = {"parameter": pl.String, "current": pl.Int64, "fitted": pl.Float64, "value": pl.Int64,
                     "change_pct": pl.Float64}
PROGRAMS_SCHEMA = {
    "workload": pl.String, "families": pl.String, "groups": pl.String, "pinned": pl.Boolean,
    "hardware_cycles": pl.Int64, "simulated": pl.Int64,
    "calibrated": pl.Float64,     # linear prediction, constants fitted on every program (whole-cycle values)
    "held_out": pl.Float64,       # the same, every group the program belongs to left out of the fit
    "error_pct": pl.Float64, "calibrated_error_pct": pl.Float64, "held_out_error_pct": pl.Float64,
    "error": pl.String,           # why the program has no prediction (it did not compile)
}
#: Calibration.programs: PROGRAMS_SCHEMA plus ``fitted`` (the fit read the program)
FAMILIES_SCHEMA = {
    "group": pl.String, "kind": pl.String, "n": pl.Int64, "fitted": pl.Int64, "control": pl.String,
    **{f"{m}_{s}": t for m in ("current", "in_sample", "held_out")
       for s, t in (("median_pct", pl.Float64), ("worst_pct", pl.Float64), ("spearman", pl.Float64))},
}
VERIFY_SCHEMA = {"workload": pl.String, "linear": pl.Float64, "recompiled": pl.Int64, "difference_pct": pl.Float64,
                 "hardware_cycles": pl.Int64}


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """A fit of cost constants to measured programs, in sample and held out."""

    parameters: pl.DataFrame   # PARAMETERS_SCHEMA: each fitted constant, current and fitted (value: whole cycles)
    programs: pl.DataFrame     # PROGRAMS_SCHEMA: each program, measured and predicted
    families: pl.DataFrame     # FAMILIES_SCHEMA: per group, errors and Spearman (current, in sample, held out)
    features: pl.DataFrame     # collect.FEATURE_COLUMNS + base + one column per parameter
    evidence: pl.DataFrame     # toolkit.evidence.EVIDENCE_SCHEMA: one row per (program, plan kind)
    split: str
    fit_on: str                # FIT_ON: the programs the constants were fitted on (programs.fitted marks them)

    def kernel_build(self, name: str = "calibrated") -> dict[str, Any]:
        """The fitted constants as a kernel build document (:mod:`toolkit.calibrate.build`)."""
        p = self.parameters
        return build_document(name, dict(zip(p["parameter"], p["value"], strict=True)),
                              dict(zip(p["parameter"], p["fitted"], strict=True)),
                              self.programs.filter(pl.col("fitted"))["workload"].to_list(), self.split)

    def target(self, base: Any = None) -> Any:
        """The IPU21 (or ``base``) with the fitted constants."""
        return build_target(self.kernel_build(), base)

    def pinned(self) -> pl.DataFrame:
        """Per-program errors of the pinned programs (options pin their plans): the acceptance's rows."""
        return self.programs.filter(pl.col("pinned") & pl.col("error").is_null())


def _groups(families: str, workload: str) -> list[str]:
    return [f for f in (families or "").split(";") if f] or [workload]


def calibrate(programs: pl.DataFrame | None = None, *, families: list[str] | None = None,
              parameters: tuple[str, ...] = PARAMETERS, split: str = "leave-one-family-out",
              features: pl.DataFrame | None = None, exclude_presets: tuple[str, ...] = (), fit_on: str = "pinned",
              progress: Callable[[str, int, int], None] | None = None) -> Calibration:
    """Fit ``parameters`` (Costs fields, at most 8) to ``programs`` (hardware_programs() rows; default every
    expressible one; ``families``: only rows of these experiment families; ``exclude_presets``: not these
    presets, e.g. the 27-layer ``siglip-vit``), in sample and by ``split`` (``leave-one-family-out`` or
    ``none``), on the programs ``fit_on`` names (FIT_ON; every program is predicted). ``features``: feature
    counts already collected (:func:`toolkit.calibrate.collect.collect_features`), to refit without compiling
    again."""
    from toolkit.calibrate.collect import collect_features
    from toolkit.report import hardware_programs
    parameters = _check_parameters(parameters)
    if split not in SPLITS:
        raise OptionError(f"split={split!r} must be one of {SPLITS}", field="split", value=split)
    if fit_on not in FIT_ON:
        raise OptionError(f"fit_on={fit_on!r} must be one of {FIT_ON}", field="fit_on", value=fit_on)
    if features is None:
        rows = _select(programs if programs is not None else hardware_programs(), families, exclude_presets)
        features = collect_features(rows, parameters, progress)
    else:
        missing = [p for p in ("workload", "hardware_cycles", "base", *parameters) if p not in features.columns]
        if missing:
            raise OptionError(f"features lack column(s) {missing}; collect them with these parameters",
                              field="features", value=missing)
        if families:
            features = features.filter(pl.col("families").str.split(";").list.set_intersection(families)
                                       .list.len() > 0)
    return fit_features(features, parameters, split, fit_on)


def _check_parameters(parameters: tuple[str, ...]) -> tuple[str, ...]:
    parameters = tuple(parameters)
    costs = ipu21().costs
    if not parameters or len(parameters) > MAX_PARAMETERS:
        raise OptionError(f"parameters: give 1 to {MAX_PARAMETERS} cost constants (got {len(parameters)}), so the "
                          f"fit cannot overfit", field="parameters", value=parameters)
    for p in parameters:
        if not hasattr(costs, p):
            raise OptionError(f"parameter {p!r} is not a cost constant (toolkit.target.Costs)", field="parameters",
                              value=p)
        cohorts = [b for b, o in KERNEL_BUILDS.items() if p in o and b not in DATA_BUILDS]
        if cohorts:
            raise OptionError(f"parameter {p!r} is set by kernel build(s) {cohorts}; a fitted value would not reach "
                              f"their programs", field="parameters", value=p)
    if len(set(parameters)) != len(parameters):
        raise OptionError(f"parameters {parameters} repeat a constant", field="parameters", value=parameters)
    return parameters


def _select(programs: pl.DataFrame, families: list[str] | None, exclude: tuple[str, ...]) -> pl.DataFrame:
    rows = programs.filter(pl.col("expressible")) if "expressible" in programs.columns else programs
    if families:
        known = set(";".join(rows["families"].to_list()).split(";")) - {""}
        bad = [f for f in families if f not in known]
        if bad:
            raise OptionError(f"unknown experiment family {bad[0]!r}; known: {', '.join(sorted(known))}",
                              field="family", value=bad[0])
        rows = rows.filter(pl.col("families").str.split(";").list.set_intersection(list(families)).list.len() > 0)
    if exclude:
        rows = rows.filter(~pl.col("preset").is_in(list(exclude)))
    if rows.height == 0:
        raise OptionError("no measured program to calibrate on (filters left none)", field="programs", value=0)
    return rows


def fit_features(features: pl.DataFrame, parameters: tuple[str, ...], split: str,
                 fit_on: str = "pinned") -> Calibration:
    """The fit of collected feature counts (see :func:`calibrate`)."""
    ok = features.filter(pl.col("error").is_null() & pl.col("base").is_not_null())
    theta0 = np.array([getattr(ipu21().costs, p) for p in parameters], dtype=float)
    X = ok.select(parameters).to_numpy().astype(float)
    base = ok["base"].to_numpy().astype(float)
    y = ok["hardware_cycles"].to_numpy().astype(float)
    work = ok["workload"].to_list()
    groups = [_groups(f, w) for f, w in zip(ok["families"].to_list(), work, strict=True)]
    fits = ok["pinned"].to_numpy() if fit_on == "pinned" else np.ones(ok.height, dtype=bool)
    if not fits.any():
        raise OptionError(f"no {fit_on} program to fit on ({ok.height} compiled); use fit_on='all'",
                          field="fit_on", value=fit_on)
    fitted = fit_theta(base[fits], X[fits], y[fits], theta0)
    whole = np.round(fitted)
    calibrated = predict(base, X, theta0, whole)

    def fold(held: set[str]) -> np.ndarray:
        train = np.array([not (set(g) & held) for g in groups]) & fits
        th = np.round(fit_theta(base[train], X[train], y[train], theta0))
        return predict(base, X, theta0, th)

    names = list(dict.fromkeys(g for gs in groups for g in gs))
    per_group = {g: fold({g}) for g in names} if split != "none" else {}
    held = np.full(len(work), np.nan)
    if split != "none":
        for j, gs in enumerate(groups):
            held[j] = fold(set(gs))[j] if len(gs) > 1 else per_group[gs[0]][j]
    err = lambda pred: 100 * (pred / y - 1)   # noqa: E731
    sim = ok["simulated"].to_numpy().astype(float)
    progs = pl.DataFrame({
        "workload": work, "families": ok["families"].to_list(), "groups": [";".join(g) for g in groups],
        "pinned": ok["pinned"].to_list(), "hardware_cycles": ok["hardware_cycles"].to_list(),
        "simulated": ok["simulated"].to_list(), "calibrated": calibrated, "held_out": held,
        "error_pct": err(sim), "calibrated_error_pct": err(calibrated), "held_out_error_pct": err(held),
        "error": [None] * len(work)}, schema=PROGRAMS_SCHEMA)
    failed = features.filter(pl.col("error").is_not_null() | pl.col("base").is_null())
    if failed.height:
        progs = pl.concat([progs, failed.select(
            "workload", "families", pl.lit(None, pl.String).alias("groups"), "pinned", "hardware_cycles",
            "simulated", *(pl.lit(None, pl.Float64).alias(c) for c in ("calibrated", "held_out", "error_pct",
                                                                      "calibrated_error_pct", "held_out_error_pct")),
            pl.col("error").fill_null("no features")).cast(PROGRAMS_SCHEMA)])
    params = pl.DataFrame({"parameter": list(parameters), "current": theta0.astype(np.int64), "fitted": fitted,
                           "value": whole.astype(np.int64), "change_pct": 100 * (whole / np.maximum(theta0, 1) - 1)},
                          schema=PARAMETERS_SCHEMA)
    fams = _families(ok, groups, names, sim, calibrated, per_group, y, fits)
    return Calibration(parameters=params, programs=progs.with_columns(
        pl.col("workload").is_in([w for w, f in zip(work, fits, strict=True) if f]).alias("fitted")),
        families=fams, features=features, evidence=_evidence(ok, progs), split=split, fit_on=fit_on)


def _stats(pred: np.ndarray, y: np.ndarray, idx: list[int], control: int | None) -> tuple[float, float, float]:
    if not idx or np.isnan(pred[idx]).any():
        return (float("nan"),) * 3
    e = np.abs(100 * (pred[idx] / y[idx] - 1))
    rho = float("nan")
    if control is not None:
        others = [i for i in idx if i != control]
        rho = spearman(pred[others] / pred[control] - 1, y[others] / y[control] - 1)
    return float(np.median(e)), float(e.max()), rho


def _families(ok: pl.DataFrame, groups: list[list[str]], names: list[str], sim: np.ndarray, cal: np.ndarray,
              per_group: dict[str, np.ndarray], y: np.ndarray, fits: np.ndarray) -> pl.DataFrame:
    controls = [set((c or "").split(";")) for c in ok["control_of"].to_list()]
    rows = []
    for g in names:
        idx = [j for j, gs in enumerate(groups) if g in gs]
        ctl = next((j for j in idx if g in controls[j]), None)
        kind = "family" if ok["families"][idx[0]] else "program"
        held = per_group.get(g, np.full(len(y), np.nan))
        rows.append({"group": g, "kind": kind, "n": len(idx), "fitted": int(fits[idx].sum()),
                     "control": ok["workload"][ctl] if ctl is not None else None,
                     **dict(zip(("current_median_pct", "current_worst_pct", "current_spearman"),
                                _stats(sim, y, idx, ctl), strict=True)),
                     **dict(zip(("in_sample_median_pct", "in_sample_worst_pct", "in_sample_spearman"),
                                _stats(cal, y, idx, ctl), strict=True)),
                     **dict(zip(("held_out_median_pct", "held_out_worst_pct", "held_out_spearman"),
                                _stats(held, y, idx, ctl), strict=True))})
    return pl.DataFrame(rows, schema=FAMILIES_SCHEMA, orient="row")


def _evidence(ok: pl.DataFrame, progs: pl.DataFrame) -> pl.DataFrame:
    from toolkit.evidence import EVIDENCE_SCHEMA
    p = progs.filter(pl.col("error").is_null())
    return (ok.select("workload", "kinds").join(p, on="workload", how="inner")
            .with_columns(pl.col("kinds").str.split(";").alias("kind")).explode("kind")
            .select("workload", "families", "pinned", "kind", "hardware_cycles", "simulated",
                    (pl.col("error_pct") / 100).alias("residual"), "calibrated", "held_out",
                    (pl.col("held_out_error_pct") / 100).alias("held_out_residual"))
            .cast(EVIDENCE_SCHEMA))


def summary(cal: Calibration) -> dict[str, Any]:
    """Headline figures: the pinned programs' and every program's median |error| %, current, in sample and held
    out."""
    out: dict[str, Any] = {}
    for name, d in (("pinned", cal.pinned()), ("all", cal.programs.filter(pl.col("error").is_null()))):
        for col in ("error_pct", "calibrated_error_pct", "held_out_error_pct"):
            v = d[col].abs().drop_nans().drop_nulls()
            out[f"{name}_{col.removesuffix('_pct')}_median_pct"] = float(v.median()) if len(v) else None
            out[f"{name}_{col.removesuffix('_pct')}_worst_pct"] = float(v.max()) if len(v) else None
        out[f"{name}_n"] = d.height
    return out


def verify(cal: Calibration, workloads: list[str] | None = None, *, build_path: str | None = None,
           limit: int = 3) -> pl.DataFrame:
    """Recompile programs with the fitted constants through the kernel build data path (``build_path``: a build
    file written by :func:`write_build`; default the calibration's own build document) and set each beside its
    linear prediction (VERIFY_SCHEMA). ``workloads``: which (default the first ``limit`` pinned ones)."""
    import toolkit
    from toolkit.graph import get_workload
    from toolkit.profile import crop
    from toolkit.report import hardware_program, hardware_programs
    target = load_kernel_build(build_path) if build_path else cal.target()
    progs = cal.programs.filter(pl.col("error").is_null())
    names = workloads or _spread(progs.filter(pl.col("pinned")), limit)
    hw = hardware_programs()
    rows = []
    for w in names:
        row = hw.filter(pl.col("workload") == w).row(0, named=True)
        preset, overrides, options = hardware_program(row)
        c = toolkit.compile(get_workload(preset, **overrides), target=target, options=options)
        got = int(crop(c.profile).cropped_cycles)
        lin = float(progs.filter(pl.col("workload") == w)["calibrated"][0])
        rows.append({"workload": w, "linear": lin, "recompiled": got, "difference_pct": 100 * (lin / got - 1),
                     "hardware_cycles": row["hardware_cycles"]})
    return pl.DataFrame(rows, schema=VERIFY_SCHEMA, orient="row")


def _spread(progs: pl.DataFrame, limit: int) -> list[str]:
    """Up to ``limit`` programs, each from groups none of the earlier ones belongs to (then any others)."""
    seen: set[str] = set()
    picked = []
    for w, g in progs.select("workload", "groups").iter_rows():
        if not seen & set(g.split(";")):
            picked.append(w)
            seen |= set(g.split(";"))
    rest = [w for w in progs["workload"].to_list() if w not in picked]
    return (picked + rest)[:limit]


def read_features(path: str) -> pl.DataFrame:
    """Feature counts saved by ``toolkit calibrate --features-out`` (Parquet)."""
    from toolkit.errors import FormatError
    try:
        return pl.read_parquet(path)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise FormatError(f"{path}: cannot read feature counts ({exc.__class__.__name__})", file=path) from None


__all__ = ["FAMILIES_SCHEMA", "FIT_ON", "MAX_PARAMETERS", "PARAMETERS", "PARAMETERS_SCHEMA", "PROGRAMS_SCHEMA",
           "SPLITS", "VERIFY_SCHEMA", "Calibration", "calibrate", "check_build_path", "fit_features",
           "load_kernel_build", "read_features", "summary", "verify", "write_build"]
