"""``toolkit calibrate``: fit cost constants to the measured programs, held out family by family."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import typer

from toolkit.cli.graph import fail, show
from toolkit.errors import OptionError, ToolkitError


def _check_paths(out: Path | None, evidence: Path | None, features_out: Path | None,
                 features: Path | None) -> None:
    """Every output path refused by name before any compile; no output may overwrite the features input."""
    from toolkit.calibrate import check_build_path
    from toolkit.files import check_not_input, check_output
    if out is not None:
        check_build_path(out)
    for path, flag, suffix in ((evidence, "--evidence", ".csv"), (features_out, "--features-out", ".parquet")):
        if path is None:
            continue
        if path.suffix != suffix:
            raise OptionError(f"{flag} {path} must name a {suffix} file", field=flag.lstrip("-"), value=str(path))
        check_output(path, field=flag.lstrip("-"))
    outputs = {k: v for k, v in (("--out", out), ("--evidence", evidence), ("--features-out", features_out)) if v}
    if len({Path(v).resolve() for v in outputs.values()}) < len(outputs):
        raise OptionError(f"outputs {sorted(outputs)} name the same file", field="out", value=str(out))
    if features is not None:
        check_not_input(outputs, {"--features": features})


def calibrate_cmd(
    family: list[str] = typer.Option([], "--family", help="Only programs of this experiment family (repeatable)."),
    exclude_preset: list[str] = typer.Option(
        [], "--exclude-preset", help="Leave out programs of this preset (repeatable; e.g. siglip-vit: 27 layers)."),
    parameter: list[str] = typer.Option([], "--parameter", "-p", help="Cost constant to fit (repeatable; default "
                                                                      "toolkit.calibrate.PARAMETERS, at most 8)."),
    split: str = typer.Option("leave-one-family-out", help="leave-one-family-out or none (in sample only)."),
    fit_on: str = typer.Option("pinned", help="pinned (programs whose options pin every plan: the hardware's own "
                                              "program) or all; every program is predicted."),
    features: Path | None = typer.Option(None, help="Feature counts saved by --features-out (no compiles)."),
    features_out: Path | None = typer.Option(None, "--features-out", help="Save the feature counts (Parquet)."),
    out: Path | None = typer.Option(None, help="Write the fitted kernel build (JSON) here."),
    evidence: Path | None = typer.Option(None, help="Write the evidence table (CSV) here "
                                                    "(toolkit/data/evidence.csv is the committed one)."),
    verify: int = typer.Option(0, help="Recompile this many pinned programs with the fitted build, beside the "
                                       "linear prediction."),
    as_json: bool = typer.Option(False, "--json", help="Print everything as one JSON object."),
) -> None:
    """Fit a handful of cost constants to the measured programs (toolkit/data/hardware_programs.csv), in sample and
    leave-one-family-out, and print per family the median and worst |error| % and Spearman of changes from the
    control, current model beside calibrated."""
    from toolkit.calibrate import PARAMETERS, calibrate, read_features, summary, write_build
    from toolkit.calibrate import verify as verify_fit
    try:
        _check_paths(out, evidence, features_out, features)
        if verify < 0:
            raise OptionError(f"--verify {verify} must be 0 or a number of programs", field="verify", value=verify)
        given = read_features(str(features)) if features is not None else None
        progress = None if as_json else (lambda w, i, n: typer.echo(f"calibrate: {i + 1}/{n} {w}", err=True))
        cal = calibrate(families=family or None, parameters=tuple(parameter) or PARAMETERS, split=split,
                        features=given, exclude_presets=tuple(exclude_preset), fit_on=fit_on, progress=progress)
        from toolkit.files import atomic_write
        if features_out is not None:
            atomic_write(features_out, lambda tmp: cal.features.write_parquet(tmp))
        build = cal.kernel_build()
        if out is not None:
            write_build(build, out)
        if evidence is not None:
            atomic_write(evidence, lambda tmp: cal.evidence.write_csv(tmp, float_precision=6))
        checked = verify_fit(cal, limit=verify, build_path=str(out) if out else None) if verify else None
    except ToolkitError as exc:
        fail(exc)
    head = summary(cal)
    if as_json:
        doc = {"summary": head, "kernel_build": build, "parameters": cal.parameters.to_dicts(),
               "families": cal.families.to_dicts(), "programs": cal.programs.to_dicts(),
               "verify": checked.to_dicts() if checked is not None else None}
        typer.echo(json.dumps(_finite(doc), allow_nan=False))
        return
    show(cal.parameters, "fitted constants (value: the whole cycles the kernel build holds)")
    f = cal.families
    fam = f.select("group", "n", "fitted",
                   *(pl.col(f"{m}_median_pct").round(2).alias(f"{a} median") for m, a in MODELS),
                   pl.col("held_out_worst_pct").round(2).alias("held-out worst"),
                   *(pl.col(f"{m}_spearman").round(3).alias(f"{a} rho") for m, a in MODELS))
    show(fam, "per family: |error| % (prediction / hardware - 1) and Spearman of changes from the control; current "
              "constants, fitted in sample, fitted with the family held out (--json: every column)")
    typer.echo(f"pinned programs ({head['pinned_n']}): median |error| current {_pct(head, 'pinned_error')}, "
               f"in sample {_pct(head, 'pinned_calibrated_error')}, held out {_pct(head, 'pinned_held_out_error')}")
    typer.echo(f"all programs ({head['all_n']}): median |error| current {_pct(head, 'all_error')}, "
               f"in sample {_pct(head, 'all_calibrated_error')}, held out {_pct(head, 'all_held_out_error')}")
    if checked is not None:
        show(checked, "linear prediction beside a recompile with the fitted build")
    for path, what in ((out, "kernel build"), (evidence, "evidence table"), (features_out, "feature counts")):
        if path is not None:
            typer.echo(f"wrote {what} {path}", err=True)


MODELS = (("current", "current"), ("in_sample", "in-sample"), ("held_out", "held-out"))


def _pct(head: dict, key: str) -> str:
    v = head.get(f"{key}_median_pct")
    return "none" if v is None else f"{v:.2f} % (worst {head[f'{key}_worst_pct']:.2f} %)"


def _finite(doc: object) -> object:
    """``doc`` with every NaN or infinite float as null (JSON has no NaN)."""
    if isinstance(doc, dict):
        return {k: _finite(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [_finite(v) for v in doc]
    if isinstance(doc, float) and not math.isfinite(doc):
        return None
    return doc


__all__ = ["calibrate_cmd"]
