"""``verify_schedule``: independent checks of a schedule's tables.

Checks, each with its offending rows in the error:

1. every command operand and every transfer endpoint is an object on the
   command's (or endpoint's) tile;
2. no object is used outside its lifetime (commands, transfers, staging);
3. every operand panel a command reads is complete before it runs: resident
   (weight, graph input), written by an earlier command, or filled exactly by
   transfers of earlier phases plus copies of the same phase (bytes add up to
   the object's size);
4. every transfer's source object holds the slice it sends (same tensor, the
   slice inside the object's rectangle) and was written before the transfer.
"""

from __future__ import annotations

import polars as pl

from toolkit.errors import InvalidIRError


def _fail(msg: str, rows: pl.DataFrame) -> None:
    if rows.height:
        raise InvalidIRError(f"verify_schedule: {msg} ({rows.height} rows)", rows=rows)


def verify_schedule(s) -> None:
    """Raise :class:`InvalidIRError` when the schedule breaks an invariant."""
    obj = s.objects.select("object_id", pl.col("tile").alias("obj_tile"), "first", "last", "kind", "size_bytes",
                           "tensor_id")
    cmd = s.commands.select("command_id", "phase", "tile", "kernel", "op_id")
    ops = s.operands.join(cmd, on="command_id").join(obj, on="object_id", how="left")
    _fail("operand object missing", ops.filter(pl.col("obj_tile").is_null()))
    _fail("operand object on another tile", ops.filter(pl.col("obj_tile") != pl.col("tile")))
    _fail("operand used outside its lifetime",
          ops.filter((pl.col("phase") < pl.col("first")) | (pl.col("phase") > pl.col("last"))))

    tr = s.transfers
    ends = pl.concat([
        tr.select("transfer_id", "phase", pl.col("source").alias("tile"), pl.col("src_object").alias("object_id"),
                  pl.lit("source").alias("end")),
        tr.select("transfer_id", "phase", pl.col("destination").alias("tile"), pl.col("dst_object").alias("object_id"),
                  pl.lit("destination").alias("end")),
        tr.select("transfer_id", "phase", pl.col("destination").alias("tile"),
                  pl.col("staging_object").alias("object_id"), pl.lit("staging").alias("end")),
    ]).join(obj, on="object_id", how="left")
    _fail("transfer endpoint object missing", ends.filter(pl.col("obj_tile").is_null()))
    _fail("transfer endpoint object on another tile", ends.filter(pl.col("obj_tile") != pl.col("tile")))
    _fail("transfer endpoint used outside its lifetime",
          ends.filter((pl.col("phase") < pl.col("first")) | (pl.col("phase") > pl.col("last"))))

    # writes: the earliest phase at which each object holds its data
    written = pl.concat([
        ops.filter(pl.col("role") == "out").group_by("object_id").agg(pl.col("phase").min().alias("ready")),
        tr.group_by("dst_object").agg(pl.col("phase").max().alias("ready")).rename({"dst_object": "object_id"}),
        s.objects.filter((pl.col("kind") == "weight") | (pl.col("first") == 0)).select(
            "object_id", pl.lit(0, dtype=pl.Int32).alias("ready")),
    ]).group_by("object_id").agg(pl.col("ready").min())  # the first complete write (in-place updates come later)
    reads = ops.filter(pl.col("role") != "out").join(written, on="object_id", how="left")
    copy_reads = reads.filter(pl.col("kernel") == "copy")
    kernel_reads = reads.filter(pl.col("kernel") != "copy")
    _fail("command reads an object nothing wrote", reads.filter(pl.col("ready").is_null()))
    _fail("command reads an object written only later",
          kernel_reads.filter(pl.col("ready") > pl.col("phase")))
    _fail("copy reads an object written in or after its phase", copy_reads.filter(pl.col("ready") >= pl.col("phase")))

    # panels filled by transfers and copies must add up to the object's size
    filled = pl.concat([
        tr.select(pl.col("dst_object").alias("object_id"), "size_bytes"),
        ops.filter((pl.col("kernel") == "copy") & (pl.col("role") == "out")).join(
            s.operands.filter(pl.col("role") == "in").select("command_id", pl.col("object_id").alias("src")),
            on="command_id").join(
            s.commands.select("command_id", "rows", "cols", "groups"), on="command_id").join(
            s.segments.select(pl.col("object_id").alias("src"), "tensor_id"), on="src").select(
            "object_id", (pl.col("rows") * pl.col("cols") * pl.col("groups")).alias("elements"), "size_bytes",
            "tensor_id"),
    ], how="diagonal")
    if filled.height:
        seg_bytes = s.segments.with_columns(
            ((pl.col("g1") - pl.col("g0")) * (pl.col("r1") - pl.col("r0")) * (pl.col("c1") - pl.col("c0")))
            .alias("obj_elements")).join(s.objects.select("object_id", pl.col("size_bytes").alias("obj_bytes")),
                                         on="object_id")
        per_elem = seg_bytes.select("object_id", (pl.col("obj_bytes") // pl.col("obj_elements")).alias("eb"),
                                    "obj_bytes")
        got = (filled.join(per_elem, on="object_id")
               .with_columns(pl.when(pl.col("elements").is_not_null()).then(pl.col("elements") * pl.col("eb"))
                             .otherwise(pl.col("size_bytes")).alias("bytes"))
               .group_by("object_id").agg(pl.col("bytes").sum(), pl.col("obj_bytes").first()))
        _fail("operand panel not filled exactly by its transfers and copies",
              got.filter(pl.col("bytes") != pl.col("obj_bytes")))

    # sources hold what they send
    if tr.height:
        src = (tr.join(s.slices.select("transfer_id", "destination", "g0", "g1", "r0", "r1", "c0", "c1"),
                       on=["transfer_id", "destination"])
               .join(s.segments.rename({c: f"o{c}" for c in ("g0", "g1", "r0", "r1", "c0", "c1")})
                     .rename({"object_id": "src_object", "tensor_id": "src_tensor"}), on="src_object", how="left")
               .join(written.rename({"object_id": "src_object"}), on="src_object", how="left"))
        inside = ((pl.col("g0") >= pl.col("og0")) & (pl.col("g1") <= pl.col("og1")) & (pl.col("r0") >= pl.col("or0"))
                  & (pl.col("r1") <= pl.col("or1")) & (pl.col("c0") >= pl.col("oc0")) & (pl.col("c1") <= pl.col("oc1")))
        _fail("transfer source does not hold the slice it sends",
              src.filter((pl.col("src_tensor") != pl.col("tensor_id")) | ~inside))
        _fail("transfer sends data before its source is written",
              src.filter(pl.col("ready").is_null() | (pl.col("ready") >= pl.col("phase"))))
