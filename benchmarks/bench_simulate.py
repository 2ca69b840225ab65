"""Simulated cropped cycles of the joint-placement cases beside the hardware figures and the roofline.

Run: ``python -m benchmarks.bench_simulate [--skip-encoder] [--repeat 3]``. Writes the
"simulate" section of benchmarks/RESULTS.md. Hardware figures are the
renderer-cropped spans in toolkit/data/hardware_programs.csv (from
../shared/seeds/joint-sram-placement.md; mlp-small-repeat passed hardware
checking but has no cycle figure). The cost model is calibrated on measured
kernels (``toolkit.costs``), never on these programs: the ratio is what it is. Also times
``simulate`` on encoder-b8 (one so400m encoder layer, batch 8).
"""

from __future__ import annotations

import argparse
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
            rows.append(f"| {w} | compile failed: {why} | {_fmt(hw)} |" + " |" * 9)
            kinds.append(f"| {w} | | | |")
            print(rows[-1], flush=True)
            continue
        compile_s = time.perf_counter() - t
        best, _, p = timed(lambda c=c: simulate(c), repeat)
        sim = crop(p).cropped_cycles
        r = roofline(c)
        ideal = int(r.filter(pl.col("name") == "total")["ideal_cycles"].item())
        tiles_used = int(c.tiles.per_tile.height)
        used = int(roofline(c, tiles=tiles_used).filter(pl.col("name") == "total")["ideal_cycles"].item())
        ratio = "n/a" if hw is None else f"{sim / hw:.2f}"
        hw_roof = "n/a" if hw is None else f"{hw / ideal:.1f}"
        rows.append(f"| {w} | {_fmt(sim)} | {_fmt(hw)} | {ratio} | {_fmt(ideal)} | {sim / ideal:.1f} | {hw_roof} "
                    f"| {tiles_used} | {_fmt(used)} | {p.samples.height:,} | {best * 1e3:.0f} | {compile_s:.1f} |")
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
    sim = crop(p).cropped_cycles
    ideal = int(roofline(c).filter(pl.col("name") == "total")["ideal_cycles"].item())
    return (f"encoder-b8: simulate {best:.2f} s best, {median:.2f} s median of {repeat} "
            f"({p.samples.height:,} samples, {p.activities.height:,} exchange activities, "
            f"{c.tiles.per_tile.height} tiles; compile {compile_s:.0f} s not included). "
            f"Simulated cropped cycles {sim:,}; roofline {ideal:,} ({sim / ideal:.1f}x).")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-encoder", action="store_true")
    args = ap.parse_args()
    rows, kinds = case_rows(args.repeat)
    enc = "encoder-b8: skipped (--skip-encoder)." if args.skip_encoder else encoder(args.repeat)
    print(enc)
    body = "\n".join([
        "Simulated profiles (`toolkit.simulate.simulate`, the hardware-calibrated cost model `toolkit.costs`, no "
        "calibration file) cropped with `toolkit.profile.crop`, beside the hardware cropped spans of "
        "`seeds/joint-sram-placement.md` and the MAC-bound roofline (every matmul's MACs / (1472 tiles x the AMP "
        "rate of its precision: 128 MAC/cycle for FP8, 64 for FP16)). The cost model is fitted to measured "
        "kernels, never to these programs. Simulated cycles include one initial sync (600 cycles) and equal the "
        "stages' own "
        "estimate (`Compilation.est_cycles()`) plus that sync. Our layouts are our search's choice, not the "
        "hardware runs' layouts, so the ratio compares two compilers' programs as well as two cost models.",
        "",
        "| workload | simulated | hardware | sim / hw | roofline | sim / roof | hw / roof | tiles used "
        "| roofline on used tiles | samples | simulate ms | compile s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "Where the simulated cycles go (sum of phase spans by phase kind):",
        "",
        "| workload | compute | exchange | sync |",
        "|---|---:|---:|---:|",
        *kinds,
        "",
        enc,
    ])
    write_section("simulate", body, command="python -m benchmarks.bench_simulate")


if __name__ == "__main__":
    main()
