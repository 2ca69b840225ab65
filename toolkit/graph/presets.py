"""Workload presets (DESIGN section 6) and ``build_graph``."""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from typing import Any

import polars as pl

from toolkit.errors import ModelError
from toolkit.graph.builders import Products, attention_block, encoder_layer, mlp_block, repeat
from toolkit.graph.ir import DType, Graph
from toolkit.options import PRODUCT_CASTS, PRODUCT_DTYPES, WEIGHT_DTYPES
from toolkit.tables import WORKLOADS_SCHEMA, frame

KINDS = ("mlp", "attention", "encoder")


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """A named model shape: what to build and how many times it repeats."""

    name: str
    kind: str
    tokens: int
    width: int
    hidden: int | None = None
    heads: int | None = None
    head_dim: int | None = None
    batch: int = 1
    blocks: int = 1
    fused_qkv: bool = False
    search_qkv: bool = True          # may the layout search try the other QKV form?
    compute_tiles: int | None = None
    weight_dtype: str = "f8_143"     # matmul weights: f8_143 / f8_152 (the FP8 AMP) or f16
    early_casts: bool = True         # FP8 matmul inputs cast at their producers (LayerNorm, GELU), not per consumer
    qk_dtype: str = "f16"            # attention products' operands (toolkit.options.PRODUCT_DTYPES) and casts
    qk_cast: str = "late"
    pv_dtype: str = "f16"
    pv_cast: str = "late"
    description: str = ""


_SO400M = {"tokens": 729, "width": 1152, "hidden": 4304, "heads": 16, "head_dim": 72}
_BASE = {"tokens": 196, "width": 768, "hidden": 3072, "heads": 12, "head_dim": 64}

PRESETS: dict[str, Workload] = {w.name: w for w in (
    Workload(name="siglip-so400m", kind="encoder", **_SO400M, blocks=27,
             description="SigLIP so400m vision encoder: 27 encoder layers"),
    Workload(name="siglip-base", kind="encoder", **_BASE, blocks=12,
             description="SigLIP base vision encoder: 12 encoder layers"),
    Workload(name="mlp-small-repeat", kind="mlp", tokens=129, width=128, hidden=256, blocks=3, compute_tiles=64,
             description="small MLP repeated 3 times on 64 compute tiles"),
    Workload(name="mlp-single-b1", kind="mlp", **_SO400M, batch=1, description="so400m MLP block, batch 1"),
    Workload(name="mlp-single-b4", kind="mlp", **_SO400M, batch=4, description="so400m MLP block, batch 4"),
    Workload(name="attention-b1", kind="attention", **_SO400M, search_qkv=False,
             description="so400m attention, separate QKV"),
    Workload(name="attention-fused-b1", kind="attention", **_SO400M, fused_qkv=True, search_qkv=False,
             description="so400m attention, fused QKV"),
    Workload(name="mlp-b2-n3", kind="mlp", **_SO400M, batch=2, blocks=3, description="so400m MLP, batch 2, 3 blocks"),
    Workload(name="encoder-b8", kind="encoder", **_SO400M, batch=8,
             description="one so400m encoder layer, batch 8 (the audit's scale case)"),
)}


def workloads() -> pl.DataFrame:
    """Every preset as one row (WORKLOADS_SCHEMA)."""
    rows = [dataclasses.asdict(w) for w in PRESETS.values()]
    return frame({k: [r[k] for r in rows] for k in WORKLOADS_SCHEMA}, WORKLOADS_SCHEMA, what="workloads")


