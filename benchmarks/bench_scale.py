"""Scale benchmark (#15): the whole pipeline on the large presets against its targets.

Each case runs in a fresh subprocess, so its peak RSS is its own:

- ``toolkit.compile("encoder-b8")`` (default options: every stage verified,
  simulated profile): wall, process CPU, peak RSS and the stage timings;
- encoder-b8's compile core as ``bench_compile`` measures it (graph + layout
  search + schedule with ``verify_schedule`` + tiles), measured in the same
  run, and the ratio whole / core;
- ``toolkit.compile("siglip-so400m")`` (27 layers, batch 1);
- ``toolkit.check`` on encoder-b8 (the compile without the profile, then the
  functional check): the check's own wall and CPU, and the process's.

The machine may be shared: wall and CPU seconds are both recorded, and a case
is "over" when its wall is (CPU says whether the process or the machine was
slow).

Run: ``python -m benchmarks.bench_scale``.
"""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks._results import write_section

GIB = 1024**3

#: case -> (wall seconds, peak RSS bytes) targets
TARGETS = {
    "compile encoder-b8": (8.0, 2 * GIB),
    "compile siglip-so400m": (12.0, 2.5 * GIB),
    "check encoder-b8": (40.0, 3 * GIB),
}

COMPILE = r"""
import json, resource, sys, time
import polars as pl
t0, c0 = time.perf_counter(), time.process_time()
import toolkit
c = toolkit.compile(sys.argv[1])
out = {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
       "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
       "timings": c.timings, "placed": c.placement.fits,
       "tried": c.layout.candidates.filter(pl.col("placed").is_not_null()).height,
       "cycles": c.lowered_cycles()}
print(json.dumps(out))
"""

CORE = r"""
import json, resource, time
t0, c0 = time.perf_counter(), time.process_time()
import toolkit
from toolkit.layout import search_layouts
from toolkit.schedule import schedule
from toolkit.schedule.verify import verify_schedule
from toolkit.tiles import lower_tiles
g = toolkit.build_graph("encoder-b8", batch=8, blocks=1)
lay = search_layouts(g, toolkit.ipu21(), toolkit.Options())
sch = schedule(lay.graph, lay.chosen, toolkit.ipu21(), tiles=lay.tiles)
verify_schedule(sch)
lower_tiles(sch)
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

CHECK = r"""
import json, resource, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import toolkit
c = toolkit.compile(sys.argv[1], options={"simulate": False})
t1, c1 = time.perf_counter(), time.process_time()
r = toolkit.check(c)
out = {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
       "check_wall": time.perf_counter() - t1, "check_cpu": time.process_time() - c1,
       "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
       "passed": bool(r.passed), "max_abs_error": float(r.max_abs_error)}
print(json.dumps(out))
"""


def run(script: str, *args: str) -> dict:
    """One fresh process; its last stdout line as JSON (times include importing toolkit)."""
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def verdict(case: str, wall: float, rss: float) -> str:
    max_wall, max_rss = TARGETS[case]
    over = [what for what, bad in (("wall", wall > max_wall), ("RSS", rss > max_rss)) if bad]
    return "within" if not over else "over (" + ", ".join(over) + ")"


def row(case: str, r: dict, wall: float, cpu: float) -> str:
    max_wall, max_rss = TARGETS[case]
    return (f"| {case} | {wall:.1f} | {cpu:.1f} | {r['rss'] / GIB:.2f} | <= {max_wall:.0f} s / "
            f"{max_rss / GIB:g} GiB | {verdict(case, wall, r['rss'])} |")


def main() -> None:
    enc = run(COMPILE, "encoder-b8")
    core = run(CORE)
    sig = run(COMPILE, "siglip-so400m")
    chk = run(CHECK, "encoder-b8")
    stages = ", ".join(f"{k} {v:.2f}" for k, v in enc["timings"].items())
    sig_stages = ", ".join(f"{k} {v:.2f}" for k, v in sig["timings"].items())
    lines = [
        "Each case in a fresh process (peak RSS per case; wall and CPU include importing toolkit). "
        "The machine may be shared: CPU seconds say how much of the wall was this process.",
        "",
        "| case | wall s | CPU s | peak RSS GiB | target | verdict |",
        "|---|---:|---:|---:|---|---|",
        row("compile encoder-b8", enc, enc["wall"], enc["cpu"]),
        row("compile siglip-so400m", sig, sig["wall"], sig["cpu"]),
        row("check encoder-b8", chk, chk["check_wall"], chk["check_cpu"]),
        "",
        f"**encoder-b8 whole / core**: {enc['wall']:.1f} s / {core['wall']:.1f} s = "
        f"**{enc['wall'] / core['wall']:.2f}x** wall ({enc['cpu']:.1f} / {core['cpu']:.1f} CPU s = "
        f"{enc['cpu'] / core['cpu']:.2f}x); core = graph + layout search + schedule (verified) + tiles as "
        f"`bench_compile` measures it, peak RSS {core['rss'] / GIB:.2f} GiB.",
        "",
        f"encoder-b8 stages (s, summed over finalists): {stages}; finalists tried {enc['tried']}, placed "
        f"{enc['placed']}, lowered estimate {enc['cycles']:,} cycles.",
        "",
        f"siglip-so400m stages (s): {sig_stages}; finalists tried {sig['tried']}, placed {sig['placed']}, "
        f"lowered estimate {sig['cycles']:,} cycles.",
        "",
        f"check encoder-b8: the check itself {chk['check_wall']:.1f} s wall / {chk['check_cpu']:.1f} s CPU; the "
        f"process (compile without the profile, then the check) {chk['wall']:.1f} s wall / {chk['cpu']:.1f} s "
        f"CPU; passed {chk['passed']}, max abs error {chk['max_abs_error']:.6f}.",
    ]
    write_section("scale", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
