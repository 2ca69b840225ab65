"""Simulated cropped cycles of the joint-placement cases beside the hardware figures and the roofline.

Run: ``python -m benchmarks.bench_simulate [--skip-encoder] [--repeat 3]``. Writes the
"simulate" section of benchmarks/RESULTS.md. Hardware figures are the
renderer-cropped spans in toolkit/data/hardware_programs.csv (from
../shared/seeds/joint-sram-placement.md; mlp-small-repeat passed hardware
checking but has no cycle figure). The cost model is calibrated on measured
kernels (``toolkit.costs``), never on these programs: the ratio is what it is. Also times
``simulate`` on encoder-b8 (one so400m encoder layer, batch 8), and the whole default compile of
siglip-so400m (27 layers, simulation included) in a fresh process: wall, CPU and peak RSS, the simulate stage,
the crop, and what expanding the profile's frames on request costs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import polars as pl

import toolkit
from benchmarks._results import timed, write_section
from toolkit.errors import ToolkitError
from toolkit.profile import crop
from toolkit.report import hardware_programs
from toolkit.simulate import roofline, simulate

CASES = ("mlp-single-b1", "mlp-single-b4", "attention-b1", "attention-fused-b1", "mlp-b2-n3", "mlp-small-repeat")
_MEASURED = hardware_programs()
#: renderer-cropped hardware cycles (toolkit/data/hardware_programs.csv); mlp-small-repeat has no cycle figure
HARDWARE = {w: dict(zip(_MEASURED["workload"], _MEASURED["hardware_cycles"], strict=True)).get(w) for w in CASES}



def _by_kind(profile) -> dict[str, int]:
    """Sum of phase spans by phase kind (the initial sync counted as sync)."""
    s = crop(profile).samples
    spans = (s.group_by("phase", "kind").agg((pl.col("end_offset_cycles").max()
                                              - pl.col("start_offset_cycles").min()).alias("span"))
             .group_by("kind").agg(pl.col("span").sum()))
    return dict(zip(spans["kind"].to_list(), spans["span"].to_list(), strict=True))


def _expanded(profile):
    """Read every frame of ``profile``: a simulated profile expands its per-instance rows on the first read."""
    for name in ("samples", "activities", "metadata"):
        getattr(profile, name)
    return profile


def _fmt(v) -> str:
    return "n/a" if v is None else f"{v:,}"


def case_rows(repeat: int) -> tuple[list[str], list[str]]:
    rows, kinds = [], []
    for w, hw in HARDWARE.items():
        t = time.perf_counter()
        try:
            c = toolkit.compile(w)
        except ToolkitError as exc:  # the pipeline is shared work in progress: report, do not hide the case
            why = str(exc).splitlines()[0]
            rows.append(f"| {w} | compile failed: {why} | {_fmt(hw)} |" + " |" * 10)
            kinds.append(f"| {w} | | | |")
            print(rows[-1], flush=True)
            continue
        compile_s = time.perf_counter() - t
        best, _, p = timed(lambda c=c: simulate(c), repeat)
        expand, _, _ = timed(lambda c=c: _expanded(simulate(c)), repeat)
        sim = crop(p).cropped_cycles
        r = roofline(c)
        ideal = int(r.filter(pl.col("name") == "total")["ideal_cycles"].item())
        tiles_used = int(c.tiles.per_tile.height)
        used = int(roofline(c, tiles=tiles_used).filter(pl.col("name") == "total")["ideal_cycles"].item())
        ratio = "n/a" if hw is None else f"{sim / hw:.2f}"
        hw_roof = "n/a" if hw is None else f"{hw / ideal:.1f}"
        rows.append(f"| {w} | {_fmt(sim)} | {_fmt(hw)} | {ratio} | {_fmt(ideal)} | {sim / ideal:.1f} | {hw_roof} "
                    f"| {tiles_used} | {_fmt(used)} | {p.samples.height:,} | {best * 1e3:.0f} | {expand * 1e3:.0f} "
                    f"| {compile_s:.1f} |")
        k = _by_kind(p)
        kinds.append(f"| {w} | {_fmt(k.get('compute', 0))} | {_fmt(k.get('exchange', 0))} "
                     f"| {_fmt(k.get('synchronization', 0))} |")
        print(rows[-1], flush=True)
    return rows, kinds


def encoder(repeat: int) -> str:
    t = time.perf_counter()
    c = toolkit.compile("encoder-b8")
    compile_s = time.perf_counter() - t
    best, median, p = timed(lambda: simulate(c), repeat)
    expand, _, _ = timed(lambda: _expanded(simulate(c)), repeat)
    sim = crop(p).cropped_cycles
    ideal = int(roofline(c).filter(pl.col("name") == "total")["ideal_cycles"].item())
    return (f"encoder-b8: simulate {best:.2f} s best, {median:.2f} s median of {repeat}, {expand:.2f} s best with "
            f"its frames expanded "
            f"({p.samples.height:,} samples, {p.activities.height:,} exchange activities, "
            f"{c.tiles.per_tile.height} tiles; compile {compile_s:.0f} s not included). "
            f"Simulated cropped cycles {sim:,}; roofline {ideal:,} ({sim / ideal:.1f}x).")


SCALE = "siglip-so400m"
SCALE_CHILD = r"""
import json, resource, sys, time
import toolkit
from toolkit.profile import crop
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out = {}
t, cpu = time.perf_counter(), time.process_time()
c = toolkit.compile(sys.argv[1])
out.update(compile_s=time.perf_counter() - t, compile_cpu_s=time.process_time() - cpu, compile_rss=rss(),
           simulate_s=c.timings["simulate"])
