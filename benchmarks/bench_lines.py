"""ipu-stack's lines against the hardware: the result-grid and staging families pasted as ipu-stack prints them.

Each member of the ``result-grid`` and ``staging`` families of the table of
measured programs (``toolkit.report.plan_experiments()``) is compiled from its
``--gemm-plan-constraint`` lines (the table's ``lines`` column) exactly as
ipu-stack's ``scripts/mlp-layout-alternatives.py`` prints them
(its ``Plan.constraint``: up ``4x92x4`` with a 48-column block, interleaved; down
``4x24x15`` with a 48-column block, standard; result grid ``K x 1`` unless the
case changes it; reduction ``complete`` or ``batch-N``), with the member's other
options (FP16 weights). Reported: per member the simulated change from the
family's control beside the hardware's (percent), the median and worst absolute
difference (percentage points), Spearman's rank correlation over the members, each
control's simulated / hardware ratio, and the control's lines against our own
syntax's program for it (``fc1=4x92x4/16x92 gathered, fc2=4x24x15/60x24
standard``; target: within 2 %). A column says whether
:func:`toolkit.layout.ipu_stack.member_lines` writes the same lines from the
member's own options.

Targets: Spearman >= 0.8, median change error <= 1 pp, worst <= 5 pp, control
0.95-1.05 of hardware, lines / our syntax within 0.98-1.02.

Run: python -m benchmarks.bench_lines [--family NAME]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import toolkit
from benchmarks._results import write_section
from benchmarks.bench_plans import load_experiments, spearman
from toolkit.graph import get_workload
from toolkit.layout.ipu_stack import member_lines
from toolkit.profile import crop
from toolkit.report import hardware_program

FAMILIES = ("result-grid", "staging")


def simulate(preset: str, overrides: dict, options: dict) -> int:
    c = toolkit.compile(get_workload(preset, **overrides), options=options)
    return int(crop(c.profile).cropped_cycles)


def run(families: tuple[str, ...] = FAMILIES) -> dict:
    """Every member of ``families`` from its lines; the control's own-syntax program beside its lines'."""
    rows = [r for r in load_experiments().iter_rows(named=True) if r["family"] in families]
    cache: dict[tuple, int] = {}
    out = []
    for r in rows:
        preset, overrides, options = hardware_program(r)
        lines = r["lines"].split(";") if r["lines"] else []
        if not lines:
            raise SystemExit(f"{r['workload']}: no ipu-stack lines in the table for member {r['member']!r}")
        written, _ = member_lines(preset, options, batch=int(r["batch"]))
        key = (preset, json.dumps(overrides, sort_keys=True), tuple(lines))
        t = time.perf_counter()
        if key not in cache:
            cache[key] = simulate(preset, overrides, {**options, "plans": lines})
        same = written == [line.replace(":batch-1:", ":streamed:") for line in lines]   # one per epoch, either
        out.append({**r, "lines": lines, "same": same, "simulated": cache[key],
                    "seconds": time.perf_counter() - t})
    ctl = next(r for r in rows if r["control"])
    preset, overrides, options = hardware_program(ctl)
    syntax = simulate(preset, overrides, options)
    return {"members": out, "control_syntax": syntax,
            "control_lines": cache[(preset, json.dumps(overrides, sort_keys=True), tuple(ctl["lines"].split(";")))]}


def figures(result: dict) -> dict:
    """Per member the simulated and hardware changes from the family's control; pooled and per family the
    Spearman, median and worst change error; each control's ratio to hardware; lines / our syntax."""
    members = result["members"]
    changes = []
    for fam in dict.fromkeys(r["family"] for r in members):
        rows = [r for r in members if r["family"] == fam]
        ctl = next(r for r in rows if r["control"])
        for r in rows:
            if not r["control"]:
                hw = 100 * (r["hardware_cycles"] / ctl["hardware_cycles"] - 1)
                sim = 100 * (r["simulated"] / ctl["simulated"] - 1)
                changes.append({"family": fam, "member": r["member"], "hw": hw, "sim": sim, "diff": sim - hw})

    def summary(ch: list[dict]) -> dict:
        d = [abs(c["diff"]) for c in ch]
        return {"n": len(ch), "spearman": spearman([c["sim"] for c in ch], [c["hw"] for c in ch]),
                "median": statistics.median(d) if d else float("nan"), "worst": max(d) if d else float("nan")}

    fams = {fam: summary([c for c in changes if c["family"] == fam]) for fam in dict.fromkeys(
        r["family"] for r in members)}
    ctl = next(r for r in members if r["control"])
    return {"changes": changes, "pooled": summary(changes), "families": fams,
            "control_ratio": ctl["simulated"] / ctl["hardware_cycles"],
            "lines_over_syntax": result["control_lines"] / result["control_syntax"]}


def report(result: dict) -> list[str]:
    f = figures(result)
    p = f["pooled"]
    lines = [
        "The `result-grid` and `staging` families of `toolkit/data/hardware_programs.csv` (its `lines` column) "
        "compiled from "
        "ipu-stack's `--gemm-plan-constraint` lines as `scripts/mlp-layout-alternatives.py` prints them (FP16 "
        "weights, `siglip-mlp-benchmark` batch 1). Targets: Spearman >= 0.8, median |sim change - hw change| "
        "<= 1 pp, worst <= 5 pp, control 0.95-1.05 of hardware, control lines within 2 % of our syntax's program.",
        "",
        f"**Pooled over {p['n']} members: Spearman = {p['spearman']:.3f}, median = {p['median']:.2f} pp, worst = "
        f"{p['worst']:.2f} pp; control (lines) {result['control_lines']:,} = {f['control_ratio']:.3f} of hardware; "
        f"control lines / our syntax ({result['control_syntax']:,}) = {f['lines_over_syntax']:.4f}.**", "",
        "| family | members | Spearman | median abs diff (pp) | worst (pp) |", "|---|---:|---:|---:|---:|"]
    for fam, s in f["families"].items():
        lines.append(f"| {fam} | {s['n']} | {s['spearman']:.3f} | {s['median']:.2f} | {s['worst']:.2f} |")
    by = {(c["family"], c["member"]): c for c in f["changes"]}
    lines += ["", "| family | member | lines | member_lines same | hardware | simulated | hw change % | "
              "sim change % | diff pp |", "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for r in result["members"]:
        c = by.get((r["family"], r["member"]))
        chg = f"{c['hw']:+.2f} | {c['sim']:+.2f} | {c['diff']:+.2f}" if c else "control | control | "
        lines.append(f"| {r['family']} | {r['member']} | `{r['lines'][0]}` `{r['lines'][1]}` | "
                     f"{'yes' if r['same'] else 'no'} | {r['hardware_cycles']:,} | {r['simulated']:,} | {chg} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", action="append", choices=FAMILIES, help="only this family (repeatable)")
    args = ap.parse_args()
    result = run(tuple(args.family) if args.family else FAMILIES)
    text = report(result)
    print("\n".join(text))
    if not args.family:
        write_section("lines", "\n".join(text))


if __name__ == "__main__":
    main()
