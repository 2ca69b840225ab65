from __future__ import annotations

import dataclasses

import polars as pl
import pytest
from exchange_strategies import transfer_sets
from hypothesis import given, settings

from toolkit.errors import InvalidIRError, ModelError, OptionError
from toolkit.exchange import (
    PACKETS_SCHEMA,
    PASSES_SCHEMA,
    ROWS_SCHEMA,
    SUMMARY_SCHEMA,
    Exchange,
    lower_exchanges,
    packetize,
    stage_passes,
    verify_exchange,
)
from toolkit.target import ipu21

IPU = ipu21()
# a small machine: 64-byte window (16 words), packets of 2 then 5 words, so splits happen everywhere
TINY = IPU.replace(staging_window_bytes=64, first_packet_max_words=2, packet_max_words=5, tiles=64)


def golden() -> pl.DataFrame:
    return pl.DataFrame({
        "transfer_id": [1, 1, 2, 3, 4], "phase": [0, 0, 0, 0, 1], "source": [0, 0, 1, 2, 3],
        "destination": [1, 2, 0, 0, 0], "size_bytes": [100, 100, 70_000, 10, 5],
        "staging_object": [7, 7, 7, None, 7],
    })


# -- golden -----------------------------------------------------------------
def test_golden_packets_follow_the_word_limits() -> None:
    p = packetize(golden(), IPU)
    assert dict(p.schema) == PACKETS_SCHEMA
    t2 = p.filter(pl.col("transfer_id") == 2)
    # 70,000 bytes = 17,500 words: window fragments of 8192, 8192, 1116 words, each packetized 64 + 4148 + ...
    assert t2["words"].to_list() == [64, 4148, 3980, 64, 4148, 3980, 64, 1052]
    assert t2["word_offset"].to_list() == [0, 64, 4212, 8192, 8256, 12404, 16384, 16448]
    assert t2["packet"].to_list() == [0, 1, 2, 0, 1, 2, 0, 1]
    assert p.filter(pl.col("transfer_id") == 1)["words"].to_list() == [25]


def test_golden_passes_and_steps() -> None:
    ex = lower_exchanges(golden(), IPU)
    verify_exchange(ex, golden(), IPU)
    ps = ex.passes.filter(pl.col("phase") == 0, pl.col("tile") == 0).sort("pass", "group")
    # tile 0 gets transfer 2 (three window-sized fragments, one pass each) and transfer 3 directly
    assert ps["pass"].to_list() == [0, 0, 1, 2]
    assert ps["transfer_id"].to_list() == [2, 3, 2, 2]
    assert ps["staging_offset"].to_list() == [0, None, 0, 0]
    assert ps["staged_bytes"].to_list() == [32768, 0, 32768, 4464]
    s = ex.summary.row(0, named=True)
    assert (s["passes"], s["groups"], s["multicast_groups"], s["steps"], s["lower_bound"]) == (3, 5, 1, 4, 4)
    assert s["words"] == 25 + 17_500 + 3
    assert s["delivered_words"] == 2 * 25 + 17_500 + 3
    assert s["rows"] == 5 + 6
    assert dict(ex.summary.schema) == SUMMARY_SCHEMA
    assert dict(ex.passes.schema) == PASSES_SCHEMA
    assert dict(ex.rows.schema) == ROWS_SCHEMA


def test_golden_plan_rows() -> None:
    ex = lower_exchanges(golden(), IPU)
    rows = ex.rows.filter(pl.col("group") == 0).sort("role", "tile")
    recv1, recv2, send = rows["words"].to_list()
    step = ex.groups.filter(pl.col("group") == 0)["step"][0]
    # role, step, partner, words, staging, offset, packets, fanout, flags (staged | first | last)
    assert send == [0, step, 0xFFFFFFFF, 25, 0xFFFFFFFF, 0, 1, 2, 0b111]
    assert recv1 == [1, step, 0, 25, 0, 0, 1, 2, 0b111]
    assert recv2 == recv1  # identical rows on tiles 1 and 2 share one digest
    assert rows["digest"][0] == rows["digest"][1]
    assert ex.rows.schema["words"] == pl.Array(pl.UInt32, 9)