t = time.perf_counter()
out["cropped"] = crop(c.profile).cropped_cycles
out["crop_s"] = time.perf_counter() - t
out["crop_rss"] = rss()
for name in ("samples", "activities", "metadata"):
    t = time.perf_counter()
    out[name] = getattr(c.profile, name).height
    out[name + "_s"] = time.perf_counter() - t
out["expanded_rss"] = rss()
print(json.dumps(out))
"""


def scale() -> str:
    """The whole default compile of SCALE in a fresh process, then its profile's frames expanded on request."""
    done = subprocess.run([sys.executable, "-c", SCALE_CHILD, SCALE], capture_output=True, text=True, check=True)
    r = json.loads(done.stdout.strip().splitlines()[-1])
    return (f"{SCALE} (27 layers), `toolkit.compile` with default options (simulation included), fresh process: "
            f"{r['compile_s']:.1f} s wall, {r['compile_cpu_s']:.1f} s CPU, peak RSS {r['compile_rss']:,.0f} MiB; "
            f"the simulate stage {r['simulate_s']:.2f} s (a repeated block's phases are timed once; the "
            f"per-instance samples, activities and metadata are LazyFrames expanded on request). "
            f"`crop` {r['crop_s']:.2f} s ({r['cropped']:,} cycles; it reads only the counter columns), peak RSS "
            f"then {r['crop_rss']:,.0f} MiB. Expanding on request: samples {r['samples_s']:.1f} s "
            f"({r['samples']:,} rows), activities {r['activities_s']:.1f} s ({r['activities']:,} rows), metadata "
            f"{r['metadata_s']:.1f} s ({r['metadata']:,} rows); peak RSS with all three {r['expanded_rss']:,.0f} "
            f"MiB. Wall times are noisy: the machine is shared.")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-encoder", action="store_true")
    ap.add_argument("--skip-scale", action="store_true", help=f"skip the whole compile of {SCALE}")
    args = ap.parse_args()
    rows, kinds = case_rows(args.repeat)
    enc = "encoder-b8: skipped (--skip-encoder)." if args.skip_encoder else encoder(args.repeat)
    print(enc)
    big = f"{SCALE}: skipped (--skip-scale)." if args.skip_scale else scale()
    print(big)
    body = "\n".join([
        "Simulated profiles (`toolkit.simulate.simulate`, the hardware-calibrated cost model `toolkit.costs`, no "
        "calibration file) cropped with `toolkit.profile.crop`, beside the hardware cropped spans of "
        "`seeds/joint-sram-placement.md` and the MAC-bound roofline (every matmul's MACs / (1472 tiles x the AMP "
        "rate of its precision: 128 MAC/cycle for FP8, 64 for FP16)). The cost model is fitted to measured "
        "kernels, never to these programs. Simulated cycles include one initial sync (600 cycles) and equal the "
        "stages' own "
        "estimate (`Compilation.lowered_cycles()`) plus that sync. Our layouts are our search's choice, not the "
        "hardware runs' layouts, so the ratio compares two compilers' programs as well as two cost models. "
        "`simulate ms` is the stage alone (its per-instance frames are LazyFrames); `with frames ms` also "
        "expands samples, activities and metadata.",
        "",
        "| workload | simulated | hardware | sim / hw | roofline | sim / roof | hw / roof | tiles used "
        "| roofline on used tiles | samples | simulate ms | with frames ms | compile s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "Where the simulated cycles go (sum of phase spans by phase kind):",
        "",
        "| workload | compute | exchange | sync |",
        "|---|---:|---:|---:|",
        *kinds,
        "",
        enc,
        "",
        big,
    ])
    write_section("simulate", body, command="python -m benchmarks.bench_simulate")


if __name__ == "__main__":
    main()
