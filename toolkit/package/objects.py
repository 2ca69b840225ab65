"""Per-step and per-tile sizes, and the package's memory objects, for :func:`~toolkit.package.size.size_package`.

Contract: ``_commands`` and ``_steps`` apply the supervisor code size model
per command and per step (body bytes, body digest, run-table slots);
``_per_tile`` totals them per tile (``TILES_SCHEMA`` columns but the image
digest); ``_objects`` turns the totals into memory objects
(``tables.OBJECTS_SCHEMA``, ids from ``next_id``, the executable ones one
contiguity group per tile) and ``_arguments`` lists the argument-record slots.
``_code_sizes`` raises ``OptionError`` naming kernels with no code size;
``_unique_rows`` gives the distinct (tile, digest) plan rows each tile stores.
Sizes follow :class:`~toolkit.package.model.PackageModel`; see the
:mod:`toolkit.package.size` docstring for the model itself.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.errors import OptionError
from toolkit.package.digests import _text_code, combine, fnv
from toolkit.package.model import ARGUMENTS_SCHEMA, DEFAULT_KERNEL_CODE_BYTES, PackageModel
from toolkit.tables import OBJECTS_SCHEMA
from toolkit.target import Target


def _commands(schedule, reg: int, model: PackageModel) -> pl.DataFrame:
    """Commands with their operand count, whether they need an argument record, and their call code bytes."""
    nops = schedule.operands.group_by("command_id").agg(pl.len().cast(pl.Int64).alias("operands"))
    return (schedule.commands.join(nops, on="command_id", how="left")
            .with_columns(pl.col("operands").fill_null(0))
            .with_columns((pl.col("operands") > reg).alias("record"))
            .with_columns(
                pl.when(pl.col("record")).then(1).otherwise(pl.col("operands")).alias("slots"))
            .with_columns(
                (model.call_bytes + model.operand_bytes * pl.col("slots")).alias("code_bytes"),
                pl.when(pl.col("record"))
                .then(model.argument_header_bytes + model.argument_slot_bytes * pl.col("operands"))
                .otherwise(0).cast(pl.Int64).alias("arg_bytes")))


def _steps(steps: pl.DataFrame, cmds: pl.DataFrame, rows: pl.DataFrame, phase_block: pl.DataFrame,
           model: PackageModel) -> pl.DataFrame:
    """Every step: its body's code bytes and digest (the per-step size model), run-table slots, and block."""
    c = cmds.sort("tile", "phase", "command_id")
    span = int(steps["phase"].max() or 0) + 1 if steps.height else 1
    seg = c["tile"].to_numpy().astype(np.int64) * span + c["phase"].to_numpy()
    h = fnv(_text_code(c["kernel"]), *(c[k].to_numpy() for k in ("rows", "cols", "inner", "groups", "calls",
                                                                   "operands")))
    segs, d = combine(seg, h)
    shape = pl.DataFrame({"tile": pl.Series(segs // span, dtype=pl.Int32), "phase": pl.Series(segs % span,
                                                                                               dtype=pl.Int32),
                          "shape": pl.Series(d.view(np.int64), dtype=pl.Int64)})
    call = c.group_by("tile", "phase").agg(pl.col("code_bytes").sum().alias("call_bytes"),
                                           pl.col("slots").sum().alias("cmd_slots"))
    nrows = rows.group_by("tile", "phase").agg(pl.len().cast(pl.Int64).alias("rows"))
    kind = pl.col("kind")
    body = (pl.when(kind == "compute").then(pl.col("call_bytes"))
            .when(kind == "exchange").then(model.exchange_call_bytes + model.row_ref_bytes * pl.col("rows"))
            .when(kind == "sync").then(pl.lit(model.sync_bytes, pl.Int64))
            .otherwise(0))
    out = (steps.select("tile", "index", "phase", "kind")
           .join(call, on=["tile", "phase"], how="left").join(nrows, on=["tile", "phase"], how="left")
           .join(shape, on=["tile", "phase"], how="left")
           .with_columns(pl.col("call_bytes", "rows", "cmd_slots", "shape").fill_null(0))
           .with_columns((model.step_bytes + body).cast(pl.Int64).alias("code_bytes"),
                         pl.when(kind == "compute").then(pl.col("cmd_slots"))
                         .when(kind == "exchange").then(pl.col("rows")).otherwise(0).cast(pl.Int64).alias("slots"),
                         pl.when(kind == "compute").then(0).when(kind == "exchange").then(1).otherwise(2)
                         .cast(pl.Int64).alias("kind_code"))
           .with_columns((model.run_entry_bytes + model.argument_slot_bytes * pl.col("slots")).alias("entry_bytes")))
    digest = fnv(out["kind_code"].to_numpy(), out["shape"].to_numpy(), out["rows"].to_numpy(),
                 out["code_bytes"].to_numpy())
    return (out.with_columns(pl.Series("body", digest, dtype=pl.UInt64))
            .join(phase_block, on="phase", how="left").sort("tile", "index"))