def fnv1a(words: list[int]) -> int:
    h = 0xCBF29CE484222325
    for w in words:
        h = ((h ^ w) * 0x100000001B3) % (1 << 64)
    return h


@settings(max_examples=20, deadline=None)
@given(transfer_sets(max_bytes=400))
def test_digest_is_fnv1a_of_the_row_words(t: pl.DataFrame) -> None:
    rows = lower_exchanges(t, TINY).rows
    assert [fnv1a(w) for w in rows["words"].to_list()] == rows["digest"].to_list()


def test_est_cycles_model() -> None:
    t = pl.DataFrame({"transfer_id": [1], "phase": [3], "source": [0], "destination": [1], "size_bytes": [400],
                      "staging_object": [1]})
    s = lower_exchanges(t, IPU).summary.row(0, named=True)
    # tile 1 (physical row 0) receives 100 words after one cutover: its payload arrives 52 + 2 x 0 events after the
    # source selection, plus the receive controls; tile 0's paired send (tile 1 sends nothing) takes 50 + 2 events;
    # plus the measured per-phase overrun
    c = IPU.costs
    cutover = c.exchange_arrival_cycles + c.exchange_receive_cycles
    assert s["est_cycles"] == 100 + cutover + c.exchange_phase_cycles
    many = pl.DataFrame({"transfer_id": [1], "phase": [3], "source": [0], "destination": [1], "size_bytes": [8],
                         "staging_object": [1]})
    tiny = lower_exchanges(many, IPU.replace(costs={"exchange_send_cycles": 90})).summary.row(0, named=True)
    assert tiny["est_cycles"] == 1 + 90 + c.exchange_phase_cycles   # 2 words, paired: send-control bound
    far = t.with_columns(pl.lit(91).alias("destination"))              # tile 91 sits in physical row 45
    s = lower_exchanges(far, IPU).summary.row(0, named=True)
    assert s["est_cycles"] == 100 + cutover + 2 * 45 + c.exchange_phase_cycles


def test_receive_cutovers_follow_the_destination_addresses() -> None:
    # two 64-word runs from one source: contiguous destinations chain (one cutover), a gap between them is two
    def est(dst_offsets: list[int]) -> int:
        t = pl.DataFrame({"transfer_id": [1, 2], "phase": [0, 0], "source": [4, 4], "destination": [2, 2],
                          "size_bytes": [256, 256], "src_offset": [0, 256], "dst_offset": dst_offsets,
                          "dst_object": [9, 9]})
        return int(lower_exchanges(t, IPU).summary["est_cycles"].item())
    cutover = IPU.costs.exchange_arrival_cycles + 2 * 1 + IPU.costs.exchange_receive_cycles   # tile 2: row 1
    assert est([0, 256]) == 128 + cutover + IPU.costs.exchange_phase_cycles
    assert est([0, 512]) == est([0, 256]) + cutover


def test_wider_plan_rows_keep_the_nine_fields_and_narrow_ones_refused() -> None:
    wide = lower_exchanges(golden(), IPU.replace(plan_row_words=12))
    assert dict(wide.rows.schema) == ROWS_SCHEMA  # words past the ninth are zero and not stored
    assert wide.rows.equals(lower_exchanges(golden(), IPU).rows)
    with pytest.raises(OptionError, match=r"plan_row_words=8 is too small"):
        lower_exchanges(golden(), IPU.replace(plan_row_words=8))


def test_loopback_target() -> None:
    t = pl.DataFrame({"transfer_id": [1], "phase": [0], "source": [2], "destination": [2], "size_bytes": [8]})
    target = IPU.replace(exchange_loopback=True)
    ex = lower_exchanges(t, target)
    verify_exchange(ex, t, target)


def test_empty_transfers() -> None:
    t = pl.DataFrame(schema={"transfer_id": pl.Int64, "phase": pl.Int32, "source": pl.Int32,
                             "destination": pl.Int32, "size_bytes": pl.Int64})
    ex = lower_exchanges(t, IPU)
    assert ex.summary.height == 0 and ex.rows.height == 0
    verify_exchange(ex, t, IPU)


