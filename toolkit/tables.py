"""Schemas of the columnar IR and the one helper that builds frames from columns.

Every stage result is a set of polars DataFrames whose schemas are declared
here as typed contracts. Ids join tables (``tile``, ``phase``, ``op_id``,
``tensor_id``, ``object_id``, ``step``); units are in column names.
Stages build columns in bulk (numpy arrays or lists) and call :func:`frame`,
which orders, casts and checks them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from toolkit.errors import FormatError, InvalidIRError

Schema = dict[str, pl.DataType | type[pl.DataType]]

ID = pl.Int32
BIG = pl.Int64
STR = pl.String
IDS = pl.List(pl.Int32)

# -- graph -------------------------------------------------------------------
WORKLOADS_SCHEMA: Schema = {
    "name": STR, "kind": STR, "tokens": BIG, "width": BIG, "hidden": BIG,
    "heads": BIG, "head_dim": BIG, "batch": BIG, "blocks": BIG,
    "fused_qkv": pl.Boolean, "search_qkv": pl.Boolean, "compute_tiles": BIG, "weight_dtype": STR,
    "early_casts": pl.Boolean, "biases": pl.Boolean, "layernorm": pl.Boolean, "residual": pl.Boolean,
    "projection": pl.Boolean, "host_layout": pl.Boolean, "description": STR,
}
OPS_SCHEMA: Schema = {
    "op_id": ID, "name": STR, "kind": STR,
    "rule": STR,   # the op's behaviour (toolkit.graph.Rule): the key of every per-op rule table
    "block": STR, "inputs": IDS, "output": ID,
    "rows": BIG, "cols": BIG, "inner": BIG, "groups": BIG, "flops": BIG,
}
TENSORS_SCHEMA: Schema = {
    "tensor_id": ID, "name": STR, "shape": pl.List(BIG), "dtype": STR, "role": STR,
    "producer": ID, "block": STR, "per_instance": pl.Boolean, "size_bytes": BIG,
    "host_layout": pl.Boolean,   # a graph input the host writes straight into its first consumer's operand layout
}
REPEATS_SCHEMA: Schema = {
    "block": STR, "instances": BIG, "first_op": ID, "last_op": ID,
    "carried_in": ID, "carried_out": ID,
}

# -- target ------------------------------------------------------------------
ELEMENTS_SCHEMA: Schema = {
    "element": ID, "offset": BIG, "end": BIG, "size_bytes": BIG, "region": ID,
    "interleaved": pl.Boolean, "range": STR,
}

# -- schedule ----------------------------------------------------------------
OBJECTS_SCHEMA: Schema = {
    "object_id": BIG,       # unique over the compilation
    "tile": ID,
    "kind": STR,            # weight activation staging code exchange_rows run_table host_state support
                            # argument_record relocations
    "name": STR,
    "tensor_id": ID,        # null for objects that hold no tensor
    "size_bytes": BIG,
    "align": BIG,
    "first": ID,            # first event (symbolic phase index) the object is live
    "last": ID,             # last event, inclusive
    "access": STR,          # data | executable
    "class": STR,           # standard | interleaved
    "regions": pl.List(pl.Int8),  # allowed regions in preference order
    "group": BIG,           # contiguity group (null: none)
    "alias_of": BIG,        # alias root object (null: none)
    "repeat_count": ID,     # instances of an iterated parameter (1: not iterated)
    "separate_from": pl.List(BIG),  # objects it must not share an element with
    "auxiliary": pl.Boolean,  # may use only addresses no planned buffer ever occupies
}
TRANSFERS_SCHEMA: Schema = {
    "transfer_id": BIG,     # one logical transfer; several rows = multicast
    "phase": ID,
    "source": ID,
    "destination": ID,
    "size_bytes": BIG,
    "tensor_id": ID,
    "src_offset": BIG,      # byte offset of the slice in the source tile's object
    "dst_offset": BIG,      # byte offset of the slice in the destination tile's object
    "src_object": BIG,
    "dst_object": BIG,
    "staging_object": BIG,  # reference to the receiving tile's staging object (null: direct)
}

# -- placement ---------------------------------------------------------------
PLACEMENT_SCHEMA: Schema = {
    "object_id": BIG, "tile": ID, "address": BIG, "stride_bytes": BIG, "region": ID,
    "first_element": ID, "last_element": ID,
}
OCCUPANCY_SCHEMA: Schema = {
    "tile": ID, "event": ID, "live_bytes": BIG, "standard_bytes": BIG,
    "interleaved_bytes": BIG, "region0_bytes": BIG, "region1_bytes": BIG,
    "free_bytes": BIG, "largest_free_bytes": BIG,
}
FAILURES_SCHEMA: Schema = {
    "tile": ID, "event": ID, "live_bytes": BIG, "capacity_bytes": BIG,
    "largest_objects": pl.List(BIG), "proven": pl.Boolean, "reason": STR,
}

# -- profile -----------------------------------------------------------------
SAMPLE_KINDS = ("exchange", "compute", "synchronization", "idle")
ACTIVITY_KINDS = ("send", "receive", "partnerBusy")
SAMPLES_SCHEMA: Schema = {
    "tile": ID,             # physical tile
    "sample": BIG,          # position of the sample in its tile's list
    "local_index": BIG, "phase": BIG, "epoch": BIG,
    "operation": STR, "kind": STR, "kernel": STR,
    "start_cycle": BIG,     # raw 32-bit counter values (wrap-aware arithmetic)
    "end_cycle": BIG,
    "exchange_event_cycles": BIG,
}
ACTIVITIES_SCHEMA: Schema = {
    "tile": ID, "sample": BIG, "kind": STR, "fanout": BIG, "paired": pl.Boolean,
    "start_cycle": BIG, "end_cycle": BIG,
}
METADATA_SCHEMA: Schema = {"tile": ID, "sample": BIG, "name": STR, "value": STR}


# -- views -------------------------------------------------------------------
#: ``Compilation.summary()``, one row per compilation: column -> (dtype, what it is). The one owner of these names
#: and meanings (the CLI's legends, the sweep chart's axes and the case comparison read them here). A number's
#: name says which figure it is: ``lowered_*`` is the lowered estimate (compute and sync phases as scheduled,
#: exchange phases as lowered, repeat instances multiplied in), never the layout search's screen estimate, which
#: ``layout.candidates`` calls ``est_cycles``, ``launches`` and ``peak_live_bytes``; a name both frames carry holds
#: the same quantity in both (tests/test_pipeline.py checks it).
SUMMARY_COLUMNS: dict[str, tuple[pl.DataType | type[pl.DataType], str]] = {
    "workload": (STR, "the workload compiled"),
    "lowered_cycles": (BIG, "lowered estimate, cycles (scheduled compute and sync phases, exchange phases as "
                            "lowered, repeat instances multiplied in)"),
    "lowered_compute_cycles": (BIG, "lowered estimate of the compute phases, cycles"),
    "lowered_exchange_cycles": (BIG, "lowered estimate of the exchange phases, cycles"),
    "lowered_sync_cycles": (BIG, "lowered estimate of the sync phases, cycles"),
    "lowered_launches": (BIG, "worker launches of the lowered program (the busiest tile of each phase, summed over "
                              "phases)"),
    "kernel_calls": (BIG, "kernel calls of the lowered program (the busiest tile of each phase, summed over phases)"),
    "phases": (BIG, "BSP phases (repeat instances expanded)"),
    "commands": (BIG, "kernel commands (repeat instances expanded)"),
    "transfers": (BIG, "transfers, one row per destination (repeat instances expanded)"),
    "objects": (BIG, "memory objects (repeat instances expanded)"),
    "exchange_steps": (BIG, "lowered exchange steps (repeat instances expanded)"),
    "peak_sram_bytes": (BIG, "placed peak SRAM, bytes per tile (the fullest tile's live bytes at its peak event; "
                             "empty when placement did not place every object or produced no occupancy)"),
    "screen_peak_bytes": (BIG, "screen estimate of the peak SRAM, bytes per tile (the layout search's resident "
                               "weights + largest transient set + package support)"),
    "placed": (pl.Boolean, "whether joint placement placed every object"),
    "tiles_used": (BIG, "tiles with any step"),
    "row_block": (BIG, "the chosen layout's row block"),
    "local_rows": (BIG, "the chosen layout's rows per tile of each matmul"),
    "row_shard": (BIG, "the chosen layout's row shard"),
    "inner_split": (BIG, "the chosen layout's inner split"),
    "plans": (STR, "the chosen layout's per-op GEMM plans"),
    "weight_class": (STR, "the chosen layout's weight class"),
    "fused_qkv": (pl.Boolean, "whether the chosen layout fuses Q, K and V"),
}
SUMMARY_SCHEMA: Schema = {name: dtype for name, (dtype, _) in SUMMARY_COLUMNS.items()}
SUMMARY_MEANINGS: dict[str, str] = {name: meaning for name, (_, meaning) in SUMMARY_COLUMNS.items()}
#: summary columns under the names they had before the names said which figure they are (sweep point files and
#: case manifests written then still hold them): old name -> the column holding the same figure now
SUMMARY_RENAMED: dict[str, str] = {
    "est_cycles": "lowered_cycles", "compute_cycles": "lowered_compute_cycles",
    "exchange_cycles": "lowered_exchange_cycles", "sync_cycles": "lowered_sync_cycles",
    "launches": "lowered_launches",
}


def summary_label(name: str) -> str:
    """A summary column's meaning without its scope (``lowered estimate, cycles``): an axis title."""
    return SUMMARY_MEANINGS[name].split(" (", 1)[0]


