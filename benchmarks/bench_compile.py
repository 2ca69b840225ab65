"""Compile-core benchmark (issue: layout search, BSP schedule, per-tile programs).

Measures, each in a fresh subprocess (so peak RSS is the stage's own):
- record counts of encoder-b8 (symbolic and expanded) beside the audit's
  603 phases / 537,017 commands / 885,329 transfers / 1,076,111 allocations;
- wall time and peak RSS of graph + layout search + schedule (with
  verify_schedule) + tile lowering for encoder-b8;
- the same stages for siglip-so400m with 27 layers against one layer;
- layout search time for mlp-b2-n3 (the seeds: 351.658 s of schedule selection).

Run: python -m benchmarks.bench_compile
"""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks._results import write_section

CHILD = r"""
import json, resource, time, sys
import polars as pl
import toolkit
from toolkit.layout import search_layouts
from toolkit.schedule import schedule
from toolkit.schedule.verify import verify_schedule
from toolkit.tiles import lower_tiles
name, batch, blocks, only_search = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
pins = json.loads(sys.argv[5])
t = {}
s0 = time.perf_counter()
g = toolkit.build_graph(name, batch=batch, blocks=blocks)
t["graph"] = time.perf_counter() - s0
s = time.perf_counter()
lay = search_layouts(g, toolkit.ipu21(), toolkit.Options(**pins))
t["layout"] = time.perf_counter() - s
out = {"times": t, "candidates": lay.candidates.height}
if not only_search:
    s = time.perf_counter()
    sch = schedule(lay.graph, lay.chosen, toolkit.ipu21(), tiles=lay.tiles)
    verify_schedule(sch)
    t["schedule"] = time.perf_counter() - s
    s = time.perf_counter()
    tiles = lower_tiles(sch)
    t["tiles"] = time.perf_counter() - s
    out["summary"] = sch.summary()
    out["unique_transfers"] = sch.transfers["transfer_id"].n_unique()
    out["chosen"] = str(lay.chosen)
    out["pins"] = {k: getattr(lay.chosen, k) for k in ("row_block", "row_shard", "inner_split", "weight_class",
                                                       "fused_qkv")}
    if lay.chosen.plans:
        out["pins"] = {k: getattr(lay.chosen, k) for k in ("row_block", "stream_block", "weight_class", "fused_qkv",
                                                           "stream_weights")}
        out["pins"].update(plan_search=False, plans={n: p.label() for n, p in lay.chosen.plans})
t["total"] = time.perf_counter() - s0
out["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def run(name: str, batch: int, blocks: int, only_search: bool = False, pins: dict | None = None) -> dict:
    cmd = [sys.executable, "-c", CHILD, name, str(batch), str(blocks), "1" if only_search else "0",
           json.dumps(pins or {})]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


PLACED = r"""
import json, sys
import polars as pl
import toolkit
c = toolkit.compile(sys.argv[1], options={"simulate": False})
chosen = c.layout.chosen
if chosen.plans:   # per-op plans: pin them (the global grid knobs do not apply to those ops)
    pins = {"row_block": chosen.row_block, "stream_block": chosen.stream_block or chosen.row_block,
            "weight_class": chosen.weight_class, "fused_qkv": chosen.fused_qkv, "plan_search": False,
            "plans": {name: g.label() for name, g in chosen.plans}}
else:
    row = c.layout.candidates.filter(pl.col("chosen")).row(0, named=True)
    keys = ("row_block", "stream_block", "row_shard", "inner_split", "weight_class", "fused_qkv")
    pins = {k: row[k] for k in keys}
