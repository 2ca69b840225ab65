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

The pieces: :mod:`toolkit.package.model` (the model, the result type and its
schemas), :mod:`toolkit.package.objects` (per-step and per-tile sizes, the
objects), :mod:`toolkit.package.digests` (content digests) and
:mod:`toolkit.package.savings` (templates and the summary); every name this
module exported before is still importable from here.
"""

from __future__ import annotations

import polars as pl

from toolkit.package.digests import _digests, _image_digests
from toolkit.package.model import RELOCATIONS_SCHEMA, TILES_SCHEMA, Package, PackageModel
from toolkit.package.objects import _arguments, _code_sizes, _commands, _objects, _per_tile, _steps, _unique_rows
from toolkit.package.savings import _summary, _templates
from toolkit.schedule.lineage import check_lineage, schedule_fingerprint
from toolkit.target import Target

__all__ = ["size_package"]


def size_package(schedule, exchange, tiles, target: Target, model: PackageModel | None = None) -> Package:
    """Size every tile's image: code, plan rows, run table, host state, argument records, support."""
    check_lineage("size_package", schedule, exchange=exchange, tiles=tiles)
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
                   summary=summary, schedule_fingerprint=schedule_fingerprint(schedule))
