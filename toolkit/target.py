"""The machine: one frozen, data-driven ``Target`` value.

``ipu21()`` is the Graphcore IPU21 (C600) default. Every field can be
overridden with ``dataclasses.replace`` (validated again) or loaded from a JSON
or TOML file of overrides (:func:`load_target`). Memory is described by an
element table (offset, size, region, interleaved), not scattered constants.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import math
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import OptionError
from toolkit.fields import check_fields
from toolkit.tables import ELEMENTS_SCHEMA, frame

KIB = 1024
#: size sanity limits, refused before any work (README "Limits"): a target past them is a typo, and would
#: spend minutes and gigabytes before failing (100,000 tiles: 165 s and 14 GB)
MAX_TILES = 8192               # 5.6 IPU21 chips of 1472 tiles
MAX_COST = 10**9               # cycles, bytes or elements in one cost constant
LIMITS: dict[str, int] = {
    "tiles": MAX_TILES, "workers": 64, "supervisors": 16, "exchange_bytes_per_cycle": 1 << 16,
    "packet_max_words": 1 << 20, "first_packet_max_words": 1 << 20, "word_bytes": 64,
    "staging_window_bytes": 1 << 32, "plan_row_words": 1 << 16, "register_operands": 1024,
    "instruction_element_bytes": 1 << 32, "grid_columns": MAX_TILES, "memory_end": 1 << 32,
    "ld128_align": 1 << 16, "memory_elements": 4096, "amp": 64, "kernel_code_bytes": 4096,
}


class MemClass(StrEnum):
    STANDARD = "standard"
    INTERLEAVED = "interleaved"


@dataclass(frozen=True, slots=True, kw_only=True)
class Element:
    """One memory element: two same-cycle operands must sit in different elements."""

    offset: int
    size: int
    region: int
    interleaved: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class AmpRate:
    """AMP throughput for one input dtype and partials dtype."""

    dtype: str
    partials: str
    block_rows: int
    block_cols: int
    macs_per_cycle: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Costs:
    """Cost constants of the IPU21 kernels and exchange, measured on hardware (``shared/HARDWARE.md``).

    The formulas that read them live in :mod:`toolkit.costs` (one rule per
    kernel kind, each naming its source). Every field is a non-negative whole
    number of cycles, bytes or elements; overrides are validated.
    """

    # AMP matmul (HARDWARE.md section 1): 294 + panels x (4 max(R, amp_min_rows) + 160)
    amp_call_cycles: int = 294
    amp_row_cycles: int = 4
    amp_panel_cycles: int = 160
    # a call of fewer rows than one 16-row AMP block still streams a whole block per panel: ipu-stack's shared-row
    # attention products (8 query rows x 729 keys x K72, and PV 8 x 72 x K729; docs/ATTENTION_PRODUCT_LAYOUTS.md)
    # measured 54,744 and 53,712 cycles where 4 cycles a row give 44,465 (16 rows: 51,814)
    amp_min_rows: int = 16
    amp_panel_depth_f16: int = 16          # K per coefficient panel (FP16)
    amp_panel_depth_f8: int = 32           # K per coefficient panel (FP8: twice the MAC rate)
    amp_panel_cols: int = 16
    amp_standard_feed_cycles: int = 1063   # standard-memory weight feed per 16 columns (the tool's pricing)
    amp_packed_call_cycles: int = 342      # packed-output stores
    amp_packed_row_cycles: int = 24
    amp_packed_chunk_cycles: int = 184
    amp_packed_panel_interleaved_cycles: int = 170
    amp_packed_panel_standard_cycles: int = 202
    # FP16 reduction of P partials (section 2): 282 + 6 ceil(E/48) (11 + 2 (P - 1))
    reduce_call_cycles: int = 282
    reduce_pass_elements: int = 48
    reduce_pass_cycles: int = 11
    reduce_partial_cycles: int = 2
    # GELU (section 3): 330 + 462 ceil(E/96); pair path 480 per 48-pair block, 120 per tail pair, 342 setup
    gelu_call_cycles: int = 330
    gelu_block_elements: int = 96
    gelu_block_cycles: int = 462
    gelu_tail_block_cycles: int = 480
    gelu_pair_cycles: int = 120
    gelu_tail_call_cycles: int = 342
    bias_gelu_call_cycles: int = 450
    bias_gelu_quad_wave_cycles: int = 90   # 15 issue groups per quad x 6 workers, per 24 elements
    elementwise_row_cycles: int = 228      # per extra row of a fused bias-GELU
    # LayerNorm (section 3): 132 + rows (stats + apply + 1329)
    ln_call_cycles: int = 132
    ln_row_setup_cycles: int = 1329
    ln_stats_cycles: int = 24
    ln_stats_per48_cycles: int = 12
    ln_stats_per24_cycles: int = 30
    ln_apply_cycles: int = 66
    ln_apply_per24_cycles: int = 72
    ln_add_row_setup_cycles: int = 57      # fused residual add + LayerNorm: extra work
    ln_add_stats_per48_cycles: int = 18
    ln_add_stats_per24_cycles: int = 12
    ln_add_apply_per24_cycles: int = 12
    # add (section 3): 504 + rows 18 ceil(cols/24) + 234 (rows - 1)
    add_call_cycles: int = 504
    add_per24_cycles: int = 18
    add_row_cycles: int = 234
    # softmax (section 3): the cheaper of whole-row and split-row schedules
    softmax_panel_cycles: int = 43
    softmax_whole_call_cycles: int = 216
    softmax_masked_call_cycles: int = 234
    softmax_split_call_cycles: int = 408
    softmax_segment_cycles: int = 128
    softmax_final_cycles: int = 126
    softmax_split_rows: int = 1            # 1: the build has the split-row schedule; 0: whole rows only
    # local copies and casts (section 3): 288 per six-worker call plus 8 B/cycle
    copy_call_cycles: int = 288
    copy_bytes_per_cycle: int = 8
    cast_bytes_per_cycle: int = 8
    # an attention product's operand cast after its F16 distribution (FP8_ATTENTION_AND_HOST_IO_2026_09_11.md: the
    # larger of PV's two casts ran 6,888 cycles on the F16 grid's ~92 x 92 score block, about three cycles per
    # 64-bit group of four values, against one for the pipelined paced loop; ipu-stack's cast pipelines only when
    # its input and output ranges sit in distinct 32 KiB groups, FP8_CAST_OVERLAP_2026_09_12.md, and a product
    # operand is also packed into the FP8 AMP's 32-deep panels): cycles per 8 input bytes
    cast_packed_group_cycles: int = 3
    # unpack of a swapped (transposed-left) AMP result into row-major Q / K (ipu-stack's unpack_transposed_amp_f16
    # worker, kernel/rearrange.rs): 300 + ceil(rows / 12) (100 + ceil(physical cols / 2) 90); six workers take row
    # pairs, about fifteen issue slots per two columns
    unpack_call_cycles: int = 300
    unpack_pass_rows: int = 12
    unpack_pass_cycles: int = 100
    unpack_column_pair_cycles: int = 90
    # attention merge (ipu-stack's AttentionMerge; its kernel/cost.rs fixtures give 2,430 cycles for 7-8 rows x 72
    # values with a first merge, 3,438 for a later and final one): the softmax leaves its exponentials unnormalized
    # and the merge scales every attention-product row by its softmax denominator and writes it FP16. Six workers
    # take whole rows: 222 + 6 ceil(rows / 6) (31 + 3 floor(values / 16) + 4 ceil(values / 2)), 2,466 for 7-8 x 72
    merge_call_cycles: int = 222
    merge_row_cycles: int = 31
    merge_panel_cycles: int = 3
    merge_pair_cycles: int = 4
    # rearrangements of row-major FP16 rows (ipu-stack's kernel/rearrange.rs), per physical element, columns
    # padded to the 16-column micro-panel: into the AMP's left-operand order (rearrange_amp_left_f16) and into a
    # transposed-right coefficient panel (the GEMM's coefficient permutation)
    rearrange_left_element_cycles: int = 1
    rearrange_right_element_cycles: int = 3
    launch_cycles: int = 11                # supervisor kernel launch (SDK constant)
    # exchange (section 4): max(payload / 4 B per cycle, control) per tile; per-phase overrun; global sync
    exchange_send_cycles: int = 2
    exchange_receive_cycles: int = 2
    exchange_reset_cycles: int = 1
    exchange_phase_cycles: int = 250       # measured 230-280 past the scheduled horizon per exchange phase
    # exchange horizon (HARDWARE.md section 4, ipu-stack EXCHANGE_INSTRUCTION_REFERENCE.md): payload arrives
    # 52 + 2 x (physical row) events after the receiver selects its source; a 92-tile exchange column holds 46
    # physical rows of 2 paired tiles (the 46x2 grid of MLP_LAYOUT_ALTERNATIVES.md's tile mapping)
    exchange_arrival_cycles: int = 52
    exchange_arrival_row_cycles: int = 2
    exchange_column_tiles: int = 92
    exchange_row_tiles: int = 2
    # a send whose run is not whole 32-byte rows of an AMP panel (16 FP16 or 32 FP8 columns) is a strided partial-
    # panel run in the hardware's AMP-left layout, one per row: three supervisor instructions of 6 cycles each
    # (send, pointer and source controls); MLP_LAYOUT_ALTERNATIVES.md's fc1 result 2x2 (92 x 24 pieces, 276 such
    # runs per tile) raised its reduction from 3,779 to 8,944 scheduled cycles, 18.7 per run
    exchange_panel_row_bytes: int = 32
    exchange_run_cycles: int = 18
    sync_cycles: int = 600

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                _fail(f"costs.{f.name}", value, "must be a non-negative integer")
            if value > MAX_COST:
                _fail(f"costs.{f.name}", value, f"is above {MAX_COST:,}, the largest cost constant the cost "
                                                "formulas accept (products of them must fit 64 bits)")
        for name in ("amp_panel_depth_f16", "amp_panel_depth_f8", "amp_panel_cols", "reduce_pass_elements",
                     "gelu_block_elements", "copy_bytes_per_cycle", "unpack_pass_rows", "cast_bytes_per_cycle",
                     "exchange_column_tiles", "exchange_row_tiles", "exchange_panel_row_bytes"):
            if getattr(self, name) == 0:
                _fail(f"costs.{name}", 0, "must be positive (it divides)")


def _ipu21_elements() -> tuple[Element, ...]:
    standard = [Element(offset=0x4C000 + i * 16 * KIB, size=16 * KIB, region=0, interleaved=False) for i in range(13)]
    pairs = [Element(offset=0x80000 + i * 32 * KIB, size=32 * KIB, region=1, interleaved=True) for i in range(13)]
    return tuple(standard + pairs)


def _ipu21_amp() -> tuple[AmpRate, ...]:
    return (
        AmpRate(dtype="f16", partials="f16", block_rows=16, block_cols=16, macs_per_cycle=64),
        AmpRate(dtype="f16", partials="f32", block_rows=16, block_cols=16, macs_per_cycle=32),
        AmpRate(dtype="f8", partials="f16", block_rows=32, block_cols=16, macs_per_cycle=128),
    )


def _ipu21_code_sizes() -> tuple[tuple[str, int], ...]:
    # Bytes of linked code per kernel symbol (overridable; replaced by measured sizes).
    return (
        ("amp_matmul_f16", 6144), ("amp_matmul_f8", 6656), ("amp_matmul_f16_p32", 6656), ("amp_matmul_f8_p32", 7168),
        ("reduce", 1024), ("layernorm", 2304), ("add_layernorm", 2560), ("bias_gelu", 1792),
        ("gelu", 1536), ("softmax", 2048), ("add", 768), ("cast", 1024),
        ("copy", 512), ("unpack", 512), ("merge", 512), ("rearrange_left", 512), ("rearrange_right", 512),
        ("scale", 640),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """A tile machine: tiles, memory element table, exchange and kernel constants."""

    name: str = "ipu21"
    tiles: int = 1472
    workers: int = 6
    supervisors: int = 1
    clock_hz: float = 1.5e9
    memory_start: int = 0x4C000
    memory_end: int = 0xE8000
    load_limit: int = 0xE7BB0
    memory_elements: tuple[Element, ...] = field(default_factory=_ipu21_elements)
    code_regions: tuple[int, ...] = (0,)
    instruction_element_bytes: int = 16 * KIB
    amp: tuple[AmpRate, ...] = field(default_factory=_ipu21_amp)
    exchange_bytes_per_cycle: int = 4
    packet_max_words: int = 4148
    first_packet_max_words: int = 64
    word_bytes: int = 4
    staging_window_bytes: int = 32 * KIB
    staging_base: int = 0x50000
    plan_row_words: int = 9
    exchange_loopback: bool = False
    register_operands: int = 7
    ld128_align: int = 16
    costs: Costs = field(default_factory=Costs)
    kernel_code_bytes: tuple[tuple[str, int], ...] = field(default_factory=_ipu21_code_sizes)
    grid_columns: int = 46  # tiles drawn per row in chip-grid views (1472 = 32 x 46)

    def __post_init__(self) -> None:
        _validate(self)

    # -- derived ---------------------------------------------------------------
    @property
    def memory_bytes(self) -> int:
        return self.memory_end - self.memory_start

    def elements(self) -> pl.DataFrame:
        """The memory element table as a DataFrame (ELEMENTS_SCHEMA)."""
        els = self.memory_elements
        return frame(
            {
                "element": list(range(len(els))),
                "offset": [e.offset for e in els],
                "end": [e.offset + e.size for e in els],
                "size_bytes": [e.size for e in els],
                "region": [e.region for e in els],
                "interleaved": [e.interleaved for e in els],
                "range": [f"{e.offset:#07x}..{e.offset + e.size:#07x}".upper().replace("0X", "0x") for e in els],
            },
            ELEMENTS_SCHEMA,
            what="elements",
        )

    def regions(self) -> pl.DataFrame:
        """One row per region: start, end, size, whether it is interleaved, whether code may live there."""
        return (
            self.elements()
            .group_by("region", maintain_order=True)
            .agg(
                pl.col("offset").min().alias("start"),
                pl.col("end").max(),
                pl.col("size_bytes").sum(),
                pl.col("size_bytes").first().alias("element_bytes"),
                pl.len().alias("elements"),
                pl.col("interleaved").all(),
            )
            .with_columns(pl.col("region").is_in(list(self.code_regions)).alias("code"))
        )

    def amp_rate(self, dtype: str = "f16", partials: str = "f16") -> AmpRate:
        for rate in self.amp:
            if rate.dtype == dtype and rate.partials == partials:
                return rate
        msg = f"target {self.name!r} has no AMP rate for dtype={dtype!r} partials={partials!r}"
        raise OptionError(msg, field="amp", value=(dtype, partials))

    def code_bytes(self, kernel: str) -> int:
        for name, size in self.kernel_code_bytes:
            if name == kernel:
                return size
        msg = f"target {self.name!r} has no code size for kernel {kernel!r}; add it to kernel_code_bytes"
        raise OptionError(msg, field="kernel_code_bytes", value=kernel)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (the manifest records it)."""
        return dataclasses.asdict(self)

    def replace(self, **overrides: Any) -> Target:
        """A copy with fields replaced (nested dicts for ``costs``); validated."""
        return _apply(self, overrides, source="override")


