"""``size_package``: the memory objects a runnable tile image needs, sized before placement.

Contract: takes the :class:`~toolkit.schedule.Schedule`, the lowered
:class:`~toolkit.exchange.Exchange`, the :class:`~toolkit.tiles.TilePrograms`
and the :class:`~toolkit.target.Target`; returns a :class:`Package` whose
``objects`` frame (``tables.OBJECTS_SCHEMA``, ids continuing after the
schedule's) placement takes together with the schedule's objects:
``place(pl.concat([schedule.objects, package.objects]), target)``.

Every tile that has a step gets (all live for the whole program, events
``0 .. last phase``, since an image is loaded once before the program runs):

====================  =================  ==========  ============================================
object (``name``)     ``kind``           access      size
====================  =================  ==========  ============================================
``support.code``      support            executable  ``model.support_code_bytes``
``kernel:<symbol>``   code               executable  per kernel symbol used on the tile:
                                                     ``target.kernel_code_bytes``, then
                                                     :data:`DEFAULT_KERNEL_CODE_BYTES`
``supervisor``        code               executable  distinct step bodies (size model below)
``support.stacks``    support            data        ``model.stack_bytes`` x (workers + supervisors)
``exchange_rows``     exchange_rows      data        distinct row digests on the tile x
                                                     ``plan_row_words`` x ``word_bytes``
``run_table``         run_table          data        header + one entry (with its address slots)
                                                     per step + one loop entry per repeated block
``host_state``        host_state         data        ``model.host_state_bytes``
``relocations``       relocations        data        one record per (instance, relocated object)
``args:<command>``    argument_record    data        header + one slot per operand, for a command
                                                     with more operands than
                                                     ``target.register_operands``
====================  =================  ==========  ============================================

The executable objects of a tile form one contiguity group (support code
first), so they pack into as few 16 KiB instruction elements as possible; the
group contains a ``support`` object, so placement reserves it first.

Supervisor code size model (bytes, :class:`PackageModel` fields). Each step
of the tile's sparse stream (``tiles.steps``) has a body:

- every body: ``step_bytes`` (dispatch from the run table);
- compute: per command ``call_bytes`` + ``operand_bytes`` per register
  loaded; a command with ``n`` operands loads ``n`` registers when
  ``n <= register_operands``, else one (the pointer to its argument record);
- exchange: ``exchange_call_bytes`` + ``row_ref_bytes`` per plan row the
  tile has in the phase;
- sync: ``sync_bytes``.

Bodies are position independent: the addresses they load (operands, plan-row
references) sit in the step's run-table entry, ``run_entry_bytes`` +
``argument_slot_bytes`` per slot. So steps with equal bodies (same kind,
same command shapes and operand counts, same row count) share one copy of
the code on a tile: supervisor code = the distinct bodies of the tile.
The run table is ``run_header_bytes`` + one entry per step + one loop entry
per repeated block the tile takes part in.

Repeated blocks: the schedule keeps their phases once, so their code,
rows, run entries and argument records are ONE template; each instance adds
relocation records (``schedule.relocations``: weights of instance ``i`` at
``address + i * stride``). ``templates`` compares that with unrolling
(``bytes_if_unrolled`` = template bytes x instances).

Deduplication, in two places. In SRAM: identical plan rows are stored once
per tile (``exchange.rows`` digests). In the package file (what the host
loads): every distinct content (a kernel's code, a run table, ...) is stored
once, plan rows once over all tiles plus a per-tile row index, and one
segment-table entry per loaded segment (``summary.image_bytes`` against
``loaded_bytes``); tiles whose code and rows objects have equal digests are
one image (``summary.unique_images``). Digests are 64-bit FNV-1a over integer
fields, combined in order: stable across runs and versions. Argument and
relocation records hold addresses, so their digests are known only after
placement (``package_images``); before it each counts as distinct.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from toolkit.errors import OptionError
from toolkit.tables import OBJECTS_SCHEMA
from toolkit.target import Target

#: code sizes of kernel symbols the target's ``kernel_code_bytes`` does not list (the target's table wins)
DEFAULT_KERNEL_CODE_BYTES: dict[str, int] = {"reduce": 1024, "amp_matmul_f32": 6656, "copy": 512}


@dataclass(frozen=True, slots=True, kw_only=True)
class PackageModel:
    """The package size model (bytes). Every field can be overridden."""

    step_bytes: int = 16             # per step: load the run-table entry, branch
    call_bytes: int = 24             # per kernel command: set up, call, wait for the workers
    operand_bytes: int = 8           # per operand register loaded (one relocatable address load)
    exchange_call_bytes: int = 16    # per exchange step: call the exchange driver
    row_ref_bytes: int = 4           # per plan row the tile has in an exchange step
    sync_bytes: int = 8              # per sync step
    code_align: int = 8              # instruction bundles are 64-bit
    run_header_bytes: int = 16
    run_entry_bytes: int = 8         # phase index + code offset
    host_state_bytes: int = 64       # instance counters, stream handles, status word
    argument_header_bytes: int = 4   # operand count
    argument_slot_bytes: int = 4     # one address per operand
    relocation_record_bytes: int = 8  # patched slot + address (base + instance * stride)
    support_code_bytes: int = 2048   # startup, exchange driver, sync, relocation walker
    stack_bytes: int = 256           # per context (workers + supervisors)
    segment_entry_bytes: int = 16    # package file: tile, address, size, content reference per loaded segment
    row_index_bytes: int = 4         # package file: one index per plan row a tile stores
    data_align: int = 8

    def __post_init__(self) -> None:
        for name in self.__slots__:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                msg = f"package model field {name}={v!r} must be a non-negative integer number of bytes"
                raise OptionError(msg, field=name, value=v)
        for name in ("code_align", "data_align"):
            v = getattr(self, name)
            if v <= 0 or v & (v - 1):
                msg = f"package model field {name}={v} must be a positive power of two"
                raise OptionError(msg, field=name, value=v)


TILES_SCHEMA = {
    "tile": pl.Int32, "steps": pl.Int64, "bodies": pl.Int64, "kernels": pl.Int64, "kernel_code_bytes": pl.Int64,
    "supervisor_code_bytes": pl.Int64, "support_code_bytes": pl.Int64, "code_bytes": pl.Int64,
    "code_elements": pl.Int64, "rows": pl.Int64, "unique_rows": pl.Int64, "rows_bytes": pl.Int64,
    "run_table_bytes": pl.Int64, "argument_records": pl.Int64, "argument_bytes": pl.Int64,
    "relocation_records": pl.Int64, "relocation_bytes": pl.Int64, "data_bytes": pl.Int64,
    "total_bytes": pl.Int64, "image_digest": pl.UInt64,
}
TEMPLATES_SCHEMA = {
    "block": pl.String, "instances": pl.Int64, "tiles": pl.Int64, "template_bytes": pl.Int64,
    "template_records": pl.Int64, "relocation_records": pl.Int64, "relocation_bytes": pl.Int64,
    "bytes_if_unrolled": pl.Int64, "records_if_unrolled": pl.Int64, "savings_bytes": pl.Int64,
    "savings_records": pl.Int64,
}
RELOCATIONS_SCHEMA = {
    "block": pl.String, "instance": pl.Int32, "tile": pl.Int32, "object_id": pl.Int64, "repeat_index": pl.Int32,
    "record_object": pl.Int64,
}
ARGUMENTS_SCHEMA = {
    "record_object": pl.Int64, "command_id": pl.Int64, "slot": pl.Int32, "object_id": pl.Int64,
    "role": pl.String, "offset": pl.Int64,
}
DIGESTS_SCHEMA = {"object_id": pl.Int64, "digest": pl.UInt64, "loaded": pl.Boolean}
SUMMARY_SCHEMA = {
    "tiles": pl.Int64,                  # tiles with a step (each gets an image)
    "unique_images": pl.Int64,          # distinct tile images (digest over code and plan-row objects)
    "steps": pl.Int64, "rows": pl.Int64,
    "tile_unique_rows": pl.Int64,       # rows stored in SRAM: distinct digests per tile, summed
    "unique_rows": pl.Int64,            # distinct row digests over all tiles (stored once in the package file)
    "unique_contents": pl.Int64,        # distinct contents of the other loaded package objects
    "kernel_code_bytes": pl.Int64, "supervisor_code_bytes": pl.Int64, "code_bytes": pl.Int64,
    "code_elements": pl.Int64,          # instruction elements the code needs, summed over tiles
    "rows_bytes": pl.Int64, "run_table_bytes": pl.Int64, "argument_records": pl.Int64, "argument_bytes": pl.Int64,
    "relocation_records": pl.Int64, "relocation_bytes": pl.Int64, "support_bytes": pl.Int64,
    "total_bytes": pl.Int64,            # SRAM bytes of every package object on every tile
    "max_tile_bytes": pl.Int64,
    "loaded_bytes": pl.Int64,           # package file without deduplication (loaded objects + segment table)
    "image_bytes": pl.Int64,            # package file with every distinct content and row stored once
    "template_savings_bytes": pl.Int64, "template_savings_records": pl.Int64,
    "row_dedup_savings_bytes": pl.Int64, "row_dedup_savings_records": pl.Int64,   # in SRAM, within tiles
    "dedup_savings_bytes": pl.Int64, "dedup_savings_records": pl.Int64,           # in the package file
    "dedup_savings_images": pl.Int64,
}


@dataclass(frozen=True, slots=True)
class Package:
    """Support objects of every tile image, their digests, templates and the savings."""

    objects: pl.DataFrame      # tables.OBJECTS_SCHEMA, ids after the schedule's
    tiles: pl.DataFrame        # TILES_SCHEMA: one row per tile with a step
    templates: pl.DataFrame    # TEMPLATES_SCHEMA: one row per repeated block
    relocations: pl.DataFrame  # RELOCATIONS_SCHEMA: one record per (instance, relocated object)
    arguments: pl.DataFrame    # ARGUMENTS_SCHEMA: the slots of every argument record
    digests: pl.DataFrame      # DIGESTS_SCHEMA: content digest of every package object
    summary: pl.DataFrame      # SUMMARY_SCHEMA: one row

    def frames(self) -> dict[str, pl.DataFrame]:
        return {name: getattr(self, name) for name in self.__slots__}


# -- the stage ------------------------------------------------------------------------------
def size_package(schedule, exchange, tiles, target: Target, model: PackageModel | None = None) -> Package:
    """Size every tile's image: code, plan rows, run table, host state, argument records, support."""
    model = model or PackageModel()
    final = int(schedule.phases["phase"].max()) if schedule.phases.height else 0
    next_id = int(schedule.objects["object_id"].max()) + 1 if schedule.objects.height else 0
    reg = target.register_operands
    row_bytes = target.plan_row_words * target.word_bytes

    phase_block = (schedule.phases.select("phase", "block")
                   .join(schedule.repeats.select("block", "instances"), on="block", how="left")
                   .with_columns(pl.col("instances").fill_null(1).cast(pl.Int64)))
    cmds = _commands(schedule, reg, model)
    rows = exchange.rows.select("phase", "tile", "digest")
    kept = _unique_rows(rows)
    steps = _steps(tiles.steps, cmds, rows, phase_block, model)
    active = tiles.per_tile.select("tile").sort("tile")

    kernels = cmds.select("tile", "kernel").unique().sort("tile", "kernel")
    kernels = kernels.with_columns(pl.col("kernel").replace_strict(_code_sizes(kernels["kernel"], target),
                                                                   return_dtype=pl.Int64).alias("size_bytes"))
    relocs = (schedule.relocations.join(schedule.objects.select("object_id", "tile"), on="object_id", how="inner")
              .select("block", "instance", "tile", "object_id", "repeat_index"))
    args = cmds.filter(pl.col("record")).select("command_id", "tile", "phase", "operands", "arg_bytes")
    per_tile = _per_tile(active, steps, kernels, rows, kept, args, relocs, row_bytes, model, target)

    objects, ids = _objects(per_tile, kernels, args, relocs, next_id, final, model, target)
    relocations = (relocs.join(ids["relocations"], on="tile", how="left")
                   .sort("block", "instance", "tile", "object_id").cast(RELOCATIONS_SCHEMA)
                   .select(list(RELOCATIONS_SCHEMA)))
    arguments = _arguments(schedule.operands, ids["args"])
    digests = _digests(objects, per_tile, kernels, ids, steps, kept)
    per_tile = per_tile.join(_image_digests(digests, objects), on="tile", how="left")
    templates = _templates(schedule.repeats, steps, rows, args, relocs, phase_block, row_bytes, model)
    summary = _summary(per_tile, rows, templates, objects, digests, row_bytes, model)
    return Package(objects=objects, tiles=per_tile.cast(TILES_SCHEMA).select(list(TILES_SCHEMA)),
                   templates=templates, relocations=relocations, arguments=arguments, digests=digests,
                   summary=summary)


