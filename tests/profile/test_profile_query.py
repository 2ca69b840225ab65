"""query, barriers, compare, idle and the Perfetto export on tiny hand-checked profiles."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from toolkit import tables
from toolkit.errors import OptionError
from toolkit.profile import (
    IDLE_SCHEMA,
    QUERY_COLUMNS,
    WAIT_SCHEMA,
    Profile,
    barriers,
    compare,
    crop,
    export_perfetto,
    idle,
    phase_labels,
    query,
    synthetic_profile,
)

# tile, sample, phase, kind, kernel, start, end
ROWS = [
    (0, 0, 0, "synchronization", "", 0, 100),
    (0, 1, 1, "compute", "gemm", 100, 400),
    (0, 2, 1, "synchronization", "", 400, 700),
    (1, 0, 0, "synchronization", "", 50, 100),
    (1, 1, 1, "compute", "gemm", 100, 650),
    (1, 2, 1, "synchronization", "", 650, 700),
    (1, 3, 2, "exchange", "", 800, 900),
]


def _profile(rows=ROWS, clock_hz: float = 1e9) -> Profile:
    t, s, ph, kind, kernel, a, b = zip(*rows, strict=True)
    samples = tables.frame({
        "tile": t, "sample": s, "local_index": s, "phase": ph, "epoch": 0, "operation": [f"op{p}" for p in ph],
        "kind": list(kind), "kernel": list(kernel), "start_cycle": a, "end_cycle": b, "exchange_event_cycles": 0,
    }, tables.SAMPLES_SCHEMA)
    acts = tables.frame({"tile": [1, 1], "sample": [3, 3], "kind": ["send", "receive"], "fanout": [2, 0],
                         "paired": [False, True], "start_cycle": [0, 20], "end_cycle": [60, 500]},
                        tables.ACTIVITIES_SCHEMA)
    return Profile(samples=samples, activities=acts, clock_hz=clock_hz)


def test_query_by_kernel() -> None:
    q = query(_profile(), by="kernel")
    assert q.columns == ["kernel", *QUERY_COLUMNS]
    gemm = q.filter(kernel="gemm").row(0, named=True)
    assert gemm["samples"] == 2 and gemm["tiles"] == 2
    assert gemm["work_cycles"] == 300 + 550
    assert gemm["span_cycles"] == 650 - 100
    assert gemm["busy_cycles"] == 650 - 100          # the two tiles' gemm samples overlap: their union
    assert gemm["wall_share"] == pytest.approx(550 / 850)   # of the cropped wall clock, 900 - 50
    assert gemm["max_cycles"] == 550 and gemm["mean_cycles"] == 425.0
    assert gemm["p50_cycles"] == 425.0
    # crop origin is 50 (tile 1's first start): offsets count from it
    assert (gemm["first_offset_cycles"], gemm["last_offset_cycles"]) == (50, 600)


def test_query_by_phase_and_tile_shared_clock() -> None:
    q = query(_profile(), by="phase", cropped=False)
    assert q["phase"].to_list() == [0, 1, 2]
    assert q.filter(phase=0)["work_cycles"].item() == 100 + 50
    cropped = query(_profile(), by="phase")
    assert cropped.filter(phase=0)["work_cycles"].item() == 50 + 50  # tile 0's first sample clipped at 50
    t = query(_profile(), by="tile")
    assert t["tile"].dtype == tables.ID and t["samples"].to_list() == [3, 4]


def test_query_rejects_unknown_key() -> None:
    with pytest.raises(OptionError, match=r"by='flavour' is not a group key; use one of \['kernel'"):
        query(_profile(), by="flavour")


def test_barriers_find_the_straggler_and_the_waits() -> None:
    b = barriers(_profile())
    ph1 = b.phases.filter(phase=1).row(0, named=True)
    assert ph1["latest_tile"] == 1
    assert ph1["work_spread_cycles"] == 650 - 400
    assert ph1["exit_spread_cycles"] == 0 and ph1["entry_spread_cycles"] == 0
    w = b.waits.filter(phase=1).sort("tile")
    assert b.waits.columns == list(WAIT_SCHEMA)
    assert w["wait_cycles"].to_list() == [700 - 400, 700 - 650]
    ph0 = b.phases.filter(phase=0).row(0, named=True)
    assert ph0["entry_spread_cycles"] == 50


def test_compare_aligns_and_computes_deltas() -> None:
    a = _profile()
    slower = _profile([(*r[:5], r[5] * 2, r[6] * 2) for r in ROWS])
    c = compare(a, slower, by="phase", names=["base", "slow"])
    assert c.columns == ["phase", "label", "metric", "base_cycles", "slow_cycles", "slow_delta_cycles", "slow_ratio"]
    assert set(c["metric"]) == {"span_cycles"}   # which query column the numbers are (a phase's span)
    assert c["label"].null_count() == 0 and c["label"].to_list() == query(a, by="phase")["label"].to_list()
    row = c.filter(phase=1).row(0, named=True)
    assert row["slow_cycles"] == 2 * row["base_cycles"] and row["slow_ratio"] == 2.0
    k = compare(a, slower, by="kernel")
    assert set(k["metric"]) == {"work_cycles"}   # a kernel's cycles are summed over tiles, and say so
    assert k.filter(kernel="gemm")["p1_delta_cycles"].item() == 850
    with pytest.raises(OptionError, match=r"names=\['x'\] must be 2 distinct names"):
        compare(a, slower, names=["x"])
    with pytest.raises(OptionError, match="compare needs at least two profiles, got 1"):
        compare(a)
    with pytest.raises(OptionError, match=r"by='tile' cannot align profiles"):
        compare(a, a, by="tile")


def test_idle_is_derived_from_gaps() -> None:
    lf = idle(_profile(), cropped=False)
    df = lf.collect()
    assert df.columns == list(IDLE_SCHEMA)
    assert df.filter(tile=0).rows() == [(0, None, 700, 900, 200)]
    assert df.filter(tile=1).rows() == [(1, 0, 0, 50, 50), (1, 2, 700, 800, 100)]


def test_perfetto_nesting_units_and_chunks(tmp_path: Path) -> None:
    paths = export_perfetto(_profile(clock_hz=1e9), tmp_path / "t.json")
    assert paths == [tmp_path / "t.json"]
    events = json.loads(paths[0].read_text())["traceEvents"]
    xs = [e for e in events if e["ph"] == "X"]
    names = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert names == {"tile 0", "tile 1"}
    gemm = next(e for e in xs if e["name"] == "gemm" and e["tid"] == 1)
    assert (gemm["ts"], gemm["dur"]) == (0.05, 0.55)  # 1 GHz: cycles / 1000 = us, from origin 50
    phase = next(e for e in xs if e["name"] == "phase 1" and e["tid"] == 1)
    assert phase["ts"] <= gemm["ts"] and gemm["ts"] + gemm["dur"] <= phase["ts"] + phase["dur"]
    recv = next(e for e in xs if e["name"] == "receive")
    exch = next(e for e in xs if e["cat"] == "exchange")
    assert recv["ts"] == pytest.approx(exch["ts"] + 0.02)
    assert recv["ts"] + recv["dur"] == pytest.approx(exch["ts"] + exch["dur"])  # clipped to the sample
    many = export_perfetto(synthetic_profile(6, 10), tmp_path / "big.json", max_events_per_file=40)
    assert len(many) > 1 and all(p.name.startswith("big.0") for p in many)
    tids = [{e["tid"] for e in json.loads(p.read_text())["traceEvents"] if e["ph"] == "X"} for p in many]
    assert sum(len(t) for t in tids) == 6  # a tile's track never spans two files
    with pytest.raises(OptionError, match="max_events_per_file=0 must be at least 1"):
        export_perfetto(_profile(), tmp_path / "x.json", max_events_per_file=0)


def test_query_on_a_crop_reuses_it() -> None:
    p = synthetic_profile(8, 31, seed=4)
    c = crop(p)
    assert query(c, by="kind").equals(query(p, by="kind"))
    assert np.isclose(query(p, by="tile")["work_cycles"].sum(), c.samples["duration_cycles"].sum())


def test_compare_aligns_phases_by_what_they_are_not_their_number() -> None:
    """A layout with one more phase early on must not shift every later phase against the other program."""
    import polars as pl
    a = _profile()
    s = a.samples
    shifted = s.with_columns(pl.when(pl.col("phase") >= 1).then(pl.col("phase") + 1).otherwise(pl.col("phase"))
                             .alias("phase"), (pl.col("sample") + pl.when(pl.col("sample") >= 1).then(1)
                                               .otherwise(0)).alias("sample"))
    extra = s.filter(pl.col("sample") == 0).with_columns(
        pl.lit(1, s.schema["phase"]).alias("phase"), pl.lit(1, s.schema["sample"]).alias("sample"),
        pl.lit("extra").alias("operation"), pl.lit("compute").alias("kind"), pl.lit("k").alias("kernel"),
        pl.col("end_cycle").alias("start_cycle"), (pl.col("end_cycle") + 0).alias("end_cycle"))
    samples = pl.concat([shifted, extra]).sort("tile", "sample")
    acts = a.activities.with_columns(pl.col("sample") + 1)
    b = Profile(samples=samples, activities=acts, clock_hz=a.clock_hz)
    c = compare(a, b, by="phase", names=["a", "b"])
    row = c.filter(pl.col("label") == "op1 compute").row(0, named=True)
    assert row["phase"] == 1 and row["a_cycles"] == row["b_cycles"]    # phase 1 of a is phase 2 of b
    assert c.filter(pl.col("label") == "extra compute")["a_cycles"].to_list() == [None]   # only in b
    assert c.height == query(a, by="phase").height + 1


def test_busy_cycles_count_the_wall_clock_a_group_runs_not_its_span() -> None:
    # a kernel that runs early on one tile and late on another spans the program but is busy for 200 cycles:
    # the views rank it by busy cycles (the span stays beside it)
    rows = [(0, 0, 0, "synchronization", "", 0, 100), (0, 1, 1, "compute", "ln", 100, 200),
            (0, 2, 2, "compute", "gemm", 200, 900), (1, 0, 0, "synchronization", "", 0, 100),
            (1, 1, 3, "compute", "ln", 900, 1000)]
    q = query(_profile(rows), by="kernel")
    ln = q.filter(kernel="ln").row(0, named=True)
    assert (ln["span_cycles"], ln["busy_cycles"], ln["work_cycles"]) == (900, 200, 200)
    assert q["kernel"].to_list()[0] == "gemm"          # ranked by busy cycles: gemm's 700 first
    assert q.filter(kernel="gemm")["wall_share"].item() == pytest.approx(700 / 1000)


def test_phase_labels_name_the_work_not_the_initial_sync() -> None:
    # phase 0 holds every tile's initial sync and, on one tile, the first compute: the label names the work
    # and says the barrier is in it; a phase of only synchronization is labelled by it
    rows = [(0, 0, 0, "synchronization", "", 0, 600), (0, 1, 0, "compute", "ln", 600, 9000),
            (1, 0, 0, "synchronization", "", 0, 600), (2, 0, 0, "synchronization", "", 0, 600),
            (0, 2, 1, "synchronization", "", 9000, 9600)]
    q = query(_profile(rows), by="phase")
    assert q["label"].to_list() == ["op0 compute + initial sync", "op1 synchronization"]


def test_a_group_one_profile_lacks_counts_zero_in_the_delta_as_the_chart_draws_it() -> None:
    # the table said null where the delta chart drew the kernel's whole cost
    other = [r for r in ROWS if r[4] != "gemm"]
    k = compare(_profile(), _profile(other), by="kernel", names=["a", "b"])
    gemm = k.filter(kernel="gemm").row(0, named=True)
    assert gemm["b_cycles"] is None and gemm["b_delta_cycles"] == -gemm["a_cycles"] and gemm["b_ratio"] is None


def test_phases_align_within_their_repeat_instance() -> None:
    """A phase one layout runs in every instance and the other never does is missing in each instance, not
    paired with the next instance's phase of the same label (row block 18's second-instance fc2 exchange was
    drawn beside row block 36's first-instance reduction exchange)."""
    import toolkit
    full = toolkit.compile("mlp-small-repeat", options={"row_block": 36}).profile
    extra = phase_labels(full).filter(pl.col("phase").is_in([8, 9, 10]))   # instance 0's second fc2 group
    assert extra["label"].to_list() == ["mlp.fc2 synchronization", "mlp.fc2 exchange", "mlp.fc2 compute"]
    fewer = Profile(samples=full.samples.filter(~pl.col("phase").is_in([8, 9, 10])), clock_hz=full.clock_hz,
                    source=full.source)
    c = compare(full, fewer, by="phase", names=["full", "fewer"], cropped=False)
    missing = c.filter(pl.col("fewer_cycles").is_null())
    assert missing["phase"].to_list() == [8, 9, 10]
    assert c.filter(~pl.col("phase").is_in([8, 9, 10]))["fewer_delta_cycles"].to_list() == [0] * (c.height - 3)
