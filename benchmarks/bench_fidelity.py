"""Fidelity of the cost model: measured kernels and whole programs, model beside hardware.

1. Every measured kernel row of ``tests/data/hardware_kernels.csv`` (HARDWARE.md
   sections 1-3, plus ``ipu-stack``'s hardware tests and docs that HARDWARE.md
   does not list): ``toolkit.costs.kernel_cycles`` against the hardware cycles.
2. Every whole-program hardware figure of ``toolkit/data/hardware_programs.csv``
   whose program we can express: the hardware's own graph (its preset, batch,
   blocks and graph fields) compiled with the options that express its
   program (weight format, pinned GEMM plans), simulated cropped cycles beside
   the hardware's renderer-cropped cycles, never a corrected figure; then
   where each program's cycles go, per op (compute, exchange, sync; repeat
   instances multiplied in; a repeat's carry of its output into its input
   counts to the block's last op). Rows sharing one program compile once. A
   figure of one region of a program (``region``: a repeat-remainder span,
   ``layer[1:]``) is set beside the same region of the simulated profile
   (``toolkit.profile.region_cycles``).
   Figures we cannot express yet are listed with what is missing; a preset
   not built here yet is reported as not available.
3. One repeated layer of each batch-1 27-layer program: its exchange beside
   the hardware's measured first-layer exchange where a document gives it.

Each program compiles in a fresh subprocess (its peak RSS is its own).

Run: python -m benchmarks.bench_fidelity [--skip-27]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import polars as pl

from benchmarks._results import write_section
from toolkit.costs import kernel_cycles
from toolkit.graph import PRESETS
from toolkit.report import hardware_program, hardware_programs

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "tests" / "data" / "hardware_kernels.csv"

CHILD = r"""
import json, resource, sys, time
import polars as pl
import toolkit
from toolkit.profile import crop
name, overrides, opts = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
t = time.perf_counter()
c = toolkit.compile(toolkit.graph.get_workload(name, **overrides), options=opts)
wall = time.perf_counter() - t
per_op = (toolkit.report.op_cycles(c).pivot("kind", index="op", values="cycles").fill_null(0))
order = c.graph.ops["name"].to_list()
rows = {r["op"]: {k: int(r.get(k, 0) or 0) for k in ("compute", "exchange", "sync")}
        for r in per_op.iter_rows(named=True)}
spans = c.spans()
regions = {r: int(v) for r, v in zip(spans["region"], spans["span_cycles"])}
regions.update({f"{b}[1:]": c.region_cycles(f"{b}[1:]") for b in spans["block"].drop_nulls().unique()})
layer = (c.schedule.phases.filter(pl.col("block") != "main").group_by("kind").agg(pl.col("est_cycles").sum())
         .rows())   # one instance of the repeated block (the repeat table multiplies it)
