"""The package size model, the result type and its schemas (shared by the sizing modules).

Contract: :class:`PackageModel` holds every byte constant of the size model
(validated: non-negative integers, power-of-two alignments);
:class:`Package` is what :func:`~toolkit.package.size.size_package` returns,
each frame typed by the schema constant named beside it;
:data:`DEFAULT_KERNEL_CODE_BYTES` gives code sizes of kernel symbols the
target does not list. No computation here.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from toolkit import tables
from toolkit.errors import OptionError

#: code sizes of kernel symbols the target's ``kernel_code_bytes`` does not list (the target's table wins)
DEFAULT_KERNEL_CODE_BYTES: dict[str, int] = {"reduce": 1024, "copy": 512}


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
    schedule_fingerprint: str | None = None   # of the schedule sized (toolkit.schedule.lineage); None: unknown

    def __repr__(self) -> str:
        return tables.short_repr(self)

    def frames(self) -> dict[str, pl.DataFrame]:
        return {name: getattr(self, name) for name in self.__slots__ if name != "schedule_fingerprint"}