print(json.dumps({"pins": pins, "placed": c.placement.fits}))
"""


def placed_layout(name: str) -> dict:
    """The layout the full pipeline ends with (the first beam finalist that places), as pins."""
    done = subprocess.run([sys.executable, "-c", PLACED, name], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    enc = run("encoder-b8", 8, 1)
    placed = placed_layout("encoder-b8")
    enc_placed = run("encoder-b8", 8, 1, pins=placed["pins"])
    many = run("siglip-so400m", 1, 27)
    many_pinned = run("siglip-so400m", 1, 27, pins=many["pins"])   # 27 layers, the layout pinned (no search)
    one = run("siglip-so400m", 1, 1, pins=many["pins"])      # the same layout, one layer
    one_free = run("siglip-so400m", 1, 1)                    # one layer, its own best layout
    b2n3 = run("mlp-b2-n3", 2, 3, only_search=True)
    s = enc["summary"]
    t = enc["times"]
    lines = [
        "### encoder-b8 record counts (repeat instances expanded; one layer, so symbolic = expanded)",
        "",
        "| record | toolkit | audit (old compiler) |",
        "|---|---:|---:|",
        f"| phases | {s['phases']:,} | 603 |",
        f"| compute commands (incl. local copies) | {s['commands']:,} | 537,017 |",
        f"| transfers (one row per destination) | {s['transfers']:,} | 885,329 |",
        f"| logical transfers (multicast counted once) | {enc['unique_transfers']:,} | |",
        f"| memory objects (staging: one per tile per exchange phase) | {s['objects']:,} | 1,076,111 allocations |",
        "",
        f"Chosen layout: `{enc['chosen']}` ({enc['candidates']} candidates).",
        "",
        "### encoder-b8: graph + layout search + schedule (verified) + tiles",
        "",
        "| stage | seconds |",
        "|---|---:|",
        *(f"| {k} | {v:.2f} |" for k, v in t.items()),
        f"| **peak RSS** | **{enc['rss_mib']:.0f} MiB** |",
        "",
        "Targets: <= 5 s and <= 2 GiB on this 2-core machine.",
        "",
        "The search's choice above is the fastest finalist by the refined estimate; the full pipeline then places "
        "finalists in that order and keeps the first that fits in SRAM. With the layout it ends with pinned "
        f"(`{placed['pins']}`, placed: {placed['placed']}), the same stages take "
        f"**{enc_placed['times']['total']:.2f} s** (search {enc_placed['times']['layout']:.2f}, schedule "
        f"{enc_placed['times']['schedule']:.2f}, tiles {enc_placed['times']['tiles']:.2f}), peak RSS "
        f"{enc_placed['rss_mib']:.0f} MiB, for {enc_placed['summary']['phases']:,} phases, "
        f"{enc_placed['summary']['commands']:,} commands, {enc_placed['summary']['transfers']:,} transfers and "
        f"{enc_placed['summary']['objects']:,} objects.",
        "",
        "### 27 layers against one (siglip-so400m, batch 1, same stages)",
        "",
        "27 layers keep 27 instances of every weight on the same tiles, so the search gathers weights (each",
        "block stored once over its row partitions); the fair N-scaling comparison pins that layout for both",
        "27 layers and one (no search in either).",
        "",
        "| case | seconds | symbolic phases | expanded phases | objects | peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|",
        *(f"| {label} | {r['times']['total']:.2f} | {r['summary']['symbolic_phases']:,} | "
          f"{r['summary']['phases']:,} | {r['summary']['objects']:,} | {r['rss_mib']:.0f} |"
          for label, r in (("1 layer, same layout", one), ("27 layers, same layout", many_pinned),
                           ("27 layers, searched", many), ("1 layer, own best layout", one_free))),
        "",
        f"27-layer layout: `{many['chosen']}`.",
        "",
        "Ratio 27 layers / 1 layer with the same layout: "
        f"**{many_pinned['times']['total'] / one['times']['total']:.2f}x** (target <= 2x).",
        "",
        "### Layout search, mlp-b2-n3",
        "",
        f"{b2n3['candidates']} candidates screened and the beam refined in **{b2n3['times']['layout']:.2f} s** "
        "(target <= 10 s; the seeds report 351.658 s of schedule selection for this workload).",
    ]
    write_section("compile", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