# -- properties -------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(transfer_sets(max_bytes=400))
def test_verify_holds_on_a_tiny_window(t: pl.DataFrame) -> None:
    ex = lower_exchanges(t, TINY)
    verify_exchange(ex, t, TINY)


@settings(max_examples=30, deadline=None)
@given(transfer_sets(max_tiles=1472, max_transfers=40, max_bytes=120_000))
def test_verify_holds_with_oversize_transfers_on_many_tiles(t: pl.DataFrame) -> None:
    ex = lower_exchanges(t, IPU)
    verify_exchange(ex, t, IPU)


@settings(max_examples=40, deadline=None)
@given(transfer_sets(max_bytes=400))
def test_words_are_conserved_through_packets_and_passes(t: pl.DataFrame) -> None:
    per = t.unique("transfer_id")
    words = ((per["size_bytes"] + 3) // 4).sum()
    assert packetize(t, TINY)["words"].sum() == words
    passes = stage_passes(t, TINY)
    assert passes["size_bytes"].sum() == t["size_bytes"].sum()
    staged = passes.filter(pl.col("staging_object").is_not_null())
    assert staged.group_by("phase", "tile", "pass").agg(pl.col("staged_bytes").sum())["staged_bytes"].max() \
        <= TINY.staging_window_bytes if staged.height else True


@settings(max_examples=40, deadline=None)
@given(transfer_sets(multicast=False, max_bytes=200))
def test_unicast_phases_meet_the_bound(t: pl.DataFrame) -> None:
    s = lower_exchanges(t, TINY).summary
    assert (s["steps"] == s["lower_bound"]).all()
    assert (s["lower_bound"] >= s["unstaged_bound"]).all()


# -- the verifier catches broken lowerings ----------------------------------
def broken(what: str) -> tuple[Exchange, pl.DataFrame]:
    t = golden()
    ex = lower_exchanges(t, IPU)
    if what == "step":
        rows = ex.rows.with_columns(pl.when(pl.col("group") == 4).then(0).otherwise(pl.col("step")).alias("step"))
        ex = dataclasses.replace(ex, rows=rows)
    elif what == "packet":
        ex = dataclasses.replace(ex, packets=ex.packets.filter(pl.col("packet") != 1))
    elif what == "pass":
        ex = dataclasses.replace(ex, passes=ex.passes.with_columns(pl.col("staging_offset") + 32000))
    elif what == "missing":
        ex = dataclasses.replace(ex, passes=ex.passes.filter(~((pl.col("group") == 0) & (pl.col("tile") == 2))))
    return ex, t


@pytest.mark.parametrize(("what", "match"), [
    ("step", r"two (send|receive) rows in one step|step word differs"),
    ("packet", r"overlap or leave a gap"),
    ("pass", r"outside the 32768-byte staging window"),
    ("missing", r"destination that receives nothing"),
])
def test_verifier_rejects(what: str, match: str) -> None:
    ex, t = broken(what)
    with pytest.raises(InvalidIRError, match=match):
        verify_exchange(ex, t, IPU)


def two_into_one() -> tuple[Exchange, pl.DataFrame]:
    t = pl.DataFrame({"transfer_id": [1, 2], "phase": [0, 0], "source": [1, 2], "destination": [0, 0],
                      "size_bytes": [64, 64], "staging_object": [9, 9]})
    return lower_exchanges(t, IPU), t


@pytest.mark.parametrize(("change", "match"), [
    (lambda ex: dataclasses.replace(ex, passes=ex.passes.with_columns(pl.lit(0, pl.Int64).alias("staging_offset"))),
     r"staged fragments overlap in a tile's window"),
    (lambda ex: dataclasses.replace(ex, rows=ex.rows.with_columns(pl.lit(0, pl.Int32).alias("step"))),
     r"two (send|receive) rows in one step|step word differs"),
    (lambda ex: dataclasses.replace(ex, rows=ex.rows.with_columns(pl.col("tile").replace({0: 3}))),
     r"receive rows and receiving tiles of a group differ"),
    (lambda ex: dataclasses.replace(ex, packets=ex.packets.with_columns(pl.col("words") + 1)),
     r"do not add up|differ from the group's packets"),
])
def test_verifier_rejects_more(change, match: str) -> None:
    ex, t = two_into_one()
    verify_exchange(ex, t, IPU)
    with pytest.raises(InvalidIRError, match=match):
        verify_exchange(change(ex), t, IPU)


# -- bad input --------------------------------------------------------------
def one(**over: object) -> pl.DataFrame:
    base = {"transfer_id": [1, 1], "phase": [0, 0], "source": [0, 0], "destination": [1, 2], "size_bytes": [8, 8]}
    base.update(over)
    return pl.DataFrame(base)


@pytest.mark.parametrize(("frame", "match"), [
    (pl.DataFrame({"transfer_id": [1], "phase": [0], "source": [0], "destination": [1]}),
     r"missing column\(s\) \['size_bytes'\]"),
    (one(source=[-2, -2]), r"source=-2 on transfer_id=1 is negative"),
    (one(destination=[1, -1]), r"destination=-1 on transfer_id=1 is negative"),
    (one(destination=[1, 1472]), r"destination=1472 on transfer_id=1 is outside target 'ipu21' \(tiles 0..1471\)"),
    (one(destination=[1, 0]), r"transfer_id=1 sends from tile 0 to itself .*exchange_loopback=False"),
    (one(destination=[1, None]), r"transfer_id=1 has no destination \(empty group\)"),
    (pl.DataFrame({"transfer_id": [1], "phase": [0], "source": [0], "destination": [[]], "size_bytes": [4]},
                  schema_overrides={"destination": pl.List(pl.Int32)}), r"transfer_id=1 has no destination"),
    (one(size_bytes=[0, 0]), r"size_bytes=0 on transfer_id=1; a transfer carries at least one byte"),
    (one(source=[0, 3]), r"transfer_id=1 has several source values \[0, 3\]"),
    (one(destination=[2, 2]), r"transfer_id=1 lists destination 2 twice"),
    (one(phase=[None, 0]), r"transfers column 'phase' is null"),
    (one(src_offset=[-4, -4]), r"src_offset=-4 on transfer_id=1 is negative"),
])
def test_bad_transfers(frame: pl.DataFrame, match: str) -> None:
    with pytest.raises(ModelError, match=match):
        lower_exchanges(frame, IPU)


def test_list_destinations_are_accepted() -> None:
    t = pl.DataFrame({"transfer_id": [1], "phase": [0], "source": [0], "destination": [[1, 2]], "size_bytes": [8]})
    ex = lower_exchanges(t, IPU)
    verify_exchange(ex, t, IPU)
    assert ex.summary["multicast_groups"][0] == 1


def test_reduce_scatter_passes_draw_on_every_sender_once() -> None:
    # 8 tiles each send every other tile 20 KB (an inner-split reduce-scatter): only one piece fits a receiver's
    # 32 KiB window per pass, so 7 passes; offering each receiver's pieces by sender offset gives every pass a
    # one-to-one pattern (1 step), not one sender feeding all receivers (7 steps)
    src, dst = zip(*[(s, d) for d in range(8) for s in range(8) if s != d], strict=True)
    t = pl.DataFrame({"transfer_id": list(range(56)), "phase": [0] * 56, "source": list(src),
                      "destination": list(dst), "size_bytes": [20_000] * 56, "staging_object": [9] * 56})
    ex = lower_exchanges(t, IPU)
    verify_exchange(ex, t, IPU)
    s = ex.summary.row(0, named=True)
    assert (s["passes"], s["steps"], s["lower_bound"]) == (7, 7, 7)
    per_pass = ex.groups.group_by("pass").agg(pl.col("source").n_unique(), pl.len())
    assert per_pass["source"].to_list() == [8] * 7 and per_pass["len"].to_list() == [8] * 7