def get_workload(name: str, **overrides: Any) -> Workload:
    """A preset by name with fields overridden (``batch=4``, ``blocks=27``); ``None`` values are ignored."""
    if not isinstance(name, str) or name not in PRESETS:
        close = difflib.get_close_matches(str(name), PRESETS, n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else f"; known: {', '.join(PRESETS)}"
        msg = f"unknown workload {name!r}{hint}"
        raise ModelError(msg, field="workload", value=name)
    fields = {f.name for f in dataclasses.fields(Workload)}
    given = {k: v for k, v in overrides.items() if v is not None}
    unknown = sorted(set(given) - fields)
    if unknown:
        msg = f"unknown workload field {unknown[0]!r}={given[unknown[0]]!r}; known: {sorted(fields)}"
        raise ModelError(msg, field=unknown[0], value=given[unknown[0]])
    return dataclasses.replace(PRESETS[name], **given)


def build_graph(workload: str | Workload, *, batch: int | None = None, blocks: int | None = None,
                **overrides: Any) -> Graph:
    """Build the graph of a preset (by name) or a :class:`Workload`.

    ``batch`` and ``blocks`` override the preset; ``blocks > 1`` yields one
    symbolic block with a repeat table, never ``blocks`` copies.
    """
    w = get_workload(workload, batch=batch, blocks=blocks, **overrides) if isinstance(workload, str) else (
        dataclasses.replace(workload, **{k: v for k, v in {"batch": batch, "blocks": blocks, **overrides}.items()
                                          if v is not None}))
    if w.kind not in KINDS:
        msg = f"workload {w.name!r} has kind={w.kind!r}; expected one of {KINDS}"
        raise ModelError(msg, field="kind", value=w.kind)
    if w.compute_tiles is not None and (not isinstance(w.compute_tiles, int) or w.compute_tiles <= 0):
        msg = f"compute_tiles={w.compute_tiles!r} must be a positive integer (or None for every tile)"
        raise ModelError(msg, field="compute_tiles", value=w.compute_tiles)
    if w.weight_dtype not in WEIGHT_DTYPES:
        msg = f"weight_dtype={w.weight_dtype!r} is not a matmul weight format; use one of {WEIGHT_DTYPES}"
        raise ModelError(msg, field="weight_dtype", value=w.weight_dtype)
    wd = DType(w.weight_dtype)
    products = _products(w)
    if w.kind == "mlp":
        if w.hidden is None:
            raise ModelError(f"workload {w.name!r} (mlp) needs hidden", field="hidden", value=None)
        g = mlp_block(tokens=w.tokens, width=w.width, hidden=w.hidden, batch=w.batch, weight_dtype=wd,
                      early_casts=w.early_casts)
    elif w.kind == "attention":
        g = attention_block(tokens=w.tokens, width=w.width, heads=_need(w, "heads"), batch=w.batch,
                            fused_qkv=w.fused_qkv, head_dim=w.head_dim, weight_dtype=wd, early_casts=w.early_casts,
                            products=products)
    else:
        g = encoder_layer(tokens=w.tokens, width=w.width, hidden=_need(w, "hidden"), heads=_need(w, "heads"),
                          batch=w.batch, fused_qkv=w.fused_qkv, head_dim=w.head_dim, weight_dtype=wd,
                          early_casts=w.early_casts, products=products)
    if not isinstance(w.blocks, int) or isinstance(w.blocks, bool) or w.blocks <= 0:
        msg = f"blocks={w.blocks!r} must be a positive integer"
        raise ModelError(msg, field="blocks", value=w.blocks)
    if w.blocks > 1:
        g = repeat(g, w.blocks, name="layer" if w.kind == "encoder" else "block")
    params = {**dataclasses.asdict(w), **g.params}
    return Graph(name=w.name, ops=g.ops, tensors=g.tensors, repeats=g.repeats, params=params)


def _products(w: Workload) -> Products:
    """The attention products' precision and cast placement of ``w``, each refused by name when unknown."""
    for name, legal in (("qk_dtype", PRODUCT_DTYPES), ("qk_cast", PRODUCT_CASTS), ("pv_dtype", PRODUCT_DTYPES),
                        ("pv_cast", PRODUCT_CASTS)):
        if getattr(w, name) not in legal:
            msg = f"{name}={getattr(w, name)!r} is not legal for the attention products; use one of {legal}"
            raise ModelError(msg, field=name, value=getattr(w, name))
    return Products(qk_dtype=w.qk_dtype, qk_cast=w.qk_cast, pv_dtype=w.pv_dtype, pv_cast=w.pv_cast)


def _need(w: Workload, field_name: str) -> int:
    value = getattr(w, field_name)
    if value is None:
        msg = f"workload {w.name!r} ({w.kind}) needs {field_name}"
        raise ModelError(msg, field=field_name, value=None)
    return value
