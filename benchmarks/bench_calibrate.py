"""Calibration against the measured programs: per family, in sample and held out, beside the current model.

Runs :func:`toolkit.calibrate.calibrate` over the expressible rows of
``toolkit/data/hardware_programs.csv`` (each compiled once; ``--exclude-preset
siglip-vit`` leaves out the 27-layer programs, whose compiles are long), fitting
:data:`toolkit.calibrate.PARAMETERS` in sample and leave-one-family-out. Writes the
fitted constants, the per-family table (n, median and worst |error| %, Spearman of
changes from the control: current constants, in sample, held out), the pinned
programs' headline (the acceptance asks held-out median <= 3 %), and the
linearization check: a few programs recompiled with the fitted kernel build beside
their linear prediction.

Run: python -m benchmarks.bench_calibrate [--exclude-preset siglip-vit] [--features FILE] [--features-out FILE]
[--verify N]
"""

from __future__ import annotations

import argparse
import math
import time

import polars as pl

from benchmarks._results import write_section


def _f(v: float | None, digits: int = 2) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def report(cal, checked: pl.DataFrame | None, seconds: float) -> list[str]:
    from toolkit.calibrate import summary
    head = summary(cal)
    ok = cal.programs.filter(pl.col("error").is_null())
    lines = [
        f"{ok.height} measured programs compiled once each ({seconds:.0f} s in all); feature counts by "
        "re-scheduling each chosen layout with one constant moved; the fit: Huber-weighted relative least squares "
        "with a ridge toward the current constants, whole cycles. Errors: |prediction / hardware - 1| in %. "
        "Held out: the family (or the ungrouped program) left out of the fit.", "",
        f"**Pinned programs ({head['pinned_n']}): median |error| current {_f(head['pinned_error_median_pct'])} %, "
        f"in sample {_f(head['pinned_calibrated_error_median_pct'])} %, held out "
        f"{_f(head['pinned_held_out_error_median_pct'])} % (worst {_f(head['pinned_held_out_error_worst_pct'])} %; "
        f"acceptance: held-out median <= 3 %). All programs ({head['all_n']}): current "
        f"{_f(head['all_error_median_pct'])} %, in sample {_f(head['all_calibrated_error_median_pct'])} %, held out "
        f"{_f(head['all_held_out_error_median_pct'])} %.**", "",
        "| constant | current | fitted | whole | change % |", "|---|---:|---:|---:|---:|"]
    for r in cal.parameters.iter_rows(named=True):
        lines.append(f"| {r['parameter']} | {r['current']} | {r['fitted']:.1f} | {r['value']} | "
                     f"{r['change_pct']:+.1f} |")
    lines += ["", "Per group (fitted: members the constants were fitted on, the pinned ones; a searched program runs "
              "our own layout, not the real compiler's, so it is predicted but never fitted):", "",
              "| group | n | fitted | current median / worst % | current Spearman | in-sample median / worst % | "
              "in-sample Spearman | held-out median / worst % | held-out Spearman |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in cal.families.iter_rows(named=True):
        lines.append(
            f"| {r['group']} | {r['n']} | {r['fitted']} | "
            f"{_f(r['current_median_pct'])} / {_f(r['current_worst_pct'])} | "
            f"{_f(r['current_spearman'], 3)} | {_f(r['in_sample_median_pct'])} / {_f(r['in_sample_worst_pct'])} | "
            f"{_f(r['in_sample_spearman'], 3)} | {_f(r['held_out_median_pct'])} / {_f(r['held_out_worst_pct'])} | "
            f"{_f(r['held_out_spearman'], 3)} |")
    failed = cal.programs.filter(pl.col("error").is_not_null())
    if failed.height:
        lines += ["", "Not compiled: " + "; ".join(f"{w} ({e})" for w, e in failed.select("workload", "error").rows())]
    if checked is not None and checked.height:
        lines += ["", "Linearization: recompiled with the fitted kernel build (the build document as a target) "
                  "beside the linear prediction:", "",
                  "| program | linear | recompiled | linear / recompiled - 1 (%) | hardware |",
                  "|---|---:|---:|---:|---:|"]
        for r in checked.iter_rows(named=True):
            lines.append(f"| {r['workload']} | {r['linear']:,.0f} | {r['recompiled']:,} | {r['difference_pct']:+.3f} | "
                         f"{r['hardware_cycles']:,} |")
    return lines


def main() -> None:
    import toolkit
    from toolkit.calibrate import read_features, verify
    ap = argparse.ArgumentParser()
    ap.add_argument("--exclude-preset", action="append", default=[], help="leave out this preset's programs")
    ap.add_argument("--features", help="feature counts saved by `toolkit calibrate --features-out` (no compiles)")
    ap.add_argument("--features-out", help="also save the feature counts collected (Parquet)")
    ap.add_argument("--verify", type=int, default=3, help="pinned programs to recompile with the fitted build")
    ap.add_argument("--no-write", action="store_true", help="print the section instead of writing RESULTS.md")
    args = ap.parse_args()
    t = time.perf_counter()
    feats = read_features(args.features) if args.features else None
    cal = toolkit.calibrate(features=feats, exclude_presets=tuple(args.exclude_preset),
                            progress=lambda w, i, n: print(f"{i + 1}/{n} {w}", flush=True))
    seconds = (float(cal.features["seconds"].sum()) if feats is not None else time.perf_counter() - t)
    if args.features_out:
        from toolkit.files import atomic_write
        atomic_write(args.features_out, lambda tmp: cal.features.write_parquet(tmp))
    checked = verify(cal, limit=args.verify) if args.verify else None
    lines = report(cal, checked, seconds)
    if args.no_write:
        print("\n".join(lines))
    else:
        write_section("calibrate", "\n".join(lines))


if __name__ == "__main__":
    main()
