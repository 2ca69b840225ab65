"""Reading any hostile file of at most 4 MB stays under 1 GiB of peak memory and 10 s (slow: each read runs in
a fresh interpreter whose peak RSS is measured; ``pytest -s`` prints the numbers).

The bombs: a gzip profile that expands a thousandfold (1 MB to 1 GiB), a Parquet profile of 16 Mi constant
rows, a Cap'n Proto profile whose 25,000 text pointers overlap one 2 MB text (quadratic expansion), JSON nested
2 million deep, a TOML grid file of a million-point grid; each must be refused by name. And the largest valid
profiles of at most 4 MB (gzip and Parquet, just within the limits) must be read."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

LIMIT_BYTES = 1 << 30
LIMIT_SECONDS = 10.0
FILE_BYTES = 4 << 20

MEASURE = """
import json, sys, time

def hwm():   # this process's peak resident set (VmHWM: reset by exec, unlike ru_maxrss after a fork)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

kind, path = sys.argv[1], sys.argv[2]
import toolkit
from toolkit.errors import ToolkitError
base = hwm()
t = time.perf_counter()
try:
    if kind == "profile":
        from toolkit.profile import read_profile
        read_profile(path)
    elif kind == "target":
        toolkit.load_target(path)
    elif kind == "grid":
        from toolkit.sweep import read_grid_file, sweep_points
        w, g = read_grid_file(path)
        sweep_points(w, g, toolkit.ipu21())
    outcome = "read"
except ToolkitError as exc:
    outcome = "refused: " + str(exc)[:300]
print(json.dumps({"outcome": outcome, "seconds": time.perf_counter() - t, "base_rss": base,
                  "peak_rss": hwm()}))
