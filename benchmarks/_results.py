"""Write one benchmark's section of benchmarks/RESULTS.md.

Each benchmark owns a section delimited by HTML comments, so benchmarks can be
re-run independently without clobbering each other's figures.
"""

from __future__ import annotations

import os
import platform
import re
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")
HEADER = ("# Benchmark results\n\nFigures written by the scripts in `benchmarks/`; each section names the command "
          "that produced it.\n")


def write_section(name: str, body: str, *, command: str | None = None) -> None:
    """Replace (or append) the section ``name`` with ``body`` (markdown)."""
    script = Path(sys.argv[0])
    runner = f"-m benchmarks.{script.stem}" if script.parent.name == "benchmarks" else script.as_posix()
    command = command or " ".join(["python", runner, *sys.argv[1:]])
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    block = (
        f"<!-- BEGIN {name} -->\n## {name}\n\nCommand: `{command}` ({stamp}; {machine})\n\n"
        f"{body.strip()}\n<!-- END {name} -->"
    )
    text = RESULTS.read_text() if RESULTS.exists() else HEADER
    pattern = re.compile(rf"<!-- BEGIN {re.escape(name)} -->.*?<!-- END {re.escape(name)} -->", re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    tmp = RESULTS.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(RESULTS)


def timed(fn, repeat: int) -> tuple[float, float, object]:
    """(best seconds, median seconds, last result) of ``repeat`` calls of ``fn``."""
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times), out
