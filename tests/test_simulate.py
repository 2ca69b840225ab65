"""Cycle simulation: golden timings, barriers, wrap, round trips, repeats, calibration and roofline."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolkit
from toolkit import tables
from toolkit.errors import FormatError, InvalidIRError, OptionError
from toolkit.exchange import lower_exchanges
from toolkit.profile import Profile, crop, idle, read_capnp, read_parquet, write_capnp, write_parquet
from toolkit.profile.model import WRAP, validate
from toolkit.schedule import COMMANDS_SCHEMA, PHASES_SCHEMA, REPEAT_PHASES_SCHEMA
from toolkit.simulate import (
    CALIBRATION_SCHEMA,
    INITIAL_SYNC,
    ROOFLINE_SCHEMA,
    load_calibration,
    phase_order,
    roofline,
    simulate,
)
from toolkit.target import ipu21
from toolkit.tiles import lower_tiles

IPU = ipu21()
SYNC = IPU.costs.sync_cycles  # 600
OVERRUN = IPU.costs.exchange_phase_cycles  # 250: an exchange phase lasts this long past its last activity


# -- a hand-built program -------------------------------------------------------------------------
def program(phases: list[tuple[str, str]], commands: list[tuple],
            transfers: list[tuple[int, int, int, list[int], int]], repeats: list[tuple[str, int, int, int]] = (),
            target=IPU, block: str = "main", staged: bool = False) -> SimpleNamespace:
    """A Compilation-shaped value: phases (kind, name); commands (phase, tile, kernel, cycles[, groups]);
    transfers (transfer_id, phase, source, destinations, bytes); repeats (block, instances, first, last)."""
    blocks = [next((b for b, _, f, la in repeats if f <= i <= la), block) for i in range(len(phases))]
    ph = pl.DataFrame({
        "phase": range(len(phases)), "kind": [k for k, _ in phases], "op_id": range(len(phases)),
        "name": [n for _, n in phases], "block": blocks, "wave": [0] * len(phases), "est_cycles": [0] * len(phases),
    }, schema=PHASES_SCHEMA)
    cmd = pl.DataFrame({
        "command_id": range(len(commands)), "phase": [c[0] for c in commands], "tile": [c[1] for c in commands],
        "op_id": [c[0] for c in commands], "kernel": [c[2] for c in commands], "rows": [16] * len(commands),
        "cols": [32] * len(commands), "inner": [64] * len(commands), "groups": [(*c, 1)[4] for c in commands],
        "dtype": ["f16"] * len(commands), "weight_class": [None] * len(commands), "panels": [0] * len(commands),
        "calls": [1] * len(commands), "launches": [1] * len(commands), "cast_cycles": [0] * len(commands),
        "est_cycles": [c[3] for c in commands],
    }, schema=COMMANDS_SCHEMA)
    rows = [(tid, p, s, d, b) for tid, p, s, ds, b in transfers for d in ds]
    tr = tables.frame({
        "transfer_id": [r[0] for r in rows], "phase": [r[1] for r in rows], "source": [r[2] for r in rows],
        "destination": [r[3] for r in rows], "size_bytes": [r[4] for r in rows], "tensor_id": [0] * len(rows),
        "src_offset": [0] * len(rows), "dst_offset": [0] * len(rows), "src_object": [0] * len(rows),
        "dst_object": [1] * len(rows), "staging_object": [7 if staged else None] * len(rows),
    }, tables.TRANSFERS_SCHEMA)
    reps = pl.DataFrame({"block": [r[0] for r in repeats], "instances": [r[1] for r in repeats],
                         "first_phase": [r[2] for r in repeats], "last_phase": [r[3] for r in repeats]},
                        schema=REPEAT_PHASES_SCHEMA)
    sched = SimpleNamespace(phases=ph, commands=cmd, transfers=tr, repeats=reps)
    return SimpleNamespace(target=target, schedule=sched, tiles=lower_tiles(sched),
                           exchange=lower_exchanges(tr, target))


def golden() -> SimpleNamespace:
    # phase 0: tile 0 runs a matmul (1000) and a copy (300), tile 1 a gelu (500); phase 1 syncs;
    # phase 2: 0 -> 1 sends 400 B (100 words: packets of 64 + 36), 1 -> 0 sends 40 B (10 words, one packet);
    # phase 3: only tile 1 adds (200)
    return program(
        [("compute", "fc"), ("sync", "x"), ("exchange", "x"), ("compute", "res")],
        [(0, 0, "amp_matmul_f16", 1000), (0, 0, "copy", 300), (0, 1, "gelu", 500), (3, 1, "add", 200)],
        [(0, 2, 0, [1], 400), (1, 2, 1, [0], 40)],
    )


def test_golden_two_phase_program() -> None:
    p = simulate(golden(), base_cycle=1000)
    assert dict(p.samples.schema) == tables.SAMPLES_SCHEMA
    assert (p.source, p.clock_hz, p.schema_version) == ("simulated", IPU.clock_hz, 5)
    got = p.samples.select("tile", "sample", "phase", "kind", "kernel", "operation", "start_cycle", "end_cycle")
    # tiles 0 and 1 (physical row 0, partners: neither sends paired) send 100 and 10 words plus a send control;
    # each receive is a cutover: its payload lands 52 events after the source selection, plus the receive controls
    cut = IPU.costs.exchange_arrival_cycles + IPU.costs.exchange_receive_cycles
    s01, s10 = 100 + IPU.costs.exchange_send_cycles, 10 + IPU.costs.exchange_send_cycles
    x0, x1 = max(s01, cut + 10), max(s10, cut + 100)   # each tile's span: its longer lane
    res = 3500 + max(x0, x1) + OVERRUN   # the exchange phase runs OVERRUN cycles past its last activity
    assert got.rows() == [
        (0, 0, 0, "synchronization", "", "initial_sync", 1000, 1600),
        (0, 1, 0, "compute", "amp_matmul_f16", "fc", 1600, 2900),
        (0, 2, 1, "synchronization", "", "x", 2900, 2900 + SYNC),
        (0, 3, 2, "exchange", "", "x", 3500, 3500 + x0),
        (1, 0, 0, "synchronization", "", "initial_sync", 1000, 1600),
        (1, 1, 0, "compute", "gelu", "fc", 1600, 2100),
        (1, 2, 1, "synchronization", "", "x", 2900, 3500),
        (1, 3, 2, "exchange", "", "x", 3500, 3500 + x1),
        (1, 4, 3, "compute", "add", "res", res, res + 200),
    ]
    assert p.samples.filter(kind="exchange")["exchange_event_cycles"].to_list() == [x0, x1]
    assert p.metadata.rows() == [(0, 1, "invocations", "1"), (1, 1, "invocations", "1"), (1, 4, "invocations", "1")]
    acts = p.activities.select("tile", "sample", "kind", "fanout", "start_cycle", "end_cycle").sort("tile", "kind")
    assert acts.rows() == [(0, 3, "receive", 1, cut, cut + 10), (0, 3, "send", 1, 0, s01),
                           (1, 3, "receive", 1, cut, cut + 100), (1, 3, "send", 1, 0, s10)]
    assert crop(p).cropped_cycles == res + 200 - 1000
    assert validate(p, file="<simulated>").samples.equals(p.samples)  # passes the readers' own checks


def test_repeat_block_between_unrepeated_phases() -> None:
    c = program([("compute", "pre"), ("compute", "a"), ("compute", "b"), ("compute", "post")],
                [(i, 0, "add", 10 * (i + 1)) for i in range(4)], [], repeats=[("blk", 2, 1, 2)])
    assert phase_order(c.schedule).select("phase", "instance").rows() == [
        (0, 0), (1, 0), (2, 0), (1, 1), (2, 1), (3, 0)]
    p = simulate(c)
    assert p.samples.select("phase", "epoch", "operation", "start_cycle").rows()[1:] == [
        (0, 0, "pre", 600), (1, 0, "a", 610), (2, 0, "b", 630), (3, 1, "a", 660), (4, 1, "b", 680),
        (5, 0, "post", 710)]


def test_golden_repeat_runs_block_phases_once_per_instance_in_order() -> None:
    c = program([("compute", "a"), ("compute", "b"), ("compute", "tail")],
                [(0, 0, "gelu", 10), (1, 0, "add", 20), (1, 1, "add", 25), (2, 1, "gelu", 5)],
                [], repeats=[("blk", 3, 0, 1)])
    order = phase_order(c.schedule)
    assert order.select("phase", "instance").rows() == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 0)]
    p = simulate(c)
    t0 = p.samples.filter(tile=0)
    assert t0.select("phase", "epoch", "operation").rows() == [
        (0, 0, "initial_sync"), (0, 0, "a"), (1, 0, "b"), (2, 1, "a"), (3, 1, "b"), (4, 2, "a"), (5, 2, "b")]
    # phase lengths: a = 10, b = max(20, 25) = 25 per instance; tile 1's tail starts after 3 x 35
    assert t0["start_cycle"].to_list() == [0, 600, 610, 635, 645, 670, 680]
    assert p.samples.filter(tile=1, phase=6).select("start_cycle", "end_cycle").row(0) == (705, 710)


def test_passes_after_the_first_are_preceded_by_a_sync() -> None:
    small = IPU.replace(staging_window_bytes=64)
    c = program([("sync", "x"), ("exchange", "x")], [], [(0, 1, 0, [1], 64), (1, 1, 2, [1], 64)], target=small,
                staged=True)
    assert sorted(c.exchange.groups["pass"].to_list()) == [0, 1]   # one group per pass (either may go first)
    p = simulate(c)
    cut = IPU.costs.exchange_arrival_cycles + IPU.costs.exchange_receive_cycles   # tile 1 is in physical row 0
    one = 16 + cut   # 64 B at 4 B/cycle after a cutover; the senders' partners send nothing, so they send paired
    acts = p.activities.filter(tile=1).sort("start_cycle")
    assert acts.select("start_cycle", "end_cycle").rows() == [(cut, one), (one + SYNC + cut, 2 * one + SYNC)]
    assert int(p.samples.filter(tile=1, kind="exchange")["exchange_event_cycles"].item()) == 2 * one + SYNC - cut


def test_groups_out_of_row_order_are_a_bug_in_us() -> None:
    c = golden()
    c.exchange = dataclasses.replace(c.exchange, groups=c.exchange.groups.with_columns(pl.col("group") + 5))
    with pytest.raises(InvalidIRError, match=r"exchange groups must be numbered 0..n-1"):
        simulate(c)


# -- properties -----------------------------------------------------------------------------------
@st.composite
def programs(draw: st.DrawFn) -> SimpleNamespace:
    tiles = draw(st.integers(2, 5))
    n = draw(st.integers(1, 5))
    phases, commands, transfers = [], [], []
    for i in range(n):
        if draw(st.booleans()):
            phases.append(("compute", f"op{i}"))
            for t in draw(st.sets(st.integers(0, tiles - 1), min_size=1)):
                for _ in range(draw(st.integers(1, 2))):
                    commands.append((len(phases) - 1, t, draw(st.sampled_from(["gelu", "add"])),
                                     draw(st.integers(0, 5000))))
        else:
            phases += [("sync", f"op{i}"), ("exchange", f"op{i}")]
            for _ in range(draw(st.integers(1, 4))):
                src = draw(st.integers(0, tiles - 1))
                dst = draw(st.sets(st.integers(0, tiles - 1).filter(lambda d, s=src: d != s), min_size=1, max_size=3))
                transfers.append((len(transfers), len(phases) - 1, src, sorted(dst), draw(st.integers(1, 40000))))
    reps = [("blk", draw(st.integers(1, 3)), 0, len(phases) - 1)] if draw(st.booleans()) else []
    return program(phases, commands, transfers, repeats=reps)


def _phase_bounds(p) -> pl.DataFrame:
    c = crop(p, shared_clock=True).samples.filter(pl.col("sample") > 0)
    return c.group_by("phase").agg(pl.col("start_offset_cycles").min().alias("s0"),
                                   pl.col("end_offset_cycles").max().alias("e1")).sort("phase")


def _assert_barriers(p) -> None:
    b = _phase_bounds(p)
    s0, e1 = b["s0"].to_numpy(), b["e1"].to_numpy()
    # no sample of a later phase starts before every sample of an earlier phase has ended
    assert np.all(s0[1:] >= np.maximum.accumulate(e1)[:-1])
    # samples of one tile never overlap and follow the phase order (the initial sync shares phase 0)
    s = crop(p, shared_clock=True).samples
    same = s["tile"].to_numpy()[1:] == s["tile"].to_numpy()[:-1]
    assert np.all(s["start_offset_cycles"].to_numpy()[1:][same] >= s["end_offset_cycles"].to_numpy()[:-1][same])
    step = np.diff(s["phase"].to_numpy())[same]
    after_first = s["sample"].to_numpy()[:-1][same] > 0
    assert np.all(step >= 0) and np.all(step[after_first] > 0)


@given(programs(), st.integers(0, WRAP - 1))
@settings(max_examples=40, deadline=None)
def test_phase_barrier_property(c, base: int) -> None:
    p = simulate(c, base_cycle=base)
    _assert_barriers(p)
    validate(p, file="<simulated>")
    # every tile's first sample is the initial sync; the crop is as long as the program plus that sync
    firsts = p.samples.filter(sample=0)
    assert set(firsts["kind"]) == {"synchronization"} and firsts.height == p.tiles
    ref = simulate(c)
    assert crop(p).cropped_cycles == crop(ref).cropped_cycles
    steps = c.tiles.steps.join(phase_order(c.schedule), on="phase").height
    assert p.samples.height == steps + p.tiles


# -- real compilations ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mlp():
    return toolkit.compile("mlp-single-b1")


@pytest.fixture(scope="module")
def small_repeat():
    return toolkit.compile("mlp-small-repeat")


def test_barriers_hold_on_a_compiled_mlp(mlp) -> None:
    p = simulate(mlp)
    _assert_barriers(p)
    # the simulated program is as long as the stages' own estimate (plus the initial sync)
    cropped = crop(p).cropped_cycles
    assert cropped == mlp.lowered_cycles() + SYNC
    # busy plus derived idle time covers every tile's whole cropped span
    busy = crop(p).samples.group_by("tile").agg(pl.col("duration_cycles").sum())
    gaps = idle(p).group_by("tile").agg(pl.col("duration_cycles").sum().alias("idle")).collect()
    total = busy.join(gaps, on="tile", how="left").select(pl.col("duration_cycles") + pl.col("idle").fill_null(0))
    assert set(total.to_series().to_list()) == {cropped}


def test_wrap_crops_like_base_zero(mlp) -> None:
    a, b = simulate(mlp), simulate(mlp, base_cycle=WRAP - 1234)
    assert b.samples["end_cycle"].min() < b.samples["start_cycle"].max()  # the counters wrapped
    ca, cb = crop(a), crop(b)
    assert ca.cropped_cycles == cb.cropped_cycles
    assert ca.samples["start_offset_cycles"].equals(cb.samples["start_offset_cycles"])
    assert cb.origin_cycle == WRAP - 1234


def test_round_trip_capnp_and_parquet(small_repeat, tmp_path: Path) -> None:
    p = simulate(small_repeat, base_cycle=WRAP - 5000)
    for back in (read_capnp(write_capnp(p, tmp_path / "sim.capnp")),
                 read_parquet(write_parquet(p, tmp_path / "sim.parquet"))):
        for name in ("samples", "activities", "metadata"):
            assert getattr(back, name).equals(getattr(p, name)), name
        assert back.clock_hz == p.clock_hz


def test_repeats_are_expanded_only_on_request(small_repeat) -> None:
    p = simulate(small_repeat)
    assert not any(p.collected(n) for n in ("samples", "activities", "metadata"))
    assert crop(p).cropped_cycles == small_repeat.lowered_cycles() + SYNC
    assert p.tiles == small_repeat.tiles.steps["tile"].n_unique()
    assert not p.collected("samples")   # the crop and the tile count read only the columns they need
    # the same frames as a profile that holds them: the written files do not depend on how the frames were held
    eager = Profile(samples=p.samples, activities=p.activities, metadata=p.metadata, clock_hz=p.clock_hz,
                    source=p.source)
    assert crop(eager).samples.equals(crop(p).samples)


def test_repeat_instances_share_their_steps_and_activities(small_repeat) -> None:
    p = simulate(small_repeat)
    reps = small_repeat.schedule.repeats.row(0, named=True)
    width = reps["last_phase"] - reps["first_phase"] + 1
    s = crop(p).samples.filter(pl.col("operation") != INITIAL_SYNC)
    block = (s.join(phase_order(small_repeat.schedule).select(pl.col("event").alias("phase"),
                                                               pl.col("phase").alias("_sched"), "block"),
                    on="phase")
             .filter(pl.col("block") == reps["block"]))
    # instance i runs the steps of instance 0, each as long, width phases later
    cols = ["tile", "_sched", "kind", "kernel", "operation", "duration_cycles", "exchange_event_cycles"]
    first = block.filter(epoch=0).sort("tile", "_sched").select(cols)
    for i in range(1, reps["instances"]):
        inst = block.filter(epoch=i).sort("tile", "_sched")
        assert inst.select(cols).equals(first)
        assert (inst["phase"] - block.filter(epoch=0).sort("tile", "_sched")["phase"] == i * width).all()
    # an exchange sample lists the same activities in every instance
    acts = (p.activities.join(block.select("tile", "sample", "epoch", "_sched"), on=["tile", "sample"])
            .sort("tile", "_sched", "epoch", "sample", maintain_order=True))
    per = acts.group_by("epoch", maintain_order=True).agg(pl.col("tile", "_sched", "kind", "fanout", "start_cycle",
                                                                  "end_cycle"))
    assert per.height == reps["instances"] and acts.height
    assert all(per.row(i)[1:] == per.row(0)[1:] for i in range(per.height))


def test_repeat_samples_are_steps_times_instances(small_repeat) -> None:
    c = small_repeat
    p = simulate(c)
    (instances,) = c.schedule.repeats["instances"].to_list()
    assert instances == 3
    tiles = c.tiles.steps["tile"].n_unique()
    assert p.samples.height == c.tiles.steps.height * instances + tiles
    assert sorted(p.samples["epoch"].unique().to_list()) == [0, 1, 2]
    assert p.samples["phase"].max() == 3 * c.schedule.phases.height - 1
    n_acts = c.exchange.groups.height + c.exchange.passes.height
    assert p.activities.height == n_acts * instances
    assert crop(p).cropped_cycles == c.lowered_cycles() + SYNC
    _assert_barriers(p)


def test_bad_base_cycle(small_repeat) -> None:
    for bad in (-1, WRAP, 1.5):
        with pytest.raises(OptionError, match=r"base_cycle=.* is not a 32-bit counter value"):
            simulate(small_repeat, base_cycle=bad)


# -- calibration ----------------------------------------------------------------------------------
def _cal(tmp_path: Path, measurements: list, **over) -> Path:
    doc = {"schemaVersion": 1, "target": "ipu21", "buildId": "abc", "clockHz": 1.5e9,
           "measurements": measurements, **over}
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    return path


def _m(kernel: str, dims: list[int], median: float) -> dict:
    return {"key": {"kernel": kernel, "dimensions": dims}, "samples": 5, "minimum": median - 1, "median": median,
            "p95": median + 1, "maximumCycles": median + 2}


def test_load_calibration(tmp_path: Path) -> None:
    cal = load_calibration(_cal(tmp_path, [_m("amp_matmul_f16", [16, 32, 64], 777), _m("gelu", [16, 32], 50)]))
    assert dict(cal.schema) == CALIBRATION_SCHEMA
    assert cal.rows()[0] == ("amp_matmul_f16", [16, 32, 64], 5, 776.0, 777.0, 778.0, 779.0)


def test_calibration_replaces_matching_commands_only(tmp_path: Path) -> None:
    # golden commands are 16 x 32 (inner 64): the matmul matches, the copy and gelu do not
    path = _cal(tmp_path, [_m("amp_matmul_f16", [16, 32, 64], 700), _m("gelu", [16, 64], 1)])
    p = simulate(golden(), calibration=path)
    compute = p.samples.filter(kind="compute").select("tile", "start_cycle", "end_cycle", "kernel").rows()
    assert compute[0] == (0, 600, 600 + 700 + 300, "amp_matmul_f16")  # 700 calibrated + 300 copy
    assert compute[1] == (1, 600, 1100, "gelu")
    assert simulate(golden(), calibration=load_calibration(path)).samples.equals(p.samples)


def test_calibrated_cost_is_median_times_groups(tmp_path: Path) -> None:
    c = program([("compute", "attn")], [(0, 0, "amp_matmul_f16", 9999, 3), (0, 1, "softmax", 40, 2)], [])
    cal = load_calibration(_cal(tmp_path, [_m("amp_matmul_f16", [16, 32, 64], 100.4), _m("softmax", [16, 32], 7)]))
    p = simulate(c, calibration=cal)
    assert p.samples.filter(kind="compute").select("tile", "end_cycle").rows() == [(0, 600 + 301), (1, 600 + 14)]
    assert p.metadata["value"].to_list() == ["3", "2"]


@pytest.mark.parametrize(("doc", "match"), [
    ("{not json", r"cal.json: not JSON at line 1, column 2"),
    ("[1, 2]", r"\(root\)=\[1, 2\] is not valid; expected a JSON object"),
    ('{"schemaVersion": 2, "measurements": []}', r"schemaVersion=2 is not valid; expected 1"),
    ('{"schemaVersion": 1}', r"measurements=None is not valid; expected a list"),
    ('{"schemaVersion": 1, "clockHz": -5, "measurements": []}', r"clockHz=-5 is not valid"),
])
def test_bad_calibration_documents(tmp_path: Path, doc: str, match: str) -> None:
    path = tmp_path / "cal.json"
    path.write_text(doc)
    with pytest.raises(FormatError, match=match) as info:
        load_calibration(path)
    assert info.value.file == str(path)


@pytest.mark.parametrize(("entry", "match"), [
    ({"key": {"kernel": "gelu", "dimensions": [1, 2]}}, r"measurements\[1\]\.median=None"),
    ({**_m("gelu", [1, 2], 5), "median": -3}, r"measurements\[1\]\.median=-3 is not valid"),
    ({**_m("gelu", [1, 2], 5), "p95": "fast"}, r"measurements\[1\]\.p95='fast'"),
    ({**_m("gelu", [1, 2], 5), "samples": 2.5}, r"measurements\[1\]\.samples=2.5.*whole number"),
    ({"key": {"dimensions": [1]}, "median": 3}, r"measurements\[1\]\.key\.kernel=None"),
    (_m("gelu", [1, -2], 5), r"measurements\[1\]\.key\.dimensions=\[1, -2\].*non-negative integers"),
    (_m("amp_matmul_f16", [1, 2], 5), r"dimensions=\[1, 2\].*\[rows, cols, inner\] for kernel 'amp_matmul_f16'"),
    (_m("add", [3, 2], 5), r"measurements\[1\]\.key=.*not already given by measurements\[0\]"),
    ("oops", r"measurements\[1\]='oops'"),
])
def test_bad_calibration_measurements(tmp_path: Path, entry, match: str) -> None:
    with pytest.raises(FormatError, match=match) as info:
        load_calibration(_cal(tmp_path, [_m("add", [3, 2], 5), entry]))
    assert info.value.field.startswith("measurements[1]")


def test_calibration_frame_without_the_columns() -> None:
    with pytest.raises(OptionError, match=r"calibration frame is missing columns \['dimensions', 'median_cycles'\]"):
        simulate(golden(), calibration=pl.DataFrame({"kernel": ["gelu"]}))


def test_missing_calibration_file(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match=r"nope.json: cannot read the calibration file"):
        simulate(golden(), calibration=tmp_path / "nope.json")


# -- roofline -------------------------------------------------------------------------------------
def test_roofline(mlp, small_repeat) -> None:
    r = roofline(mlp)
    assert dict(r.schema) == ROOFLINE_SCHEMA
    total = r.filter(name="total").row(0, named=True)
    macs = 2 * 729 * 4304 * 1152
    assert total["macs"] == macs
    # FP8 weights run the FP8 AMP: 128 MAC/cycle/tile; the total sums the per-op ideals
    assert r.filter(kind="matmul")["precision"].to_list() == ["f8", "f8"]
    assert total["ideal_cycles"] == 2 * -(-(macs // 2) // (1472 * 128))
    assert r.filter(kind="gelu")["macs"].item() == 0 and r.filter(kind="gelu")["precision"].item() is None
    rr = roofline(small_repeat)
    assert rr.filter(name="total")["macs"].item() == 3 * 2 * 129 * 128 * 256
    assert rr.filter(name="mlp.fc1")["instances"].item() == 3
    assert roofline(small_repeat, tiles=64).filter(name="total")["ideal_cycles"].item() == 2 * -(-3 * 129 * 128 * 256
                                                                                                // (64 * 128))
    with pytest.raises(OptionError, match=r"tiles=0 is not a positive number of tiles; use e.g. 1472"):
        roofline(mlp, tiles=0)
