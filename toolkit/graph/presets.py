"""Workload presets (DESIGN section 6) and ``build_graph``.

A preset is a row of builder parameters with its source named. Besides the
shapes of DESIGN section 6, two presets are the graphs ``ipu-stack``'s
hardware benchmarks ran (``crates/ipu-tests/src/main.rs``, its
``--workload`` values), built by the same builders with graph switches:

- ``siglip-mlp-benchmark``: Dense-GeLU-Dense of the so400m MLP (729 tokens,
  1152 -> 4304 -> 1152) with no biases, no LayerNorm and no residual; its
  input ``left`` is an automatic host input, written by the host in fc1's
  operand layout; F16 GEMMs unless ``--fp8-scale`` (then F143 weights);
  ``--mlp-batch`` (default 4 there, 1 here: the plan sweeps of
  docs/MLP_LAYOUT_SWEEP.md run batch 1) and ``--mlp-blocks`` (one structured
  repeat) map to ``batch`` and ``blocks``. The seeds' workloads
  (seeds/joint-sram-placement.md: ``mlp-single-b1``, ``mlp-single-b4``,
  ``mlp-b2-n3``, ``mlp-small-repeat`` with 129 tokens, width 128, hidden 256
  on 64 tiles) are this benchmark at F143 scale -4, and their presets are
  exactly that graph.
- ``siglip-attention-benchmark``: projected attention, 16 heads of 72 over
  729 tokens (main.rs): Q, K and V projections of the host-placed input
  (``--fuse-qkv``: one QKV GEMM) with no biases and no LayerNorm, per-head
  scores, softmax and values; the output is the heads' concatenated values
  (no output projection, no residual: main.rs's graph ends at the attention
  product, and its check covers 839,808 = 729 x 1152 outputs,
  docs/ATTENTION_PRODUCT_LAYOUTS.md). The benchmark keeps its GEMMs F16
  (main.rs) unless ``--fp8-scale`` (docs/ATTENTION_AND_STATISTICS_2026_09_11.md
  and docs/FP8_ATTENTION_AND_HOST_IO_2026_09_11.md run projections at F143
  scale -4, FP16 attention products); ``--attention-batch`` maps to
  ``batch``. The seeds' ``attention-b1`` / ``attention-fused-b1`` presets are
  this benchmark at F143 scale -4 (separate / fused QKV).
- ``siglip-vit`` (``--workload siglip-vit-benchmark``: So400m/14 encoder
  layers with the image embedding and MAP pooling, main.rs) is built in
  ``toolkit.graph.vit``.

Our own encoder blocks, with the LayerNorm, biases, output projection and
residual of a real encoder layer, have names of their own: ``mlp-block-b1``,
``mlp-block-small-repeat``, ``attention-block-b1``, ``attention-block-fused-b1``
(before toolkit 0.2.0 they were the seeds' names: :data:`RENAMED`).

main.rs's other workloads have no preset: ``gemm-smoke`` /
``batched-gemm-smoke`` / ``gemm-benchmark`` (one F16 GEMM), ``mlp-smoke``
(GEMM-GeLU-GEMM-GeLU on 64-wide tiles), ``attention-smoke`` (4 heads of 17 x
19 tokens) and ``exchange-stress`` are kernel and exchange tests, not models.
Which figure ran which graph is data: ``toolkit/data/hardware_programs.csv``
(``toolkit.report.hardware_programs``).
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from typing import Any

import polars as pl

from toolkit.errors import ModelError
from toolkit.graph.builders import Products, attention_block, encoder_layer, mlp_block, repeat
from toolkit.graph.ir import DType, Graph
from toolkit.graph.vit import SO400M_IMAGE, SO400M_PATCH, vit_model
from toolkit.options import PRODUCT_CASTS, PRODUCT_DTYPES, WEIGHT_DTYPES
from toolkit.tables import WORKLOADS_SCHEMA, frame

KINDS = ("mlp", "attention", "encoder", "vit")
#: the graph switches of each workload kind (Workload fields whose non-default value changes the built graph);
#: a switch set on a kind that has no such op is refused by name
SWITCHES: dict[str, tuple[str, ...]] = {
    "mlp": ("biases", "layernorm", "residual", "host_layout"),
    "attention": ("biases", "layernorm", "residual", "projection", "host_layout"),
    "encoder": ("biases", "layernorm", "residual", "projection", "host_layout"),
    "vit": (),   # the hardware's whole model as it ran; its patches and probe are host-placed
}
_SWITCH_DEFAULTS = {"biases": True, "layernorm": True, "residual": True, "projection": True, "host_layout": False}


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
    biases: bool = True              # every linear adds a bias (False: no bias tensors)
    layernorm: bool = True           # each block normalizes its input first (False: its linears read it directly)
    residual: bool = True            # each block adds its input to its result (False: the result is the output)
    projection: bool = True          # attention's output projection (False: the concatenated heads are the output)
    host_layout: bool = False        # the host writes the input in its first consumer's operand layout (no gather)
    image: int | None = None         # vit: image side in pixels (None: 378, the So400m/14 384 model's usable region)
    patch: int | None = None         # vit: patch side in pixels (None: 14); tokens = (image / patch) ** 2
    qk_dtype: str = "f16"            # attention products' operands (toolkit.options.PRODUCT_DTYPES) and casts
    qk_cast: str = "late"
    pv_dtype: str = "f16"
    pv_cast: str = "late"
    description: str = ""


_SO400M = {"tokens": 729, "width": 1152, "hidden": 4304, "heads": 16, "head_dim": 72}
#: ipu-stack's benchmark graphs as the seeds' cases ran them (crates/ipu-tests/src/main.rs at --fp8-scale -4)
_HW_MLP = {"weight_dtype": "f8_143", "biases": False, "layernorm": False, "residual": False, "host_layout": True}
_HW_ATTENTION = {**_HW_MLP, "projection": False}
_BASE = {"tokens": 196, "width": 768, "hidden": 3072, "heads": 12, "head_dim": 64}

PRESETS: dict[str, Workload] = {w.name: w for w in (
    Workload(name="siglip-so400m", kind="encoder", **_SO400M, blocks=27,
             description="SigLIP so400m vision encoder: 27 encoder layers"),
    Workload(name="siglip-vit", kind="vit", **_SO400M, blocks=27,
             description="SigLIP so400m/14 vision model at 384: patch embedding, 27 encoder layers, MAP head "
                         "(ipu-stack's siglip-vit-benchmark, docs/SIGLIP_VIT_BENCHMARK.md)"),
    Workload(name="siglip-base", kind="encoder", **_BASE, blocks=12,
             description="SigLIP base vision encoder: 12 encoder layers"),
    # the seeds' case directories (seeds/joint-sram-placement.md) are ipu-stack's benchmark graphs at the
    # hardware's precision (F143 scale -4 weights): Dense-GeLU-Dense / projected attention, no biases, LayerNorm,
    # residual or output projection, the input written by the host in its first consumer's operand layout
    Workload(name="mlp-small-repeat", kind="mlp", tokens=129, width=128, hidden=256, blocks=3, compute_tiles=64,
             **_HW_MLP, description="the seeds' mlp-small-repeat: siglip-mlp-benchmark at 129 tokens, 128 -> 256 "
                                    "-> 128, 3 blocks as one repeat on 64 compute tiles, F143 weights"),
    Workload(name="mlp-single-b1", kind="mlp", **_SO400M, batch=1, **_HW_MLP,
             description="the seeds' mlp-single-b1: siglip-mlp-benchmark batch 1, F143 weights"),
    Workload(name="mlp-single-b4", kind="mlp", **_SO400M, batch=4, **_HW_MLP,
             description="the seeds' mlp-single-b4: siglip-mlp-benchmark batch 4, F143 weights"),
    Workload(name="mlp-b2-n3", kind="mlp", **_SO400M, batch=2, blocks=3, **_HW_MLP,
             description="the seeds' mlp-b2-n3: siglip-mlp-benchmark batch 2, 3 blocks as one repeat, F143 weights"),
    Workload(name="attention-b1", kind="attention", **_SO400M, search_qkv=False, **_HW_ATTENTION,
             description="the seeds' attention-b1: siglip-attention-benchmark batch 1, separate Q/K/V, F143 "
                         "projection weights, FP16 products"),
    Workload(name="attention-fused-b1", kind="attention", **_SO400M, fused_qkv=True, search_qkv=False,
             **_HW_ATTENTION, description="the seeds' attention-fused-b1: siglip-attention-benchmark batch 1, "
                                          "fused QKV (--fuse-qkv), F143 projection weights, FP16 products"),
    # our encoder blocks, with the LayerNorm, biases and residual of a real encoder layer (explicit names)
    Workload(name="mlp-block-b1", kind="mlp", **_SO400M,
             description="so400m encoder MLP block (LayerNorm, biases, residual), batch 1, F143 weights"),
    Workload(name="mlp-block-small-repeat", kind="mlp", tokens=129, width=128, hidden=256, blocks=3,
             compute_tiles=64, description="small encoder MLP block (LayerNorm, biases, residual) repeated 3 "
                                           "times on 64 compute tiles"),
    Workload(name="attention-block-b1", kind="attention", **_SO400M, search_qkv=False,
             description="so400m encoder attention block (LayerNorm, biases, output projection, residual), "
                         "separate QKV"),
    Workload(name="attention-block-fused-b1", kind="attention", **_SO400M, fused_qkv=True, search_qkv=False,
             description="so400m encoder attention block (LayerNorm, biases, output projection, residual), "
                         "fused QKV"),
    Workload(name="encoder-b8", kind="encoder", **_SO400M, batch=8,
             description="one so400m encoder layer, batch 8 (the audit's scale case)"),
    Workload(name="siglip-mlp-benchmark", kind="mlp", **_SO400M, weight_dtype="f16", biases=False,
             layernorm=False, residual=False, host_layout=True,
             description="ipu-stack's siglip-mlp-benchmark: so400m Dense-GeLU-Dense, no biases, LayerNorm or "
                         "residual, input placed by the host in fc1's operand layout, F16 GEMMs"),
    Workload(name="siglip-attention-benchmark", kind="attention", **_SO400M, search_qkv=False, weight_dtype="f16",
             biases=False,
             layernorm=False, residual=False, projection=False, host_layout=True,
             description="ipu-stack's siglip-attention-benchmark: so400m Q/K/V projections (no biases or "
                         "LayerNorm) and attention, no output projection or residual, input placed by the host, "
                         "F16 GEMMs"),
)}


#: preset names whose meaning changed, with the version that changed it and the name (and overrides) of what
#: they meant before: a case or sweep written before that version under the old name compiled the other graph
RENAMED: dict[str, tuple[str, str, dict[str, Any]]] = {
    "mlp-small-repeat": ("0.2.0", "mlp-block-small-repeat", {}),
    "mlp-single-b1": ("0.2.0", "mlp-block-b1", {}),
    "mlp-single-b4": ("0.2.0", "mlp-block-b1", {"batch": 4}),
    "mlp-b2-n3": ("0.2.0", "mlp-block-b1", {"batch": 2, "blocks": 3}),
    "attention-b1": ("0.2.0", "attention-block-b1", {}),
    "attention-fused-b1": ("0.2.0", "attention-block-fused-b1", {}),
}


def renamed_since(name: str, version: str) -> str | None:
    """Why a case of preset ``name`` written by toolkit ``version`` compiled another graph than the name means
    now (None when it did not): the name's former meaning and its new name."""
    if name not in RENAMED:
        return None
    changed, new, overrides = RENAMED[name]
    if _version(version) >= _version(changed):
        return None
    extra = "".join(f", {k}={v}" for k, v in overrides.items())
    return (f"workload {name!r} was our encoder block (LayerNorm, biases, residual) before toolkit {changed}; that "
            f"graph is now {new!r}{extra}, and {name!r} is the hardware's graph")


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for p in str(text).split(".")[:3]:
        digits = "".join(ch for ch in p if ch in "0123456789")
        parts.append(int(digits[:9]) if digits else 0)
    return tuple(parts)


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
    switches = _switches(w)
    products = _products(w)
    if w.kind == "mlp":
        if w.hidden is None:
            raise ModelError(f"workload {w.name!r} (mlp) needs hidden", field="hidden", value=None)
        g = mlp_block(tokens=w.tokens, width=w.width, hidden=w.hidden, batch=w.batch, weight_dtype=wd,
                      early_casts=w.early_casts, **switches)
    elif w.kind == "attention":
        g = attention_block(tokens=w.tokens, width=w.width, heads=_need(w, "heads"), batch=w.batch,
                            fused_qkv=w.fused_qkv, head_dim=w.head_dim, weight_dtype=wd, early_casts=w.early_casts,
                            products=products, **switches)
    elif w.kind == "vit":   # the whole model: its encoder layers are its own repeated region
        g = vit_model(width=w.width, hidden=_need(w, "hidden"), heads=_need(w, "heads"), batch=w.batch,
                      blocks=w.blocks, head_dim=w.head_dim, fused_qkv=w.fused_qkv, weight_dtype=wd,
                      early_casts=w.early_casts, image=w.image or SO400M_IMAGE, patch=w.patch or SO400M_PATCH,
                      products=products)
        if g.params["tokens"] != w.tokens:
            msg = f"tokens={w.tokens} disagrees with the {g.params['tokens']} patches of workload {w.name!r}"
            raise ModelError(msg, field="tokens", value=w.tokens)
    else:
        g = encoder_layer(tokens=w.tokens, width=w.width, hidden=_need(w, "hidden"), heads=_need(w, "heads"),
                          batch=w.batch, fused_qkv=w.fused_qkv, head_dim=w.head_dim, weight_dtype=wd,
                          early_casts=w.early_casts, products=products, **switches)
    if not isinstance(w.blocks, int) or isinstance(w.blocks, bool) or w.blocks <= 0:
        msg = f"blocks={w.blocks!r} must be a positive integer"
        raise ModelError(msg, field="blocks", value=w.blocks)
    if w.blocks > 1 and not g.repeats.height:
        g = repeat(g, w.blocks, name="layer" if w.kind == "encoder" else "block")
    params = {**dataclasses.asdict(w), **g.params}
    return Graph(name=w.name, ops=g.ops, tensors=g.tensors, repeats=g.repeats, params=params)


def _switches(w: Workload) -> dict[str, bool]:
    """The graph switches of ``w``'s kind, each a boolean; a switch set on a kind without that op is refused."""
    own = SWITCHES.get(w.kind, ())
    for name, default in _SWITCH_DEFAULTS.items():
        value = getattr(w, name)
        if not isinstance(value, bool):
            msg = f"{name}={value!r} must be true or false (workload {w.name!r})"
            raise ModelError(msg, field=name, value=value)
        if value != default and name not in own:
            msg = (f"{name}={value!r} makes no sense for workload {w.name!r} of kind {w.kind!r}: it has no such op "
                   f"(its switches: {', '.join(own) or 'none'})")
            raise ModelError(msg, field=name, value=value)
    return {name: getattr(w, name) for name in own}


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
