"""Compile options: one frozen value read by every stage (each reads its own fields).

``as_options`` accepts an :class:`Options`, a plain mapping of option names
(``{"row_block": 18}``) or ``None``; unknown names are rejected by name.
Layout fields left at ``None`` are searched; a value pins the parameter.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolkit.errors import OptionError
from toolkit.fields import check_fields
from toolkit.target import KERNEL_BUILDS

MAX_SEARCH_VALUES = 64   # distinct values of row_blocks or inner_splits a search may be given
ROW_BLOCKS = (8, 12, 16, 18, 24, 32, 36, 48, 64, 72, 96, 128)
WEIGHT_CLASSES = ("interleaved", "standard")
WEIGHT_DTYPES = ("f8_143", "f8_152", "f16")
PARTIALS = ("f16", "f32")
#: how swapped Q / K projection results are unpacked for the scores (layout.plans.qk_preparation): each in its own
#: projection's phase, or both in one phase on disjoint owners (the hardware's current grouping)
QK_PREPARATIONS = ("grouped", "separate")
#: which attention products run on a grid of their own (ipu-stack's --attention-products words): none (both on the
#: shared query rows), the scores only, the values only, or both; None searches shared rows and both-on-grids
ATTENTION_PRODUCTS = ("shared-rows", "qk-only", "pv-only", "independent")
STREAM_WEIGHTS = ("resident", "gathered")   # how LayerNorm parameters are kept (see LayoutParams.stream_weights)
#: operand precision of the attention products QK (scores) and PV (values): FP16, or F143 on the FP8 AMP
PRODUCT_DTYPES = ("f16", "f8_143")
#: where an FP8 product's operands are cast: at the producer (the Q/K projection or the softmax stores F143) or
#: at the consumer (the product casts the FP16 panel it received); ipu-stack docs/FP8_QK_FULL_MODEL_2026_09_13.md
PRODUCT_CASTS = ("early", "late")
#: how attention is computed: the whole scores matrix, softmax, values (materialized), or FlashAttention-style over
#: key blocks with a running max and sum in F32 state (streaming; ipu-stack's --attention-strategy flash)
ATTENTION_FORMS = ("materialized", "streaming")
#: the AMP's 16-column panel: a key block of the streaming form is a whole number of them
KEY_BLOCK_QUANTUM = 16


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """Every stage's options. Layout parameters: ``None`` searches, a value pins."""

    row_block: int | None = None
    stream_block: int | None = None
    row_shard: int | None = None
    panel_groups: int | None = None
    inner_split: int | None = None
    inner_block: int | None = None
    weight_class: str | None = None
    fused_qkv: bool | None = None
    row_blocks: tuple[int, ...] = ROW_BLOCKS   # the row-block grid searched when row_block is not pinned
    inner_splits: tuple[int, ...] = (1, 2, 4, 8, 16, 20)  # 20: 72 groups of a 1152-wide op fill 1440 tiles
    beam_width: int = 4
    tiles: int | None = None                   # compute tiles (None: the workload's limit or all tiles)
    placement_time_limit: float = 2.0          # wall-clock safety cap (seconds) of the exact placement search per
                                               # distinct failing tile; its node budgets decide, so results do not
                                               # depend on the machine's load
    plans: tuple[tuple[str, str], ...] = ()    # per-op GEMM plan pins {"fc1": "4x92x4", "fc2": "4x24x15/16x24"}
    # planned tile -> execution tile: a name (layout.mapping.MAPPINGS, e.g. "block-92-2") or a list of tiles
    tile_mapping: str | tuple[int, ...] | None = None   # (None: the identity)
    plan_search: bool = True                   # search per-op GEMM plans (off, or any global linear knob pinned:
                                               # every unpinned linear op follows the global grid)
    weight_dtype: str | None = None            # matmul weights: f8_143 | f8_152 | f16 (None: the preset's own)
    early_casts: bool | None = None            # FP8 matmul inputs cast at the producers (None: the preset's own)
    qk_dtype: str = "f16"                      # attention scores product Q K^T: f16 | f8_143 (F143 at the check's
    qk_cast: str = "late"                      # scale, FP16 sums); its casts: early (Q/K stored F143) | late
    pv_dtype: str = "f16"                      # attention values product P V: f16 | f8_143
    pv_cast: str = "late"                      # early (softmax and V store F143) | late (the product casts)
    partials: str = "f16"                      # inner-split partials: f16 (the hardware's) | f32
    qk_preparation: str = "grouped"            # QK_PREPARATIONS: swapped Q / K unpacks grouped | separate
    attention_products: str | None = None      # ATTENTION_PRODUCTS: the products on grids (None: searched)
    attention: str = "materialized"            # ATTENTION_FORMS: materialized | streaming (key blocks, F32 state)
    key_block: int = 64                        # keys per streaming block (a positive multiple of 16; ipu-stack: 64)
    kernel_build: str = "current"              # target.KERNEL_BUILDS: whose kernel costs (an older ipu-stack cohort)
    stream_weights: str | None = None          # LayerNorm parameters: resident | gathered (None: searched where
                                               # the graph repeats, resident otherwise)
    simulate: bool = True                      # attach a simulated cycle profile
    check: bool = False                        # run the functional check (slower)
    seed: int = 0

    def __post_init__(self) -> None:
        _check_types(self)
        for name in ("row_block", "stream_block", "row_shard", "panel_groups", "inner_split", "inner_block", "tiles"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
                msg = f"option {name}={v!r} must be a positive integer (or None to search it)"
                raise OptionError(msg, field=name, value=v)
        if self.inner_block is not None and self.inner_block % 16:
            msg = f"option inner_block={self.inner_block} is not a multiple of the 16-deep AMP block; use 16, 32, ..."
            raise OptionError(msg, field="inner_block", value=self.inner_block)
        if self.weight_class is not None and self.weight_class not in WEIGHT_CLASSES:
            msg = f"option weight_class={self.weight_class!r} must be one of {WEIGHT_CLASSES}"
            raise OptionError(msg, field="weight_class", value=self.weight_class)
        self._check_plans()
        if self.weight_dtype is not None and self.weight_dtype not in WEIGHT_DTYPES:
            msg = f"option weight_dtype={self.weight_dtype!r} must be one of {WEIGHT_DTYPES} (or None: the preset's)"
            raise OptionError(msg, field="weight_dtype", value=self.weight_dtype)
        if self.early_casts is not None and not isinstance(self.early_casts, bool):
            msg = f"option early_casts={self.early_casts!r} must be true, false or None (the preset's own)"
            raise OptionError(msg, field="early_casts", value=self.early_casts)
        self._check_products()
        if self.partials not in PARTIALS:
            msg = f"option partials={self.partials!r} must be one of {PARTIALS} (FP16 is what the hardware writes)"
            raise OptionError(msg, field="partials", value=self.partials)
        self._check_attention()
        self._check_streaming()
        if self.stream_weights is not None and self.stream_weights not in STREAM_WEIGHTS:
            msg = (f"option stream_weights={self.stream_weights!r} must be one of {STREAM_WEIGHTS} "
                   f"(or None to search it)")
            raise OptionError(msg, field="stream_weights", value=self.stream_weights)
        if self.fused_qkv is not None and not isinstance(self.fused_qkv, bool):
            msg = f"option fused_qkv={self.fused_qkv!r} must be true, false or None"
            raise OptionError(msg, field="fused_qkv", value=self.fused_qkv)
        for name in ("row_blocks", "inner_splits"):
            v = tuple(getattr(self, name))
            if not v or any(not isinstance(x, int) or isinstance(x, bool) or x <= 0 for x in v):
                msg = f"option {name}={v if len(v) <= 20 else v[:20]!r} must be a non-empty tuple of positive integers"
                raise OptionError(msg, field=name, value=v)
            distinct = tuple(dict.fromkeys(v))   # a repeated value is searched once
            if len(distinct) > MAX_SEARCH_VALUES:   # every value multiplies the search (2,000 ran 109 s)
                msg = (f"option {name} lists {len(distinct):,} distinct values; at most {MAX_SEARCH_VALUES} are "
                       f"searched (each one multiplies the search): give fewer, or pin one")
                raise OptionError(msg, field=name, value=len(distinct))
            object.__setattr__(self, name, distinct)
        if not isinstance(self.beam_width, int) or self.beam_width <= 0:
            msg = f"option beam_width={self.beam_width!r} must be a positive integer"
            raise OptionError(msg, field="beam_width", value=self.beam_width)
        if not self.placement_time_limit > 0:
            msg = f"option placement_time_limit={self.placement_time_limit!r} must be positive seconds"
            raise OptionError(msg, field="placement_time_limit", value=self.placement_time_limit)

    def _check_attention(self) -> None:
        if self.kernel_build not in KERNEL_BUILDS:
            msg = (f"option kernel_build={self.kernel_build!r} must be one of {tuple(KERNEL_BUILDS)} (the kernel "
                   f"costs of ipu-stack's current build or of an older measured cohort)")
            raise OptionError(msg, field="kernel_build", value=self.kernel_build)
        if self.qk_preparation not in QK_PREPARATIONS:
            msg = (f"option qk_preparation={self.qk_preparation!r} must be one of {QK_PREPARATIONS}: swapped Q and K "
                   f"results unpacked in one phase on disjoint owners, or each in its own projection's phase")
            raise OptionError(msg, field="qk_preparation", value=self.qk_preparation)
        if self.attention_products is not None and self.attention_products not in ATTENTION_PRODUCTS:
            msg = (f"option attention_products={self.attention_products!r} must be one of {ATTENTION_PRODUCTS} "
                   f"(ipu-stack's --attention-products: which of the scores and values products run on a grid of "
                   f"their own), or None to search")
            raise OptionError(msg, field="attention_products", value=self.attention_products)

    def _check_streaming(self) -> None:
        if self.attention not in ATTENTION_FORMS:
            msg = (f"option attention={self.attention!r} must be one of {ATTENTION_FORMS}: the whole scores matrix, "
                   f"or key blocks with a running max and sum (FlashAttention)")
            raise OptionError(msg, field="attention", value=self.attention)
        kb = self.key_block
        if isinstance(kb, bool) or not isinstance(kb, int) or kb <= 0 or kb % KEY_BLOCK_QUANTUM:
            msg = (f"option key_block={kb!r} must be a positive multiple of {KEY_BLOCK_QUANTUM} keys (the AMP's "
                   f"16-column panel), e.g. 64 (ipu-stack's streaming block)")
            raise OptionError(msg, field="key_block", value=kb)
        fp8 = next((f"{x}_dtype" for x in ("qk", "pv") if getattr(self, f"{x}_dtype") != "f16"), None)
        if self.attention == "streaming" and fp8 is not None:
            msg = (f"option {fp8}={getattr(self, fp8)!r} runs an attention product on the FP8 AMP, but "
                   f"attention='streaming' runs both products FP16 (ipu-stack's flash stages take FP16 inputs); "
                   f"leave {fp8}='f16' or use attention='materialized'")
            raise OptionError(msg, field=fp8, value=getattr(self, fp8))
        if self.attention == "streaming" and self.attention_products not in (None, "shared-rows"):
            msg = (f"option attention_products={self.attention_products!r} puts attention products on grids of "
                   f"their own, but attention='streaming' streams every key block to the query-row owners "
                   f"(shared rows); use attention_products=None or 'shared-rows', or attention='materialized'")
            raise OptionError(msg, field="attention_products", value=self.attention_products)

    def _check_products(self) -> None:
        for product, what in (("qk", "scores (Q K^T)"), ("pv", "values (P V)")):
            dtype, cast = getattr(self, f"{product}_dtype"), getattr(self, f"{product}_cast")
            if dtype not in PRODUCT_DTYPES:
                msg = (f"option {product}_dtype={dtype!r} is not an operand precision of the attention {what} "
                       f"product; use one of {PRODUCT_DTYPES}")
                raise OptionError(msg, field=f"{product}_dtype", value=dtype)
            if cast not in PRODUCT_CASTS:
                msg = (f"option {product}_cast={cast!r} must be one of {PRODUCT_CASTS}: early casts at the producer, "
                       f"late in the product")
                raise OptionError(msg, field=f"{product}_cast", value=cast)
            if dtype == "f16" and cast == "early":
                msg = (f"option {product}_cast='early' places the F143 cast of an FP8 {what} product, but "
                       f"{product}_dtype='f16'; set {product}_dtype='f8_143' or leave {product}_cast at 'late'")
                raise OptionError(msg, field=f"{product}_cast", value=cast)

    def _check_plans(self) -> None:
        plans = self.plans
        if isinstance(plans, Mapping):
            plans = tuple(plans.items())
        elif isinstance(plans, str):   # the CLI's one value: entries split at ';' (and ',' by the CLI's parser)
            plans = tuple(p for p in plans.split(";") if p.strip())
        if isinstance(plans, tuple | list):
            plans = tuple(_plan_entry(p) if isinstance(p, str) else p for p in plans)
        if not isinstance(plans, tuple | list) or not all(
                isinstance(p, tuple | list) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], str)
                for p in plans):
            msg = (f"option plans={self.plans!r} must map op names to plan strings, e.g. "
                   f"{{'fc1': '4x92x4', 'fc2': '4x24x15'}}, or list ipu-stack constraint lines "
                   f"['0:4x92x4:4x1:48:interleaved:normal:complete:direct'] or 'fc1=4x92x4' entries")
            raise OptionError(msg, field="plans", value=self.plans)
        object.__setattr__(self, "plans", tuple(sorted((str(k), str(v).strip()) for k, v in plans)))
        if not isinstance(self.plan_search, bool):
            msg = f"option plan_search={self.plan_search!r} must be true or false"
            raise OptionError(msg, field="plan_search", value=self.plan_search)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: the key a plans entry has when it is an ipu-stack constraint line (``OP:RxCxK:...``, op named by number)