#: ipu-stack kernel builds whose measured programs the plans benchmark compares against, as cost overrides of
#: the current build. "2026-09-06" is the MLP layout sweep's frozen cohort: its docs/MLP_LAYOUT_SWEEP.md states
#: that build's worker loops, F16 reduction 282 + 6 ceil(n / 48) (9 + 6 (P - 1)) and aligned GELU
#: 300 + 558 ceil(n / 96), before the co-issued reduction and the f16v4 GELU its ISA review proposed (the
#: current rules of HARDWARE.md sections 2 and 3; MLP_LAYOUT_ALTERNATIVES.md ran the upgraded kernels). Its
#: GELU main loop was itself two-lane paired arithmetic (docs/KERNEL_LOOP_UPGRADE.md: the upgrade made it
#: four-lane and left the two-lane tail unchanged), so a length off the 16-element grid ran its 48-pair blocks at
#: the same 558 cycles, not the later kernel's 480-cycle tail blocks.
#: "2026-09-07" is the attention product-grid cohort (docs/ATTENTION_PRODUCT_LAYOUTS.md): upgraded reduction and
#: GELU, but the original attention softmax that docs/SOFTMAX_OPTIMIZATION.md measured at 40,326 cycles per call
#: (7 or 8 rows of 729 keys): whole rows round-robin over the six workers, 71 issue groups per full 16-key panel
#: (the max scan and the pairwise exponential pass) where the later f16v4mix kernel takes 43, and no split-row
#: schedule. The same independent-grid program measured 234,378 with it and 215,832 with the current kernel.
KERNEL_BUILDS: dict[str, dict[str, int]] = {
    "current": {},
    "2026-09-06": {"reduce_pass_cycles": 9, "reduce_partial_cycles": 6, "gelu_call_cycles": 300,
                   "gelu_block_cycles": 558, "gelu_tail_block_cycles": 558, "softmax_panel_cycles": 71,
                   "softmax_split_rows": 0},
    "2026-09-07": {"softmax_panel_cycles": 71, "softmax_split_rows": 0},
}


