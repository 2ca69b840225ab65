"""Every preset workload through the whole pipeline: does it place on the chip?

For each preset (default options, no simulation) this compiles graph -> layout
-> schedule -> exchange -> tiles -> package -> joint placement, each stage
verified (``verify_placement`` included), in a fresh subprocess, and records
whether the chosen layout placed, how many beam finalists were tried, the
largest live set of any tile beside the capacity and the wall time.

Run: python -m benchmarks.bench_presets
"""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks._results import write_section

CHILD = r"""
import json, resource, sys, time
import polars as pl
import toolkit
name = sys.argv[1]
t = time.perf_counter()
c = toolkit.compile(name, options={"simulate": False})
wall = time.perf_counter() - t
s = c.summary().row(0, named=True)
cand = c.layout.candidates
target = c.target
print(json.dumps({
    "placed": c.placement.fits, "tried": int(cand["placed"].is_not_null().sum()), "beam": int(cand["beam"].sum()),
    "tiles_used": s["tiles_used"], "objects": c.placement.placement.height, "peak": s["peak_sram_bytes"],
    "screen_peak": s["screen_peak_bytes"], "capacity": target.load_limit - target.memory_start,
    "lowered_cycles": s["lowered_cycles"],
    "layout": {k: s[k] for k in ("row_block", "local_rows", "plans", "row_shard", "inner_split", "weight_class",
                                 "fused_qkv")},
    "stream_block": cand.filter(pl.col("chosen"))["stream_block"].item(),
    "wall": wall, "place_s": c.timings.get("placement", 0.0),
    "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def _shape(lay: dict) -> str:
    """What the chosen layout runs: its per-op plans and the most rows a matmul holds per tile, or the grid."""
    if lay["plans"]:
        return f"{lay['plans']} (local rows {lay['local_rows']})"
    return f"rb {lay['row_block']}, shard {lay['row_shard']}, split {lay['inner_split']}"


def _peak(r: dict) -> str:
    """The placed peak, or (when the preset did not place) that there is none, with the screen's estimate."""
    return f"{r['peak']:,}" if r["peak"] is not None else f"none placed (screen {r['screen_peak']:,})"


def run(name: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, name], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    from toolkit.graph import PRESETS

    rows = []
    for name, w in PRESETS.items():
        r = run(name)
        lay = r["layout"]
        rows.append(
            f"| {name} | {w.batch} | {w.blocks} | {'yes' if r['placed'] else '**no**'} | {r['tried']} of {r['beam']} "
            f"| {r['tiles_used']:,} | {r['objects']:,} | {_peak(r)} / {r['capacity']:,} "
            f"| {_shape(lay)}, stream {r['stream_block']}, {lay['weight_class']}, "
            f"{'fused' if lay['fused_qkv'] else 'separate'} QKV "
            f"| {r['lowered_cycles']:,} | {r['wall']:.1f} | {r['place_s']:.1f} | {r['rss_mib']:,.0f} |")
        print(rows[-1], flush=True)
    body = "\n".join([
        "Every preset compiled with default options through joint placement, every stage verified "
        "(`verify_placement` included); one fresh process each. `finalists tried`: beam finalists scheduled and "
        "placed until one fit. `peak live`: the largest set of bytes live at one event on any tile, against "
        "the tile memory above the reserved base.",
        "",
        "| preset | batch | layers | placed | finalists tried | tiles used | placed objects | peak live / capacity B "
        "| chosen layout | est. cycles | compile s | placement s | peak RSS MiB |",
        "|---|---:|---:|---|---|---:|---:|---:|---|---:|---:|---:|---:|",
        *rows,
    ])
    write_section("presets", body)


if __name__ == "__main__":
    main()