CONSTRAINT_KEY = "#"


def _plan_entry(text: str) -> tuple[str, str] | str:
    """One listed plans entry: ``fc1=4x92x4`` (an op name and our label) or an ipu-stack constraint line."""
    if ":" in text:
        return (CONSTRAINT_KEY, text.strip())
    if "=" in text:
        key, plan = text.split("=", 1)
        return (key.strip(), plan.strip())
    return text


def _check_types(o: Options) -> None:
    """Every field against its declared type, before any value is used (the annotations are the one owner)."""
    check_fields(o, "option", skip=("plans",))   # plans have their own parser
    if o.seed < 0:
        msg = f"option seed={o.seed!r} must be a non-negative integer"
        raise OptionError(msg, field="seed", value=o.seed)


def as_options(options: Options | Mapping[str, Any] | None) -> Options:
    if options is None:
        return Options()
    if isinstance(options, Options):
        return options
    if not isinstance(options, Mapping):
        msg = f"options must be an Options value or a mapping of option names, got {type(options).__name__}"
        raise OptionError(msg, field="options", value=options)
    names = [f.name for f in dataclasses.fields(Options)]
    for key in options:
        if key not in names:
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known options: {', '.join(names)}"
            msg = f"unknown option {key!r}{hint}"
            raise OptionError(msg, field=str(key), value=options[key])
    values = {k: (tuple(v) if k in ("row_blocks", "inner_splits", "tile_mapping") and isinstance(v, tuple | list)
                  else v)
              for k, v in options.items()}
    return Options(**values)