# -- helpers -------------------------------------------------------------------------------
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


# -- digests -------------------------------------------------------------------------------
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


def fnv(*columns) -> np.ndarray:
    """64-bit FNV-1a over the 64-bit words of integer columns, row by row."""
    n = len(columns[0])
    h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for col in columns:
            h = (h ^ np.asarray(col).astype(np.int64).view(np.uint64)) * _FNV_PRIME
    return h


def _text_code(values: pl.Series) -> np.ndarray:
    """A stable 64-bit code per string (FNV-1a of its UTF-8 bytes), per distinct value."""
    words = values.unique().to_list()
    codes = {}
    for w in words:  # one per distinct string (kernel and kind names: a handful)
        h = int(_FNV_OFFSET)
        for b in str(w).encode():
            h = ((h ^ b) * int(_FNV_PRIME)) & 0xFFFFFFFFFFFFFFFF
        codes[w] = h
    return values.replace_strict(codes, return_dtype=pl.UInt64).to_numpy().view(np.int64)


def combine(segment: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Order-dependent digest per segment of a frame sorted by segment: (segments, digests)."""
    if not len(segment):
        return np.zeros(0, np.int64), np.zeros(0, np.uint64)
    starts = np.flatnonzero(np.r_[True, segment[1:] != segment[:-1]])
    pos = (np.arange(len(segment)) - np.repeat(starts, np.diff(np.r_[starts, len(segment)]))).astype(np.uint64)
    with np.errstate(over="ignore"):
        a = (h.astype(np.uint64) ^ (pos * np.uint64(0x9E3779B97F4A7C15))) * np.uint64(0xBF58476D1CE4E5B9)
        b = (h.astype(np.uint64) + pos * np.uint64(0x94D049BB133111EB)) * np.uint64(0xD6E8FEB86659FD93)
        d = fnv(np.add.reduceat(a, starts), np.bitwise_xor.reduceat(b, starts), np.diff(np.r_[starts, len(segment)]))
    return segment[starts], d


def _per_tile_digest(df: pl.DataFrame, cols: list[str], name: str) -> pl.DataFrame:
    """df sorted by tile (then content order) -> one digest per tile."""
    h = fnv(*[df[c].to_numpy() for c in cols])
    tiles, d = combine(df["tile"].to_numpy(), h)
    return pl.DataFrame({"tile": pl.Series(tiles, dtype=pl.Int32), name: pl.Series(d, dtype=pl.UInt64)})


def _digests(objects, per_tile, kernels, ids, steps, kept) -> pl.DataFrame:
    """Content digest of every package object (null where the content needs addresses: after placement)."""
    bodies = steps.unique(["tile", "body"]).sort("tile", "body")
    sup = _per_tile_digest(bodies, ["body", "code_bytes"], "supervisor")
    row_d = _per_tile_digest(kept, ["digest"], "exchange_rows")
    run = _per_tile_digest(steps.sort("tile", "index"), ["phase", "body", "slots"], "run_table")
    kern = kernels.with_columns(pl.Series("d", fnv(_text_code(kernels["kernel"]), kernels["size_bytes"]),
                                          dtype=pl.UInt64))
    key = ids["key"]
    fixed = {"support.code": fnv([1], [per_tile["support_code_bytes"][0] if per_tile.height else 0])[0],
             "host_state": fnv([2], [per_tile["host_state_bytes"][0] if per_tile.height else 0])[0]}
    by_name = objects.select("object_id", "tile", "name").join(key.select("object_id", "key"), on="object_id")
    d = (by_name
         .join(sup, on="tile", how="left").join(row_d, on="tile", how="left").join(run, on="tile", how="left")
         .join(kern.select("tile", pl.lit("kernel:").add(pl.col("kernel")).alias("name"), pl.col("d").alias("kd")),
               on=["tile", "name"], how="left")
         .with_columns(pl.when(pl.col("name") == "supervisor").then(pl.col("supervisor"))
                       .when(pl.col("name") == "exchange_rows").then(pl.col("exchange_rows"))
                       .when(pl.col("name") == "run_table").then(pl.col("run_table"))
                       .when(pl.col("name").str.starts_with("kernel:")).then(pl.col("kd"))
                       .when(pl.col("name") == "support.code").then(pl.lit(fixed["support.code"], pl.UInt64))
                       .when(pl.col("name") == "host_state").then(pl.lit(fixed["host_state"], pl.UInt64))
                       .alias("digest"),
                       (pl.col("name") != "support.stacks").alias("loaded")))
    return d.sort("object_id").cast(DIGESTS_SCHEMA).select(list(DIGESTS_SCHEMA))


def _image_digests(digests: pl.DataFrame, objects: pl.DataFrame) -> pl.DataFrame:
    """Per tile: digest over its code and plan-row objects (what makes two tile images identical)."""
    part = (objects.select("object_id", "tile", "kind", "name")
            .filter(pl.col("kind").is_in(["code", "support", "exchange_rows"]) & (pl.col("name") != "support.stacks"))
            .join(digests, on="object_id").sort("tile", "name"))
    h = fnv(_text_code(part["name"]), part["digest"].to_numpy().view(np.int64))
    tiles, d = combine(part["tile"].to_numpy(), h)
    return pl.DataFrame({"tile": pl.Series(tiles, dtype=pl.Int32), "image_digest": pl.Series(d, dtype=pl.UInt64)})


# -- templates and summary -----------------------------------------------------------------------
def _templates(repeats, steps, rows, args, relocs, phase_block, row_bytes: int, model: PackageModel) -> pl.DataFrame:
    """Per repeated block: the template (counted once) against unrolling every instance."""
    if not repeats.height:
        return pl.DataFrame(schema=TEMPLATES_SCHEMA)
    inside = steps.filter(pl.col("instances") > 1)
    st = inside.group_by("block").agg(
        pl.col("tile").n_unique().cast(pl.Int64).alias("tiles"), pl.len().cast(pl.Int64).alias("steps"),
        pl.col("entry_bytes").sum()).join(
        inside.unique(["block", "tile", "body"]).group_by("block").agg(pl.col("code_bytes").sum()), on="block")
    st = st.select("block", "tiles", "steps", (pl.col("entry_bytes") + pl.col("code_bytes")).alias("step_bytes"))
    blocks = phase_block.filter(pl.col("instances") > 1)
    inner = rows.filter(pl.col("phase").is_in(blocks["phase"].implode())).join(blocks, on="phase")
    none = pl.DataFrame(schema={"tile": pl.Int32, "digest": pl.UInt64, "block": pl.String})
    rw = pl.concat([_unique_rows(inner.filter(pl.col("block") == b)).with_columns(pl.lit(b).alias("block"))
                    for b in blocks["block"].unique().to_list()] or [none])
    rw = rw.group_by("block").agg(pl.len().cast(pl.Int64).alias("rows"))
    ar = (args.join(phase_block, on="phase").filter(pl.col("instances") > 1).group_by("block")
          .agg(pl.len().cast(pl.Int64).alias("args"), _up(pl.col("arg_bytes"), model.data_align).sum()
               .alias("arg_bytes")))
    rl = relocs.group_by("block").agg(pl.len().cast(pl.Int64).alias("relocation_records"))
    t = (repeats.select("block", pl.col("instances").cast(pl.Int64))
         .join(st, on="block", how="left").join(rw, on="block", how="left").join(ar, on="block", how="left")
         .join(rl, on="block", how="left").with_columns(pl.exclude("block", "instances").fill_null(0)))
    t = t.with_columns(
        (pl.col("step_bytes") + pl.col("rows") * row_bytes + pl.col("arg_bytes")).alias("template_bytes"),
        (pl.col("steps") + pl.col("rows") + pl.col("args")).alias("template_records"),
        (pl.col("relocation_records") * model.relocation_record_bytes).alias("relocation_bytes"),
    ).with_columns(
        (pl.col("template_bytes") * pl.col("instances")).alias("bytes_if_unrolled"),
        (pl.col("template_records") * pl.col("instances")).alias("records_if_unrolled"),
    ).with_columns(
        (pl.col("bytes_if_unrolled") - pl.col("template_bytes") - pl.col("relocation_bytes")).alias("savings_bytes"),
        (pl.col("records_if_unrolled") - pl.col("template_records") - pl.col("relocation_records"))
        .alias("savings_records"),
    )
    return t.cast(TEMPLATES_SCHEMA).select(list(TEMPLATES_SCHEMA)).sort("block")


def _summary(per_tile, rows, templates, objects, digests, row_bytes: int, model: PackageModel) -> pl.DataFrame:
    """One row: sizes over all tiles, and what templates and deduplication save (bytes and records)."""
    s = per_tile.select(
        pl.len().cast(pl.Int64).alias("tiles"),
        pl.col("steps").sum(), pl.col("rows").sum(), pl.col("unique_rows").sum().alias("tile_unique_rows"),
        pl.col("kernel_code_bytes").sum(), pl.col("supervisor_code_bytes").sum(), pl.col("code_bytes").sum(),
        pl.col("code_elements").sum(), pl.col("rows_bytes").sum(), pl.col("run_table_bytes").sum(),
        pl.col("argument_records").sum(), pl.col("argument_bytes").sum(), pl.col("relocation_records").sum(),
        pl.col("relocation_bytes").sum(), pl.col("total_bytes").max().alias("max_tile_bytes"),
    )
    rows_total = int(s["rows"][0] or 0)
    tile_unique = int(s["tile_unique_rows"][0] or 0)
    unique_rows = rows["digest"].n_unique()
    # the package file: every distinct content once, rows once with a per-tile index, one table entry per segment
    loaded = objects.join(digests, on="object_id").filter(pl.col("loaded"))
    blobs = loaded.filter(pl.col("kind") != "exchange_rows").with_columns(
        pl.coalesce(pl.col("digest"), pl.col("object_id").cast(pl.UInt64)).alias("content"))
    distinct = blobs.unique("content")
    image_bytes = (int(distinct["size_bytes"].sum()) + unique_rows * row_bytes + tile_unique * model.row_index_bytes
                   + loaded.height * model.segment_entry_bytes)
    loaded_bytes = int(loaded["size_bytes"].sum()) + loaded.height * model.segment_entry_bytes
    n_images = per_tile["image_digest"].n_unique() if per_tile.height else 0
    extra = {
        "unique_images": n_images,
        "unique_rows": unique_rows,
        "unique_contents": distinct.height,
        "support_bytes": int(objects.filter(pl.col("kind") == "support")["size_bytes"].sum()),
        "total_bytes": int(objects["size_bytes"].sum()),
        "loaded_bytes": loaded_bytes,
        "image_bytes": image_bytes,
        "template_savings_bytes": int(templates["savings_bytes"].sum()) if templates.height else 0,
        "template_savings_records": int(templates["savings_records"].sum()) if templates.height else 0,
        "row_dedup_savings_bytes": (rows_total - tile_unique) * row_bytes,
        "row_dedup_savings_records": rows_total - tile_unique,
        "dedup_savings_bytes": loaded_bytes - image_bytes,
        "dedup_savings_records": (blobs.height - distinct.height) + (tile_unique - unique_rows),
        "dedup_savings_images": per_tile.height - n_images,
    }
    s = s.with_columns(pl.exclude("tiles").fill_null(0), **{k: pl.lit(v, pl.Int64) for k, v in extra.items()})
    return s.cast(SUMMARY_SCHEMA).select(list(SUMMARY_SCHEMA))