def _code_sizes(names: pl.Series, target: Target) -> dict[str, int]:
    sizes = {**DEFAULT_KERNEL_CODE_BYTES, **dict(target.kernel_code_bytes)}
    missing = sorted(set(names.unique().to_list()) - set(sizes))
    if missing:
        msg = (f"target {target.name!r} has no code size for kernel(s) {missing} and the package has no default; "
               f"add them to Target.kernel_code_bytes")
        raise OptionError(msg, field="kernel_code_bytes", value=missing[0])
    return {k: sizes[k] for k in names.unique().to_list()}


def _up(expr: pl.Expr, align: int) -> pl.Expr:
    return (expr + align - 1) // align * align


def _per_tile(active, steps, kernels, rows, kept, args, relocs, row_bytes: int, model: PackageModel,
              target: Target) -> pl.DataFrame:
    loops = steps.filter(pl.col("instances") > 1).group_by("tile").agg(pl.col("block").n_unique().alias("loops"))
    parts = [
        steps.group_by("tile").agg(pl.len().cast(pl.Int64).alias("steps"),
                                   pl.col("entry_bytes").sum().alias("entry_bytes")),
        steps.unique(["tile", "body"]).group_by("tile").agg(
            pl.len().cast(pl.Int64).alias("bodies"), pl.col("code_bytes").sum().alias("supervisor_code_bytes")),
        kernels.group_by("tile").agg(pl.len().cast(pl.Int64).alias("kernels"),
                                     pl.col("size_bytes").sum().alias("kernel_code_bytes")),
        rows.group_by("tile").agg(pl.len().cast(pl.Int64).alias("rows")),
        kept.group_by("tile").agg(pl.len().cast(pl.Int64).alias("unique_rows")),
        args.group_by("tile").agg(pl.len().cast(pl.Int64).alias("argument_records"),
                                  _up(pl.col("arg_bytes"), model.data_align).sum().alias("argument_bytes")),
        relocs.group_by("tile").agg(pl.len().cast(pl.Int64).alias("relocation_records")),
        loops,
    ]
    out = active
    for p in parts:
        out = out.join(p.with_columns(pl.col("tile").cast(pl.Int32)), on="tile", how="left")
    out = out.with_columns(pl.exclude("tile").fill_null(0).cast(pl.Int64))
    ctx = target.workers + target.supervisors
    elem = target.instruction_element_bytes
    out = out.with_columns(
        _up(pl.col("supervisor_code_bytes"), model.code_align).alias("supervisor_code_bytes"),
        (pl.col("unique_rows") * row_bytes).alias("rows_bytes"),
        (model.run_header_bytes + pl.col("entry_bytes") + model.run_entry_bytes * pl.col("loops")).alias(
            "run_table_bytes"),
        (pl.col("relocation_records") * model.relocation_record_bytes).alias("relocation_bytes"),
        pl.lit(_round(model.support_code_bytes, model.code_align), pl.Int64).alias("support_code_bytes"),
        pl.lit(model.host_state_bytes, pl.Int64).alias("host_state_bytes"),
        pl.lit(model.stack_bytes * ctx, pl.Int64).alias("stack_bytes"),
    ).with_columns(
        (pl.col("kernel_code_bytes") + pl.col("supervisor_code_bytes") + pl.col("support_code_bytes")).alias(
            "code_bytes"))
    return out.with_columns(
        ((pl.col("code_bytes") + elem - 1) // elem).alias("code_elements"),
        (pl.col("rows_bytes") + pl.col("run_table_bytes") + pl.col("argument_bytes") + pl.col("relocation_bytes")
         + pl.col("host_state_bytes") + pl.col("stack_bytes")).alias("data_bytes"),
    ).with_columns((pl.col("code_bytes") + pl.col("data_bytes")).alias("total_bytes"))


def _round(n: int, align: int) -> int:
    return -(-n // align) * align


# kind order inside a tile: support code first (the group's head), kernels, supervisor, then data
_ORDER = {"support.code": 0, "kernel": 1, "supervisor": 2, "support.stacks": 3, "exchange_rows": 4,
          "run_table": 5, "host_state": 6, "relocations": 7, "args": 8}


def _objects(per_tile, kernels, args, relocs, next_id: int, final: int, model: PackageModel,
             target: Target) -> tuple[pl.DataFrame, dict[str, pl.DataFrame]]:
    def part(df, order, kind, name, size, access, align, key=None):
        return df.select(
            pl.col("tile").cast(pl.Int32), pl.lit(order, pl.Int32).alias("order"),
            (key if key is not None else pl.lit(0, pl.Int64)).cast(pl.Int64).alias("key"),
            pl.lit(kind).alias("kind"), name.alias("name"), size.cast(pl.Int64).alias("size_bytes"),
            pl.lit(access).alias("access"), pl.lit(align, pl.Int64).alias("align"))

    t = per_tile
    code, data = model.code_align, model.data_align
    parts = [
        part(t, 0, "support", pl.lit("support.code"), pl.col("support_code_bytes"), "executable", code),
        part(kernels, 1, "code", pl.lit("kernel:") + pl.col("kernel"), _up(pl.col("size_bytes"), code),
             "executable", code, key=pl.col("kernel").rank("dense")),
        part(t, 2, "code", pl.lit("supervisor"), pl.col("supervisor_code_bytes"), "executable", code),
        part(t, 3, "support", pl.lit("support.stacks"), pl.col("stack_bytes"), "data", data),
        part(t.filter(pl.col("rows") > 0), 4, "exchange_rows", pl.lit("exchange_rows"), pl.col("rows_bytes"),
             "data", target.word_bytes),
        part(t, 5, "run_table", pl.lit("run_table"), pl.col("run_table_bytes"), "data", data),
        part(t, 6, "host_state", pl.lit("host_state"), pl.col("host_state_bytes"), "data", data),
        part(t.filter(pl.col("relocation_records") > 0), 7, "relocations", pl.lit("relocations"),
             pl.col("relocation_bytes"), "data", data),
        part(args, 8, "argument_record", pl.lit("args:") + pl.col("command_id").cast(pl.String),
             _up(pl.col("arg_bytes"), data), "data", data, key=pl.col("command_id")),
    ]
    obj = (pl.concat(parts).sort("tile", "order", "key")
           .with_columns(pl.int_range(pl.len()).cast(pl.Int64).add(next_id).alias("object_id")))
    execu = pl.col("access") == "executable"
    obj = obj.with_columns(
        pl.when(execu).then(pl.col("object_id").filter(execu).min().over("tile")).alias("group"))
    objects = obj.with_columns(
        pl.lit(None, pl.Int32).alias("tensor_id"), pl.lit(0, pl.Int32).alias("first"),
        pl.lit(final, pl.Int32).alias("last"), pl.lit("standard").alias("class"),
        pl.when(execu).then(pl.lit(list(target.code_regions), pl.List(pl.Int8)))
        .otherwise(pl.lit([0, 1], pl.List(pl.Int8))).alias("regions"),
        pl.lit(None, pl.Int64).alias("alias_of"), pl.lit(1, pl.Int32).alias("repeat_count"),
        pl.lit([], pl.List(pl.Int64)).alias("separate_from"), pl.lit(False).alias("auxiliary"),
    ).cast(OBJECTS_SCHEMA).select(list(OBJECTS_SCHEMA))
    key = obj.select("tile", "order", "key", "object_id")
    ids = {
        "relocations": key.filter(pl.col("order") == 7).select("tile", pl.col("object_id").alias("record_object")),
        "args": key.filter(pl.col("order") == 8).select(pl.col("key").alias("command_id"),
                                                         pl.col("object_id").alias("record_object")),
        "kernels": key.filter(pl.col("order") == 1),
        "key": key,
    }
    return objects, ids


def _arguments(operands: pl.DataFrame, args_ids: pl.DataFrame) -> pl.DataFrame:
    """The operand slots of every argument record, in operand order."""
    return (operands.with_row_index("_pos").join(args_ids, on="command_id", how="inner")
            .sort("record_object", "_pos")
            .with_columns(pl.int_range(pl.len()).over("record_object").cast(pl.Int32).alias("slot"))
            .cast(ARGUMENTS_SCHEMA).select(list(ARGUMENTS_SCHEMA)))


def _unique_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """Distinct (tile, digest) pairs, sorted: the rows each tile stores."""
    tile = rows["tile"].to_numpy()
    digest = rows["digest"].to_numpy()
    order = np.lexsort((digest, tile))
    t, d = tile[order], digest[order]
    keep = np.r_[True, (t[1:] != t[:-1]) | (d[1:] != d[:-1])] if len(t) else np.zeros(0, bool)
    return pl.DataFrame({"tile": pl.Series(t[keep], dtype=pl.Int32), "digest": pl.Series(d[keep], dtype=pl.UInt64)})
