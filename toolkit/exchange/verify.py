"""Independent checker of a lowered exchange.

Shares no code with the lowering: it reads the user's transfers and the
``Exchange`` frames and re-derives every invariant with plain polars queries.

- every transfer's words are packetized exactly once (packets tile ``[0, words)``),
  packet sizes respect the target's first-packet and packet limits;
- every destination receives every byte exactly once (the ``passes`` rows of each
  (transfer, destination) tile ``[0, size_bytes)``), and nothing else is received;
- staged bytes of a (phase, tile, pass) sit inside the window without overlap;
- no tile sends twice or receives twice in one step; passes run in order;
- plan rows match the groups and packets (one send row at the source, one
  receive row per destination, same step, words, packet count, fanout, staging offset).

Any violation raises :class:`InvalidIRError` carrying the offending rows.
"""

from __future__ import annotations

import polars as pl

from toolkit.errors import InvalidIRError
from toolkit.target import Target

# plan row word positions (the layout documented in toolkit.exchange.lower)
W_ROLE, W_STEP, W_PARTNER, W_WORDS, W_STAGING, W_OFFSET, W_PACKETS, W_FANOUT = range(8)
NONE_WORD = 0xFFFFFFFF


def verify_exchange(exchange: object, transfers: pl.DataFrame, target: Target) -> None:
    """Raise InvalidIRError unless ``exchange`` delivers ``transfers`` correctly on ``target``."""
    t = transfers
    if isinstance(t.schema.get("destination"), pl.List):
        t = t.explode("destination")
    t = t.select(pl.col("transfer_id", "phase", "source", "destination", "size_bytes").cast(pl.Int64),
                 _staged_expr(t))
    per = t.group_by("transfer_id").agg(pl.col("phase", "source", "size_bytes").first())
    packets = exchange.packets.with_columns(pl.col("phase", "words", "word_offset", "packet").cast(pl.Int64))
    passes = exchange.passes.with_columns(pl.col("phase", "tile", "pass", "byte_offset", "size_bytes",
                                                 "staged_bytes", "staging_offset").cast(pl.Int64))
    rows = exchange.rows.with_columns(pl.col("phase", "tile", "step", "pass").cast(pl.Int64))
    _check_packets(packets, per, target)
    _check_delivery(passes, t)
    _check_staging(passes, t, target)
    _check_lanes(rows)
    _check_rows(rows, packets, passes, per)


def _staged_expr(t: pl.DataFrame) -> pl.Expr:
    if "staging_object" in t.columns:
        return pl.col("staging_object").is_not_null().alias("staged")
    return pl.lit(False).alias("staged")


def _raise(msg: str, bad: pl.DataFrame) -> None:
    if bad.height:
        raise InvalidIRError(f"{msg} ({bad.height} offending rows)", rows=bad)