"""


def _measure(kind: str, path: Path) -> dict:
    size = sum(f.stat().st_size for f in path.rglob("*")) if path.is_dir() else path.stat().st_size
    assert size <= FILE_BYTES, size
    r = subprocess.run([sys.executable, "-c", MEASURE, kind, str(path)], capture_output=True, text=True,
                       timeout=120, cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    print(f"\n{path.name}: {got['outcome'][:120]} | {got['seconds']:.2f} s | peak RSS "
          f"{got['peak_rss'] / 2**20:.0f} MiB (after import {got['base_rss'] / 2**20:.0f} MiB)")
    return got


def _gzip_bomb(tmp: Path) -> Path:
    p = tmp / "bomb.capnp.gz"
    with gzip.open(p, "wb", compresslevel=6) as f:
        f.write(np.array([0, (1 << 30) // 8 - 2], "<u4").tobytes())   # a framing that declares 1 GiB
        zero = bytes(1 << 24)
        for _ in range(64):   # 1 GiB of zeros in about 1 MB (the 2.2 GB / 17.7 s example)
            f.write(zero)
    return p


def _parquet_bomb(tmp: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from toolkit import tables
    from toolkit.profile import synthetic_profile, write_parquet
    p = write_parquet(synthetic_profile(2, 4), tmp / "bomb.parquet")
    one = synthetic_profile(1, 1).samples.to_arrow()
    block = one.take(pa.array(np.zeros(1 << 20, np.int64)))
    with pq.ParquetWriter(p / "samples.parquet", block.schema, compression="zstd") as w:
        for _ in range(16):   # 16 Mi constant rows (the 64 Mi took 10.3 GB; a quarter shows the class)
            w.write_table(block, row_group_size=1 << 20)
    assert set(block.column_names) == set(tables.SAMPLES_SCHEMA)
    return p


def _overlap_bomb(tmp: Path) -> Path:
    """25,000 samples whose kernel texts all point into one 2 MB text, each starting a word later."""
    import polars as pl

    from toolkit.profile import Profile, capnp_io, synthetic_profile
    from toolkit.profile.wire import LIST_BYTE, Wire, expand, list_pointer
    n, long = 25_000, 2 << 20
    base = synthetic_profile(1, n)
    samples = base.samples.with_columns(
        pl.when(pl.col("sample") == 0).then(pl.lit("x" * long)).otherwise(pl.lit("")).alias("operation"))
    data = bytearray(capnp_io.encode(Profile(samples=samples, source="simulated")))
    w = Wire(bytes(data), "x")
    lay = capnp_io.layout()
    P, T, C, S = lay["Profile"], lay["TileProfile"], lay["CycleSample"], lay["Step"]

    def where(i):
        return str(i), None

    ps, pdw, ppw = w.structs(w.seg_start[:1], where, "root")
    tf, _tc, tdw, tpw = w.struct_lists(w.pointer(ps, pdw, ppw, P.slot["tiles"]), where, "tiles")
    sf, sc, sdw, spw = w.struct_lists(w.pointer(tf, tdw, tpw, T.slot["samples"]), where, "samples")
    spos, _, _ = expand(sf, sc, sdw + spw)
    st, stdw, stpw = w.structs(w.pointer(spos, sdw[0:1].repeat(len(spos)), spw[0:1].repeat(len(spos)),
                                         C.slot["step"]), where, "step")
    op = w.pointer(st, stdw, stpw, S.slot["operation"])
    start, count = w.lists(op[:1], where, "op", LIST_BYTE)
    kernel = w.pointer(st, stdw, stpw, S.slot["kernel"])
    k = np.arange(len(kernel))
    words = np.frombuffer(data, "<u8")
    words[kernel] = list_pointer(kernel, start[0] + k, LIST_BYTE, count[0] - 8 * k)
    p = tmp / "overlap.capnp"
    p.write_bytes(bytes(data))
    return p


def _deep_json(tmp: Path) -> Path:
    p = tmp / "deep.json"
    p.write_bytes(b"[" * (2 << 20) + b"]" * (2 << 20))
    return p


def _huge_grid(tmp: Path) -> Path:
    p = tmp / "grid.toml"
    p.write_text('workloads = ["mlp-small-repeat"]\n[grid]\nrow_block = ' + json.dumps(list(range(1, 1001)))
                 + "\nseed = " + json.dumps(list(range(1000))) + "\n")
    return p


def _dense(n: int):
    """A valid simulated profile of ``n`` near-constant samples (1,400 per tile): compresses as well as a
    real profile can."""
    import polars as pl

    from toolkit.profile import Profile, synthetic_profile
    base = synthetic_profile(1, 1).samples
    s = base.select(pl.all().repeat_by(n).explode()).with_columns(
        tile=(pl.int_range(0, n) // 1400).cast(base.schema["tile"]),
        sample=(pl.int_range(0, n) % 1400).cast(base.schema["sample"]))
    return Profile(samples=s, source="simulated")


def _largest_gzip(tmp: Path) -> Path:
    from toolkit.profile import capnp_io
    p = tmp / "largest.capnp.gz"
    p.write_bytes(gzip.compress(capnp_io.encode(_dense(700_000)), 9))   # about 4 MB, 48 MB inside
    return p


def _largest_parquet(tmp: Path) -> Path:
    from toolkit.files.read import TABLE_FLOOR, table_estimate
    from toolkit.profile import write_parquet
    p = write_parquet(_dense(3_400_000), tmp / "largest.parquet")
    assert sum(table_estimate(f)[1] for f in p.glob("*.parquet")) <= TABLE_FLOOR   # just within the limit
    return p


@pytest.mark.parametrize(("kind", "make"), [("profile", _largest_gzip), ("profile", _largest_parquet)])
def test_the_largest_valid_files_of_at_most_4_mb_read_within_1_gib_and_10_s(tmp_path, kind, make) -> None:
    path = make(tmp_path)
    got = _measure(kind, path)
    assert got["outcome"] == "read", got
    assert got["peak_rss"] < LIMIT_BYTES and got["seconds"] < LIMIT_SECONDS, got


@pytest.mark.parametrize(("kind", "make"), [("profile", _gzip_bomb), ("profile", _parquet_bomb),
                                            ("profile", _overlap_bomb), ("target", _deep_json),
                                            ("grid", _huge_grid)])
def test_a_hostile_file_of_at_most_4_mb_is_refused_within_1_gib_and_10_s(tmp_path, kind, make) -> None:
    path = make(tmp_path)
    size = sum(f.stat().st_size for f in path.rglob("*")) if path.is_dir() else path.stat().st_size
    assert size <= FILE_BYTES, size
    got = _measure(kind, path)
    assert got["outcome"].startswith("refused"), got
    assert got["peak_rss"] < LIMIT_BYTES and got["seconds"] < LIMIT_SECONDS, got