print(json.dumps({
    "cropped": int(crop(c.profile).cropped_cycles), "est": int(c.lowered_cycles()), "placed": bool(c.placement.fits),
    "compute": int(c.lowered_cycles("compute")), "exchange": int(c.lowered_cycles("exchange")),
    "sync": int(c.lowered_cycles("sync")), "per_op": [[n, rows[n]] for n in order if n in rows],
    "ops": {k: int(v) for k, v in zip(*c.graph.ops["kind"].value_counts(sort=True))},
    "plans": c.summary()["plans"].item(), "wall": wall, "regions": regions, "layer": {k: int(v) for k, v in layer},
    "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def kernel_section() -> str:
    d = pl.read_csv(KERNELS, schema_overrides={"padded": pl.Int64, "in_hardware_md": pl.Boolean})
    d = d.with_columns(kernel_cycles(d).alias("model")).with_columns(
        ((pl.col("model") - pl.col("hardware_cycles")) / pl.col("hardware_cycles") * 100).alias("error"))
    lines = ["### Measured kernels: `toolkit.costs.kernel_cycles` against the hardware", "",
             "| kernel | precision | weights | output | R / rows | C / cols | K / partials | hardware | model "
             "| error % | in HARDWARE.md | case |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in d.iter_rows(named=True):
        lines.append(f"| {r['kernel']} | {r['dtype']} | {r['weight_class'] or ''} | {r['output'] or ''} "
                     f"| {r['rows']} | {r['cols']} | {r['inner']} | {r['hardware_cycles']:,} | {r['model']:,} "
                     f"| {r['error']:+.2f} | {'yes' if r['in_hardware_md'] else 'no'} | {r['case']} |")
    lines += ["", "| rows | count | median abs error % | max abs error % |", "|---|---:|---:|---:|"]
    for label, part in (("HARDWARE.md sections 1-3", d.filter(pl.col("in_hardware_md"))),
                        ("other ipu-stack hardware measurements", d.filter(~pl.col("in_hardware_md"))),
                        ("all", d)):
        err = part["error"].abs()
        lines.append(f"| {label} | {part.height} | {err.median():.2f} | {err.max():.2f} |")
    lines += ["", "Sources per row are in `tests/data/hardware_kernels.csv`; `tests/test_costs.py` holds every row "
              "to median <= 2 % and max <= 5 %."]
    return "\n".join(lines)


def compile_child(name: str, overrides: dict, opts: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, name, json.dumps(overrides), json.dumps(opts)],
                         capture_output=True, text=True, check=False, cwd=ROOT)
    if out.returncode:
        return {"error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _key(row: dict) -> str:
    name, overrides, opts = hardware_program(row)
    return json.dumps([name, overrides, opts], sort_keys=True)


#: the hardware's measured exchange of one encoder layer (its first repeated layer, every exchange phase from the
#: last tile's entry) and the real scheduler's horizons for it: ipu-stack docs/PROFILE_ALLOCATION_2026_09_13.md,
#: 27 layers B1 FP8 (builds of 10,666,374 and 10,798,722 cropped cycles; the best build's layer is not reported)
LAYER_EXCHANGE = (("producer-fp8-20260913/pv-early-full", 10_666_374, 165_210, 157_023),
                  ("fp8-pv-batches-20260913/bs1-step64", 10_798_722, 169_890, 159_253))


def layer_lines(expressible: pl.DataFrame, results: dict) -> list[str]:
    """One repeated layer of each batch-1 27-layer program: its simulated exchange beside the hardware's first
    layer."""
    lines = ["", "One encoder layer of the 27-layer programs (one instance of the repeated block, lowered "
             "estimate): its exchange beside the hardware's first layer (every exchange phase of it, measured "
             "from the last tile's entry; the real scheduler's horizons beside) in the builds that report it "
             "(docs/PROFILE_ALLOCATION_2026_09_13.md).", "",
             "| figure | our layer: compute | exchange | sync | hardware build | its layer exchange "
             "| its scheduled | ours / hardware |", "|---|---:|---:|---:|---|---:|---:|---:|"]
    seen = set()
    for r in expressible.filter((pl.col("blocks") >= 27) & (pl.col("batch") == 1)).iter_rows(named=True):
        layer = results[_key(r)].get("layer")
        if not layer or _key(r) in seen:   # batch 1 as the builds ran; one row per distinct program
            continue
        seen.add(_key(r))
        for build, total, measured, scheduled in LAYER_EXCHANGE:
            lines.append(f"| {r['workload']} | {layer.get('compute', 0):,} | {layer.get('exchange', 0):,} "
                         f"| {layer.get('sync', 0):,} | {build} ({total:,}) | {measured:,} | {scheduled:,} "
                         f"| {layer.get('exchange', 0) / measured:.3f} |")
    return lines


def program_section(skip_27: bool) -> str:
    hw = hardware_programs()
    expressible = hw.filter(pl.col("expressible"))
    results: dict[str, dict] = {}
    for r in expressible.iter_rows(named=True):
        key = _key(r)
        if key in results:
            continue
        name, overrides, opts = hardware_program(r)
        if name not in PRESETS:
            results[key] = {"error": f"preset {name!r} not available"}
        elif skip_27 and r["blocks"] >= 27:
            results[key] = {"error": "skipped (--skip-27)"}
        else:
            results[key] = compile_child(name, overrides, opts)
        print(r["workload"], {k: v for k, v in results[key].items() if k != "per_op"}, flush=True)
    lines = ["### Whole programs: the hardware's graph, simulated cropped cycles beside hardware", "",
             "Each row is a figure of `toolkit/data/hardware_programs.csv`: the preset, batch, blocks and graph "
             "fields are the graph that ran; the options express its program (`{}`: our own layout search where "
             "the hardware's plan is its own search or not stated).", "",
             "| figure | preset | batch | blocks | graph | options | hardware | simulated | simulated / hardware "
             "| compute | exchange | sync | placed | our plans | compile s | source |",
             "|---|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---|---|---:|---|"]
    ratios: dict[str, list[float]] = {}
    for r in expressible.iter_rows(named=True):
        got = results[_key(r)]
        where = f" ({r['region']})" if r["region"] else ""
        lead = (f"| {r['workload']}{where} | {r['preset']} | {r['batch']} | {r['blocks']} | `{r['graph']}` "
                f"| `{r['options']}` | {r['hardware_cycles']:,} ")
        if "error" in got:
            lines.append(lead + f"| {got['error']} |" + " |" * 8 + f" {r['source']} |")
            continue
        value = got["cropped"] if not r["region"] else got.get("regions", {}).get(r["region"])
        if value is None:
            lines.append(lead + f"| region {r['region']} not in the simulated profile |" + " |" * 8
                         + f" {r['source']} |")
            continue
        ratio = value / r["hardware_cycles"]
        ratios.setdefault(r["preset"] + (" (regions)" if r["region"] else ""), []).append(ratio)
        lines.append(lead + f"| {value:,} | **{ratio:.3f}** | {got['compute']:,} | {got['exchange']:,} "
                     f"| {got['sync']:,} | {got['placed']} | {got['plans'] or 'grid'} | {got['wall']:.1f} "
                     f"| {r['source']} |")
    lines += ["", "| preset | figures compiled | median simulated / hardware | min | max |",
              "|---|---:|---:|---:|---:|"]
    for preset, rs in ratios.items():
        lines.append(f"| {preset} | {len(rs)} | {statistics.median(rs):.3f} | {min(rs):.3f} | {max(rs):.3f} |")
    for preset in ratios:   # the order of one preset's programs with pinned plans: ranked as the hardware ranks them?
        pinned = [(r["hardware_cycles"], results[_key(r)]["cropped"]) for r in expressible.iter_rows(named=True)
                  if r["preset"] == preset and not r["region"] and "plans" in json.loads(r["options"])
                  and "error" not in results[_key(r)]]
        if len(pinned) > 2:
            ranks = pl.DataFrame({"h": [h for h, _ in pinned], "s": [x for _, x in pinned]}).select(
                pl.col("h").rank(), pl.col("s").rank())
            rho = ranks.select(pl.corr("h", "s")).item()
            lines += ["", f"{preset}: Spearman rank correlation of simulated against hardware over its "
                      f"{len(pinned)} figures with pinned plans: {rho:.3f}."]
    lines += layer_lines(expressible, results)
    lines += ["", "Notes per figure (what the hardware ran, how our program differs):", ""]
    lines += [f"- **{r['workload']}**: {r['note']}" for r in expressible.iter_rows(named=True)]
    lines += ["", "### Figures we cannot express yet", "",
              "| figure | preset | hardware | missing | note | source |", "|---|---|---:|---|---|---|"]
    for r in hw.filter(~pl.col("expressible")).iter_rows(named=True):
        lines.append(f"| {r['workload']} | {r['preset']} | {r['hardware_cycles']:,} | {r['missing']} | {r['note']} "
                     f"| {r['source']} |")
    lines += ["", "### Where the cycles go (simulated program, per op; repeat instances multiplied in)", ""]
    seen = set()
    for r in expressible.iter_rows(named=True):
        key = _key(r)
        got = results[key]
        if key in seen or "error" in got:
            continue
        seen.add(key)
        figures = [x["workload"] for x in expressible.iter_rows(named=True) if _key(x) == key]
        ops = ", ".join(f"{n} {k}" for k, n in sorted(got["ops"].items()))
        lines += [f"**{r['preset']}** batch {r['batch']}, blocks {r['blocks']}, graph `{r['graph']}`, options "
                  f"`{r['options']}` ({ops}; figures: {', '.join(figures)}): simulated {got['cropped']:,} "
                  "(including the initial 600-cycle sync)", "",
                  "| op | compute | exchange | sync | total | share |", "|---|---:|---:|---:|---:|---:|"]
        total = sum(sum(v.values()) for _, v in got["per_op"])
        for op, v in got["per_op"]:
            t = sum(v.values())
            lines.append(f"| {op} | {v['compute']:,} | {v['exchange']:,} | {v['sync']:,} | {t:,} "
                         f"| {100 * t / max(total, 1):.1f} % |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--skip-27", action="store_true", help="leave out the 27-layer programs")
    args = ap.parse_args()
    body = kernel_section() + "\n\n" + program_section(args.skip_27)
    write_section("fidelity", body)


if __name__ == "__main__":
    main()