def upgrade_summary(rows: pl.DataFrame, *, file: str | None = None) -> pl.DataFrame:
    """Summary rows written under the old names (:data:`SUMMARY_RENAMED`) in today's: renamed; a row that did not
    place loses its ``peak_sram_bytes`` (it counted only the objects that placed); ``screen_peak_bytes`` was not
    recorded then and stays absent. Rows already in today's names are returned as they are; rows holding an old
    name and its new one both are a FormatError naming both (``file``: where they were read)."""
    old = [c for c in SUMMARY_RENAMED if c in rows.columns]
    if not old:
        return rows
    both = [c for c in old if SUMMARY_RENAMED[c] in rows.columns]
    if both:
        msg = (f"holds both {both[0]!r} (the summary's name for it before) and {SUMMARY_RENAMED[both[0]]!r}; "
               f"a summary written by one toolkit holds one of them")
        raise FormatError(msg, file=file, field=both[0])
    out = rows.rename({c: SUMMARY_RENAMED[c] for c in old})
    if "peak_sram_bytes" in out.columns:
        placed = pl.col("placed").fill_null(False) if "placed" in out.columns else pl.lit(False)
        out = out.with_columns(pl.when(placed).then(pl.col("peak_sram_bytes")).alias("peak_sram_bytes"))
    return out