def _data_builds() -> dict[str, dict[str, int]]:
    """Kernel builds stored as data, ``toolkit/data/kernel_builds/<name>.json`` (fitted by ``toolkit calibrate``,
    :mod:`toolkit.calibrate.build`): their ``costs`` overrides, validated when a build is applied."""
    import json
    from importlib import resources
    folder = resources.files("toolkit").joinpath("data", "kernel_builds")
    if not folder.is_dir():
        return {}
    return {f.name.removesuffix(".json"): dict(json.loads(f.read_text())["costs"])
            for f in sorted(folder.iterdir(), key=lambda f: f.name) if f.name.endswith(".json")}


#: the kernel builds stored as data (fitted cost constants), by name; they join KERNEL_BUILDS
DATA_BUILDS = _data_builds()
KERNEL_BUILDS.update(DATA_BUILDS)


def with_kernel_build(target: Target, build: str) -> Target:
    """``target`` with the kernel costs of one of :data:`KERNEL_BUILDS`."""
    if build not in KERNEL_BUILDS:
        msg = f"option kernel_build={build!r} must be one of {tuple(KERNEL_BUILDS)}"
        raise OptionError(msg, field="kernel_build", value=build)
    changes = KERNEL_BUILDS[build]
    return target.replace(costs=changes) if changes else target