def _check_packets(packets: pl.DataFrame, per: pl.DataFrame, target: Target) -> None:
    wb = target.word_bytes
    _raise("packets of a transfer that does not exist",
           packets.join(per, on="transfer_id", how="anti"))
    _raise("transfer without packets", per.join(packets, on="transfer_id", how="anti"))
    _raise("packet with no words", packets.filter(pl.col("words") <= 0))
    # words of each transfer tiled exactly once
    cover = (packets.sort("transfer_id", "word_offset")
             .with_columns(pl.col("word_offset").shift(1).over("transfer_id").alias("_prev_off"),
                           pl.col("words").shift(1).over("transfer_id").alias("_prev_words")))
    _raise("packet words of a transfer overlap or leave a gap",
           cover.filter(pl.col("_prev_off").is_null() & (pl.col("word_offset") != 0)
                        | (pl.col("_prev_off").is_not_null()
                           & (pl.col("word_offset") != pl.col("_prev_off") + pl.col("_prev_words")))))
    total = (packets.group_by("transfer_id").agg(pl.col("words").sum().alias("_packet_words"))
             .join(per, on="transfer_id").with_columns(((pl.col("size_bytes") + wb - 1) // wb).alias("_words")))
    _raise("packet words do not add up to the transfer's words",
           total.filter(pl.col("_packet_words") != pl.col("_words")))
    # packet limits within each group: the first (lowest offset) packet is short
    ranked = packets.with_columns(pl.col("word_offset").rank("ordinal").over("group").alias("_rank"),
                                  pl.col("transfer_id").n_unique().over("group").alias("_transfers"))
    _raise("a group mixes several transfers", ranked.filter(pl.col("_transfers") > 1))
    _raise(f"first packet of a group exceeds first_packet_max_words={target.first_packet_max_words}",
           ranked.filter((pl.col("_rank") == 1) & (pl.col("words") > target.first_packet_max_words)))
    _raise(f"packet exceeds packet_max_words={target.packet_max_words}",
           ranked.filter(pl.col("words") > target.packet_max_words))
    _raise("packet indices of a group are not 0.. in word order",
           ranked.filter(pl.col("packet") != pl.col("_rank") - 1))


def _check_delivery(passes: pl.DataFrame, t: pl.DataFrame) -> None:
    want = t.select("transfer_id", pl.col("destination").alias("tile"), "size_bytes")
    got = passes.select("transfer_id", "tile", "byte_offset", pl.col("size_bytes").alias("_bytes"))
    _raise("received bytes on a tile that is not a destination of the transfer",
           got.join(want, on=["transfer_id", "tile"], how="anti"))
    _raise("destination that receives nothing", want.join(got, on=["transfer_id", "tile"], how="anti"))
    cover = (got.sort("transfer_id", "tile", "byte_offset")
             .with_columns(pl.col("byte_offset").shift(1).over("transfer_id", "tile").alias("_prev"),
                           pl.col("_bytes").shift(1).over("transfer_id", "tile").alias("_prev_bytes")))
    _raise("received bytes of a transfer overlap or leave a gap at a destination",
           cover.filter(pl.col("_prev").is_null() & (pl.col("byte_offset") != 0)
                        | (pl.col("_prev").is_not_null()
                           & (pl.col("byte_offset") != pl.col("_prev") + pl.col("_prev_bytes")))))
    total = (got.group_by("transfer_id", "tile").agg(pl.col("_bytes").sum())
             .join(want, on=["transfer_id", "tile"]))
    _raise("received bytes do not add up to the transfer's size",
           total.filter(pl.col("_bytes") != pl.col("size_bytes")))


def _check_staging(passes: pl.DataFrame, t: pl.DataFrame, target: Target) -> None:
    wb, window = target.word_bytes, target.staging_window_bytes
    flagged = passes.join(t.select("transfer_id", pl.col("destination").alias("tile"), "staged"),
                          on=["transfer_id", "tile"], how="left")
    staged = flagged.filter(pl.col("staged"))
    _raise("staged fragment without a staging offset", staged.filter(pl.col("staging_offset").is_null()))
    _raise("staged fragment smaller than its words",
           staged.filter(pl.col("staged_bytes") < (pl.col("size_bytes") + wb - 1) // wb * wb))
    _raise(f"staged fragment outside the {window}-byte staging window",
           staged.filter((pl.col("staging_offset") < 0)
                         | (pl.col("staging_offset") + pl.col("staged_bytes") > window)))
    lap = (staged.sort("phase", "tile", "pass", "staging_offset")
           .with_columns((pl.col("staging_offset") + pl.col("staged_bytes")).shift(1)
                         .over("phase", "tile", "pass").alias("_prev_end")))
    _raise("staged fragments overlap in a tile's window within one pass",
           lap.filter(pl.col("staging_offset") < pl.col("_prev_end")))


def _check_lanes(rows: pl.DataFrame) -> None:
    for role in ("send", "receive"):
        twice = (rows.filter(pl.col("role") == role)
                 .filter(pl.len().over("phase", "step", "tile") > 1)
                 .sort("phase", "step", "tile"))
        _raise(f"a tile has two {role} rows in one step", twice)
    span = rows.group_by("phase", "pass").agg(pl.col("step").min().alias("_first"),
                                              pl.col("step").max().alias("_last"))
    order = (span.sort("phase", "pass")
             .with_columns(pl.col("_last").shift(1).over("phase").alias("_prev_last")))
    _raise("steps of a staging pass start before the previous pass ends",
           order.filter(pl.col("_first") <= pl.col("_prev_last")))


def _check_rows(rows: pl.DataFrame, packets: pl.DataFrame, passes: pl.DataFrame, per: pl.DataFrame) -> None:
    w = rows.with_columns(*[pl.col("words").list.get(i).cast(pl.Int64).alias(f"_w{i}") for i in range(8)])
    _raise("plan row step word differs from its step", w.filter(pl.col("_w1") != pl.col("step")))
    _raise("plan row role word differs from its role",
           w.filter(pl.col("_w0") != pl.when(pl.col("role") == "send").then(0).otherwise(1)))
    pk = (packets.group_by("group").agg(pl.col("words").sum().alias("_pk_words"), pl.len().alias("_pk"),
                                        pl.col("transfer_id").first()))
    fan = passes.group_by("group").agg(pl.len().alias("_fanout"))
    g = w.join(pk, on="group", how="left").join(fan, on="group", how="left")
    _raise("plan rows of a group without packets", g.filter(pl.col("_pk").is_null()))
    _raise("plan row words/packets differ from the group's packets",
           g.filter((pl.col("_w3") != pl.col("_pk_words")) | (pl.col("_w6") != pl.col("_pk"))))
    _raise("plan row fanout differs from the group's receiving tiles", g.filter(pl.col("_w7") != pl.col("_fanout")))
    _raise("rows of one group are in different steps", g.filter(pl.col("step").n_unique().over("group") > 1))
    send = g.filter(pl.col("role") == "send")
    _raise("group without exactly one send row", pk.join(send, on="group", how="anti"))
    _raise("group with several send rows", send.filter(pl.len().over("group") > 1))
    _raise("send row not on the transfer's source tile",
           send.join(per, on="transfer_id").filter(pl.col("tile") != pl.col("source")))
    recv = g.filter(pl.col("role") == "receive").join(per.select("transfer_id", "source"), on="transfer_id")
    _raise("receive row does not name the source tile", recv.filter(pl.col("_w2") != pl.col("source")))
    match = recv.join(passes.select("group", "tile", "staging_offset", pl.col("pass").alias("_pass"),
                                    pl.lit(True).alias("_in_passes")),
                      on=["group", "tile"], how="full", coalesce=True)
    _raise("receive rows and receiving tiles of a group differ",
           match.filter(pl.col("role").is_null() | pl.col("_in_passes").is_null()))
    _raise("receive row is in a different staging pass than its passes row",
           match.filter(pl.col("pass") != pl.col("_pass")))
    _raise("receive row staging offset differs from its pass",
           match.filter(pl.col("_w4") != pl.col("staging_offset").fill_null(NONE_WORD)))