def frame(columns: Mapping[str, Any], schema: Schema, *, what: str = "frame") -> pl.DataFrame:
    """Build a DataFrame from bulk columns, in schema order and with schema dtypes.

    ``columns`` maps every schema column to a numpy array, list, Series or a
    scalar (broadcast). Missing or unexpected columns are a toolkit bug and
    raise :class:`InvalidIRError` naming them.
    """
    missing = [c for c in schema if c not in columns]
    extra = [c for c in columns if c not in schema]
    if missing or extra:
        msg = f"{what}: columns do not match the schema (missing {missing}, unexpected {extra})"
        raise InvalidIRError(msg)
    lengths = {len(v) for v in columns.values() if _is_column(v)}
    if len(lengths) > 1:
        msg = f"{what}: columns have different lengths {sorted(lengths)}"
        raise InvalidIRError(msg)
    height = lengths.pop() if lengths else 1
    series = []
    for name, dtype in schema.items():
        value = columns[name]
        if not _is_column(value):
            value = [value] * height
        if isinstance(value, np.ndarray) and value.dtype.kind in "US":
            value = value.tolist()
        series.append(pl.Series(name, value, dtype=dtype, strict=False))
    return pl.DataFrame(series)


def empty(schema: Schema) -> pl.DataFrame:
    """A zero-row frame with the schema."""
    return pl.DataFrame(schema=schema)


def conform(df: pl.DataFrame, schema: Schema, *, what: str = "frame") -> pl.DataFrame:
    """Check that ``df`` has exactly the schema's columns and dtypes; return it in schema order."""
    have = dict(df.schema)
    bad = [
        f"{c} ({have.get(c, 'missing')}, expected {t})"
        for c, t in schema.items()
        if c not in have or have[c] != t
    ]
    if bad:
        msg = f"{what}: schema mismatch in columns: {', '.join(bad)}"
        raise InvalidIRError(msg)
    return df.select(list(schema))


def _is_column(value: Any) -> bool:
    return isinstance(value, np.ndarray | list | tuple | pl.Series | range)


# -- short reprs -------------------------------------------------------------------
#: characters of a scalar field a result's repr shows before cutting it
REPR_VALUE_CHARS = 60


def short_repr(obj: Any, **extra: Any) -> str:
    """A stage result in one short line: its frames as ``<rows x columns>``, nested results by type, dicts by
    size, scalars cut at ``REPR_VALUE_CHARS`` (``repr`` of a result printed its frames: millions of characters).
    ``extra`` adds named values (a headline number) after the fields."""
    import dataclasses

    def one(value: Any) -> str:
        if isinstance(value, pl.DataFrame):
            return f"<{value.height:,} rows x {value.width} cols>"
        if isinstance(value, pl.LazyFrame):
            return "<lazy>"
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return f"<{type(value).__name__}>"
        if isinstance(value, dict | list | tuple) and len(repr(value)) > REPR_VALUE_CHARS:
            return f"<{type(value).__name__} of {len(value)}>"
        text = repr(value)
        return text if len(text) <= REPR_VALUE_CHARS else text[: REPR_VALUE_CHARS - 3] + "..."

    names = [f.name for f in dataclasses.fields(obj)] if dataclasses.is_dataclass(obj) else []
    parts = [f"{n}={one(getattr(obj, n))}" for n in names] + [f"{k}={one(v)}" for k, v in extra.items()]
    return f"{type(obj).__name__}({', '.join(parts)})"