def ipu21() -> Target:
    """The Graphcore IPU21 (C600) default target."""
    return Target()


def load_target(path: str | Path, base: Target | None = None) -> Target:
    """Apply the overrides in a JSON or TOML file to ``base`` (default :func:`ipu21`); the file is read bounded
    (a regular file, at most ``files.TEXT_LIMIT`` bytes, UTF-8, nesting at most ``files.MAX_DEPTH``)."""
    from toolkit.errors import FormatError
    from toolkit.files import TEXT_LIMIT, load_json, load_toml, read_bytes
    if not isinstance(path, str | Path):
        raise OptionError(f"path={path!r} must be a path to a JSON or TOML file, not {type(path).__name__}",
                          field="path", value=path)
    if base is not None and not isinstance(base, Target):
        raise OptionError(f"base must be a Target, not {type(base).__name__}", field="base", value=base)
    p = Path(path)
    try:
        raw = read_bytes(p, limit=TEXT_LIMIT, what="target file")
        data = load_toml(raw, str(p)) if p.suffix == ".toml" else load_json(raw, str(p))
    except FormatError as exc:
        msg = f"cannot read target overrides from {p}: {str(exc).removeprefix(f'{p}: ')}"
        raise OptionError(msg, field="target", value=str(p)) from None
    if not isinstance(data, dict):
        msg = f"target overrides in {p} must be a table/object of field names, got {type(data).__name__}"
        raise OptionError(msg, field="target", value=str(p))
    return _apply(base or ipu21(), data, source=str(p))


