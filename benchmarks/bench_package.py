"""Package sizing on the audit's scale cases: what templates and deduplication save.

For each workload, the pipeline's beam loop with the package: layout search,
then per beam candidate (chosen first) schedule, exchange, tile programs,
``size_package`` (timed) and one joint placement of the schedule's objects
together with the package's (timed; placement without the package is run too,
for comparison) until one fits; then ``package_images`` + ``verify_package``
+ the placement dump (timed).
Reported: the summary frame (bytes and records), the templates frame, and the
savings against two baselines computed in the same run: unrolling every
repeated instance (``bytes_if_unrolled``) and a package file that stores
every tile's objects and rows as they are (``loaded_bytes``).

Run: ``python -m benchmarks.bench_package [--quick] [--workloads a,b]``
(default: encoder-b8 and siglip-so400m, 27 layers at batch 1; ``--quick``:
mlp-small-repeat only, not written to RESULTS.md).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import polars as pl

import toolkit
from benchmarks._results import write_section
from toolkit.exchange import lower_exchanges
from toolkit.layout import search_layouts
from toolkit.layout.search import params_of
from toolkit.options import as_options
from toolkit.package import package_images, size_package, verify_package, write_placement_dump
from toolkit.placement import place
from toolkit.schedule import schedule
from toolkit.tiles import lower_tiles

SHOWN = ["tiles", "unique_images", "steps", "rows", "tile_unique_rows", "unique_rows", "unique_contents",
         "kernel_code_bytes", "supervisor_code_bytes", "code_bytes", "code_elements", "rows_bytes",
         "run_table_bytes", "argument_records", "relocation_records", "relocation_bytes", "total_bytes",
         "max_tile_bytes", "loaded_bytes", "image_bytes", "template_savings_bytes", "template_savings_records",
         "row_dedup_savings_bytes", "row_dedup_savings_records", "dedup_savings_bytes", "dedup_savings_records",
         "dedup_savings_images"]


def run(workload: str) -> dict:
    """The pipeline's beam loop, with the package: the first beam candidate whose objects and package place."""
    target = toolkit.ipu21()
    t0 = time.perf_counter()
    graph = toolkit.build_graph(workload)
    layout = search_layouts(graph, target, as_options(None))
    beam = (layout.candidates.filter(pl.col("beam"))
            .sort(pl.col("chosen").not_(), "sched_cycles", "candidate_id"))
    tries = []
    for row in beam.iter_rows(named=True):
        params = params_of(row)
        sched = schedule(layout.graphs[params.fused_qkv], params, target, tiles=layout.tiles)
        exchange = lower_exchanges(sched.transfers, target)
        tiles = lower_tiles(sched)
        stages_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        pkg = size_package(sched, exchange, tiles, target)
        size_s = time.perf_counter() - t0
        objs = pl.concat([sched.objects, pkg.objects])
        t0 = time.perf_counter()
        p = place(objs, target)
        place_s = time.perf_counter() - t0
        bare = place(sched.objects, target).fits
        tries.append(f"row block {row['row_block']}: {'fits' if p.fits else 'no fit'} with the package "
                     f"({'fits' if bare else 'no fit'} without)")
        print(f"{workload}: {tries[-1]}; size_package {size_s:.2f} s, place {place_s:.1f} s", flush=True)
        if p.fits:
            break
        t0 = time.perf_counter()
    images_s = None
    if p.fits:
        t0 = time.perf_counter()
        img = package_images(pkg, sched.objects, p.placement, target)
        verify_package(img, target)
        with tempfile.TemporaryDirectory() as d:
            write_placement_dump(img, Path(d) / "dump.json", target)
        images_s = time.perf_counter() - t0
    return {"workload": workload, "stages_s": stages_s, "size_s": size_s, "place_s": place_s,
            "images_s": images_s, "fits": p.fits, "failing_tiles": p.failures["tile"].n_unique(),
            "tries": tries, "row_block": row["row_block"],
            "schedule_objects": sched.objects.height, "package_objects": pkg.objects.height,
            "summary": pkg.summary, "templates": pkg.templates,
            "reason": p.failures["reason"][0] if p.failures.height else ""}


def _table(df: pl.DataFrame) -> str:
    cols = df.columns
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in df.iter_rows():
        lines.append("| " + " | ".join(f"{v:,}" if isinstance(v, int) else str(v) for v in row) + " |")
    return "\n".join(lines)


def report(results: list[dict]) -> str:
    summary = pl.concat([r["summary"].select(SHOWN) for r in results])
    names = [r["workload"] for r in results]
    long = summary.transpose(include_header=True, header_name="field", column_names=names)
    out = ["Summary frame of `size_package` (all tiles; bytes and records):", "", _table(long), ""]
    for r in results:
        s = r["summary"].row(0, named=True)
        out.append(f"**{r['workload']}** (row block {r['row_block']}; beam tries: {'; '.join(r['tries'])}): "
                   f"size_package {r['size_s']:.2f} s for {r['package_objects']:,} package objects next to "
                   f"{r['schedule_objects']:,} schedule objects; joint placement {r['place_s']:.1f} s, "
                   + ("fits" if r["fits"] else f"does NOT fit on {r['failing_tiles']} tiles; first reason: "
                      f"{r['reason']}")
                   + (f"; images + verify_package + dump {r['images_s']:.1f} s" if r["images_s"] else "") + ".")
        if r["templates"].height:
            t = r["templates"].row(0, named=True)
            out.append(f"  Template: block `{t['block']}` x {t['instances']} instances on {t['tiles']} tiles is "
                       f"{t['template_bytes']:,} B / {t['template_records']:,} records once, plus "
                       f"{t['relocation_records']:,} relocation records ({t['relocation_bytes']:,} B), against "
                       f"{t['bytes_if_unrolled']:,} B / {t['records_if_unrolled']:,} records unrolled: saves "
                       f"{t['savings_bytes']:,} B ({t['savings_bytes'] / max(t['bytes_if_unrolled'], 1):.0%}) and "
                       f"{t['savings_records']:,} records.")
        out.append(f"  Package file: {s['image_bytes']:,} B with every distinct content and row stored once, against "
                   f"{s['loaded_bytes']:,} B as loaded (saves {s['dedup_savings_bytes']:,} B, "
                   f"{s['dedup_savings_records']:,} records); {s['unique_rows']:,} distinct plan rows of "
                   f"{s['rows']:,}; {s['unique_images']:,} distinct tile images of {s['tiles']:,}.")
        out.append("")
    out.append("Size model and digests: `toolkit/package/size.py` docstring. Tile images differ almost everywhere "
               "because each tile's plan rows name its partners; kernel code, support code and rows repeat "
               "across tiles, which the package file stores once.")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workloads", default="encoder-b8,siglip-so400m")
    args = ap.parse_args()
    names = ["mlp-small-repeat"] if args.quick else args.workloads.split(",")
    results = []
    for name in names:
        r = run(name)
        results.append(r)
    text = report(results)
    print(text)
    if not args.quick:
        write_section("package", text)


if __name__ == "__main__":
    main()