# -- validation ---------------------------------------------------------------
_NESTED = {"memory_elements": Element, "amp": AmpRate}


def _apply(target: Target, overrides: dict[str, Any], *, source: str) -> Target:
    names = {f.name for f in dataclasses.fields(Target)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        msg = f"unknown target field(s) {unknown} in {source}; known: {sorted(names)}"
        raise OptionError(msg, field=unknown[0], value=overrides[unknown[0]])
    values = dict(overrides)
    for key, cls in _NESTED.items():
        if key in values:
            if not isinstance(values[key], list | tuple) or not all(isinstance(v, cls | dict) for v in values[key]):
                msg = f"{key} in {source} must be a list of tables, got {values[key]!r}"
                raise OptionError(msg, field=key, value=values[key])
            try:
                values[key] = tuple(v if isinstance(v, cls) else cls(**v) for v in values[key])
            except TypeError as exc:
                msg = f"bad {key} entry in {source}: {exc}"
                raise OptionError(msg, field=key, value=values[key]) from exc
    if "costs" in values and not isinstance(values["costs"], Costs):
        given = values["costs"]
        if not isinstance(given, dict):
            msg = f"costs in {source} must be a table of cost fields, got {given!r}"
            raise OptionError(msg, field="costs", value=given)
        known = {f.name for f in dataclasses.fields(Costs)}
        bad = sorted(set(given) - known)
        if bad:
            close = difflib.get_close_matches(bad[0], known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            msg = f"unknown cost field costs.{bad[0]} in {source}{hint} (fields: toolkit.target.Costs)"
            raise OptionError(msg, field=f"costs.{bad[0]}", value=given[bad[0]])
        values["costs"] = dataclasses.replace(target.costs, **given)
    if isinstance(values.get("code_regions"), list):
        values["code_regions"] = tuple(values["code_regions"])
    if "kernel_code_bytes" in values:
        kcb = values["kernel_code_bytes"]
        if isinstance(kcb, dict):
            values["kernel_code_bytes"] = tuple(kcb.items())
        elif isinstance(kcb, list) and all(isinstance(x, list | tuple) for x in kcb):
            values["kernel_code_bytes"] = tuple(map(tuple, kcb))
    return dataclasses.replace(target, **values)


def _fail(field_name: str, value: Any, why: str) -> None:
    msg = f"invalid target: {field_name}={value!r}: {why}"
    raise OptionError(msg, field=field_name, value=value)


def _validate(t: Target) -> None:
    _validate_types(t)
    for name in ("tiles", "workers", "exchange_bytes_per_cycle", "packet_max_words", "first_packet_max_words",
                 "word_bytes", "staging_window_bytes", "plan_row_words", "register_operands",
                 "instruction_element_bytes", "grid_columns"):
        value = getattr(t, name)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            _fail(name, value, "must be a positive integer")
    _validate_limits(t)
    if not (isinstance(t.clock_hz, int | float) and math.isfinite(t.clock_hz) and 1e3 <= t.clock_hz <= 1e12):
        _fail("clock_hz", t.clock_hz, "must be a clock frequency in Hz (from 1e3 to 1e12)")
    if t.memory_start < 0:
        _fail("memory_start", t.memory_start, "must be a non-negative address")
    if t.memory_end <= t.memory_start:
        _fail("memory_end", t.memory_end, f"must be above memory_start={t.memory_start:#x}")
    if not t.memory_start < t.load_limit <= t.memory_end:
        _fail("load_limit", t.load_limit, f"must lie in ({t.memory_start:#x}, {t.memory_end:#x}]")
    if t.first_packet_max_words > t.packet_max_words:
        _fail("first_packet_max_words", t.first_packet_max_words, f"exceeds packet_max_words={t.packet_max_words}")
    _validate_elements(t)
    if not t.memory_start <= t.staging_base <= t.memory_end - t.staging_window_bytes:
        _fail("staging_base", t.staging_base, f"the staging window ({t.staging_window_bytes} bytes from it) must "
                                              f"lie in memory {t.memory_start:#x}..{t.memory_end:#x}")
    if not t.amp:
        _fail("amp", [], "the AMP rate table is empty; give at least the f16 rate")
    if t.instruction_element_bytes % 16:
        _fail("instruction_element_bytes", t.instruction_element_bytes, "must be a multiple of 16")
    for rate in t.amp:
        if rate.macs_per_cycle <= 0 or rate.block_rows <= 0 or rate.block_cols <= 0:
            _fail("amp", rate, "AMP shapes and rates must be positive")
    for name, size in t.kernel_code_bytes:
        if size <= 0:
            _fail("kernel_code_bytes", (name, size), "code sizes must be positive")


def _validate_limits(t: Target) -> None:
    """Positive alignment and supervisor counts, and the size sanity limits (``LIMITS``)."""
    for name in ("supervisors", "ld128_align"):
        value = getattr(t, name)
        if value <= 0:
            _fail(name, value, "must be a positive integer")
    if t.ld128_align & (t.ld128_align - 1):
        _fail("ld128_align", t.ld128_align, "must be a power of two (an alignment in bytes)")
    for name, most in LIMITS.items():
        value = getattr(t, name)
        size = len(value) if isinstance(value, tuple) else value
        if size > most:
            what = "entries" if isinstance(value, tuple) else ""
            _fail(name, size if isinstance(value, tuple) else value,
                  f"is above the limit of {most:,}{' ' + what if what else ''} (README: Limits)")


def _validate_types(t: Target) -> None:
    """Every field and every element and AMP entry against its declared type (toolkit.fields)."""
    check_fields(t, "invalid target:", skip=("memory_elements", "amp", "costs"))
    if not isinstance(t.costs, Costs):
        _fail("costs", t.costs, "must be a Costs (or, in a file or replace(), a table of cost fields)")
    for key, cls in _NESTED.items():
        if not isinstance(getattr(t, key), tuple | list):
            _fail(key, getattr(t, key), f"must be a list of {cls.__name__} entries")
        for i, entry in enumerate(getattr(t, key)):
            if not isinstance(entry, cls):
                _fail(key, entry, f"entry {i} must be a {cls.__name__} ({', '.join(cls.__slots__)})")
            check_fields(entry, f"invalid target: {key}[{i}]", field_prefix=f"{key}[{i}].")


def _validate_elements(t: Target) -> None:
    """The element table covers memory exactly, without overlaps or gaps; code regions exist."""
    els = sorted(t.memory_elements, key=lambda e: e.offset)
    if not els:
        _fail("memory_elements", (), "the element table is empty")
    for e in els:
        if e.size <= 0:
            _fail("memory_elements", e, "element size must be positive")
    for a, b in itertools.pairwise(els):
        if a.offset + a.size > b.offset:
            _fail("memory_elements", b, f"overlaps the element at {a.offset:#x} (size {a.size})")
        if a.offset + a.size < b.offset:
            _fail("memory_elements", b, f"leaves a gap after the element at {a.offset:#x}")
    if els[0].offset != t.memory_start or els[-1].offset + els[-1].size != t.memory_end:
        total = sum(e.size for e in els)
        _fail("memory_elements", f"{len(els)} elements, {total} bytes",
              f"must cover {t.memory_start:#x}..{t.memory_end:#x} ({t.memory_bytes} bytes) exactly")
    regions = {e.region for e in els}
    for r in t.code_regions:
        if r not in regions:
            _fail("code_regions", t.code_regions, f"region {r} has no elements")
