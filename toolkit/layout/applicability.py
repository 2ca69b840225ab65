"""What every option and graph switch acts on, checked against the built graph before the layout search.

One table per source of settings: :data:`OPTIONS` has a row for every field of
:class:`toolkit.options.Options`, :data:`SWITCHES` one for every field of
:class:`toolkit.graph.Workload` (shape fields are marked as shapes: they size
the graph rather than switch a feature). A row names the graph features the
setting acts on (:class:`Feature`, read off the graph's ops, tensors, repeats
and params by :func:`graph_features`) and, where a legal value can still
change nothing because of another setting, a rule that says why.

:func:`check_applicability` reads every non-default setting against the
graph: a setting whose features the graph lacks is refused by name
(:class:`~toolkit.errors.OptionError` for an option,
:class:`~toolkit.errors.ModelError` for a workload switch: ``option
qk_dtype='f8_143' changes nothing: workload 'mlp-single-b1' has no attention
...``); a legal setting that another one makes idle is warned of
(:class:`~toolkit.errors.NoEffectWarning`). Plan pins (option ``plans``) are
matched to op names by :func:`toolkit.layout.pins.resolve_pins`, which
refuses pins that match no op, match ops of different shapes or pin one op
twice.

A new option or switch needs a row here (``tests/test_applicability.py``
fails without one).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from toolkit.errors import ModelError, NoEffectWarning, OptionError
from toolkit.graph import Graph, Workload
from toolkit.options import Options


class Feature(StrEnum):
    """A graph feature a setting acts on; its value is how a message names its absence (``has no attention``)."""

    MATMUL = "matmuls"
    LINEAR = "linear ops (matmuls with weights)"
    ATTENTION = "attention"
    FP8_WEIGHTS = "FP8 matmul weights"
    CAST_PRODUCER = "producer (LayerNorm or GELU) feeding an FP8 matmul whose cast could move to it"
    LAYERNORM = "LayerNorm (whose parameters stream_weights keeps)"
    STREAM = "residual-stream ops (LayerNorm or a residual / position add) whose rows stream_block sets"
    FP8_SCORES = "FP8 scores product (qk_dtype='f8_143')"
    FP8_VALUES = "FP8 values product (pv_dtype='f8_143')"
    PATCHES = "patch embedding (a vit workload)"


#: why a legal setting changes nothing given the others (``None``: it acts); called with the setting's value,
#: the options, the graph's params and its features
Idle = Callable[[Any, Options, Mapping[str, Any], frozenset[Feature]], str | None]


@dataclass(frozen=True, slots=True)
class Applies:
    """One setting's row: the features it needs (every one, else it is refused), what it sets, when it idles."""

    what: str
    needs: tuple[Feature, ...] = ()
    idle: Idle | None = None
    shape: bool = False      # a workload shape field (sizes the graph; not a switch, not checked)


def _pinned(knob: str, grid: str) -> Idle:
    return lambda v, o, p, f: (f"{knob}={getattr(o, knob)!r} is pinned, so the {grid} grid is not searched"
                               if getattr(o, knob) is not None else None)


def _plan_search_idle(v: Any, o: Options, p: Mapping[str, Any], f: frozenset[Feature]) -> str | None:
    knobs = [k for k in ("row_shard", "inner_split", "panel_groups") if getattr(o, k) is not None]
    return f"pinning {knobs[0]} already puts every linear op on the global grid" if knobs else None


def _partials_idle(v: Any, o: Options, p: Mapping[str, Any], f: frozenset[Feature]) -> str | None:
    if o.inner_split == 1 and Feature.ATTENTION not in f:
        return "inner_split=1 is pinned and there is no attention values product: no op sums partials"
    return None


def _stream_weights_idle(v: Any, o: Options, p: Mapping[str, Any], f: frozenset[Feature]) -> str | None:
    repeated = int(p.get("blocks", 1) or 1) > 1
    return "a graph that does not repeat keeps its LayerNorm parameters resident anyway" if (
        v == "resident" and not repeated) else None


def _fused_option_idle(v: Any, o: Options, p: Mapping[str, Any], f: frozenset[Feature]) -> str | None:
    if not p.get("search_qkv", True) and bool(p.get("fused_qkv", False)) == v:
        return (f"the workload's QKV form is already {'fused' if v else 'separate'} and not searched "
                f"(search_qkv=False)")
    return None


def _seed_idle(v: Any, o: Options, p: Mapping[str, Any], f: frozenset[Feature]) -> str | None:
    return "the seed draws the functional check's inputs, and check=False" if not o.check else None


def _fused_switch_idle(v: Any, o: Options, p: Mapping[str, Any], f: frozenset[Feature]) -> str | None:
    if p.get("search_qkv", True) and o.fused_qkv is None:
        return ("the layout search tries both QKV forms of this workload (search_qkv=True), so the form it is "
                "built in is only where the search starts; pin option fused_qkv, or build it with search_qkv=False")
    return None


#: every option of :class:`toolkit.options.Options`: what it sets and the graph features it needs
OPTIONS: dict[str, Applies] = {
    "row_block": Applies("the matmuls' row block", (Feature.MATMUL,)),
    "stream_block": Applies("the residual stream's rows per home tile", (Feature.STREAM,)),
    "row_shard": Applies("the linear ops' global row shard", (Feature.LINEAR,)),
    "panel_groups": Applies("the linear ops' column panel groups", (Feature.LINEAR,)),
    "inner_split": Applies("the linear ops' inner split", (Feature.LINEAR,)),
    "inner_block": Applies("the linear ops' inner block", (Feature.LINEAR,)),
    "weight_class": Applies("the memory class of the linear weights", (Feature.LINEAR,)),
    "fused_qkv": Applies("the attention's QKV form", (Feature.ATTENTION,), _fused_option_idle),
    "row_blocks": Applies("the row-block grid searched", (Feature.MATMUL,), _pinned("row_block", "row_blocks")),
    "inner_splits": Applies("the inner-split grid searched", (Feature.LINEAR,),
                            _pinned("inner_split", "inner_splits")),
    "beam_width": Applies("the search's beam"),
    "tiles": Applies("the compute tiles", (), lambda v, o, p, f: (
        f"it is workload {p.get('name')!r}'s own compute_tiles" if v == p.get("compute_tiles") else None)),
    "placement_time_limit": Applies("the exact placement's time cap"),
    "plans": Applies("per-op GEMM plans (matched to op names by layout.pins.resolve_pins)",
                     (Feature.MATMUL,)),
    "tile_mapping": Applies("planned tile -> execution tile", (), lambda v, o, p, f: (
        "the identity mapping is what None does" if v == "identity" else None)),
    "plan_search": Applies("the per-op GEMM plan search", (Feature.LINEAR,), _plan_search_idle),
    "weight_dtype": Applies("the matmul weights' format", (Feature.LINEAR,)),
    "early_casts": Applies("where FP8 matmul inputs are cast", (Feature.FP8_WEIGHTS, Feature.CAST_PRODUCER)),
    "qk_dtype": Applies("the operand precision of the attention scores product", (Feature.ATTENTION,)),
    "qk_cast": Applies("where the FP8 scores product's operands are cast", (Feature.ATTENTION, Feature.FP8_SCORES)),
    "pv_dtype": Applies("the operand precision of the attention values product", (Feature.ATTENTION,)),
    "pv_cast": Applies("where the FP8 values product's operands are cast", (Feature.ATTENTION, Feature.FP8_VALUES)),
    "partials": Applies("the precision of split-inner partial sums", (Feature.MATMUL,), _partials_idle),
    "qk_preparation": Applies("how swapped Q / K results are unpacked for the scores", (Feature.ATTENTION,)),
    "attention_products": Applies("which attention products run on grids of their own", (Feature.ATTENTION,)),
    "attention": Applies("the attention form: materialized scores, or key blocks streamed with F32 state",
                         (Feature.ATTENTION,)),
    "key_block": Applies("the streaming attention's keys per block", (Feature.ATTENTION,), lambda v, o, p, f: (
        "key blocks are the streaming form's, and attention='materialized'" if o.attention != "streaming"
        else None)),
    "kernel_build": Applies("whose kernel costs"),
    "stream_weights": Applies("how LayerNorm parameters are kept", (Feature.LAYERNORM,), _stream_weights_idle),
    "simulate": Applies("whether a cycle profile is simulated"),
    "check": Applies("whether the functional check runs"),
    "seed": Applies("the functional check's random inputs", (), _seed_idle),
}

#: every field of :class:`toolkit.graph.Workload`; shapes size the graph (not checked here), switches change it
SWITCHES: dict[str, Applies] = {
    **{name: Applies("the workload's shape", shape=True) for name in (
        "name", "kind", "tokens", "width", "hidden", "heads", "head_dim", "description")},
    "batch": Applies("the images per run"),
    "blocks": Applies("the repeated blocks"),
    "fused_qkv": Applies("the attention's QKV form", (Feature.ATTENTION,), _fused_switch_idle),
    "search_qkv": Applies("whether the search tries the other QKV form", (Feature.ATTENTION,)),
    "compute_tiles": Applies("the workload's compute tiles"),
    "weight_dtype": Applies("the matmul weights' format", (Feature.LINEAR,)),
    "early_casts": Applies("where FP8 matmul inputs are cast", (Feature.FP8_WEIGHTS, Feature.CAST_PRODUCER)),
    "biases": Applies("the linears' biases", (Feature.LINEAR,)),
    "layernorm": Applies("the blocks' LayerNorm"),
    "residual": Applies("the blocks' residual add"),
    "projection": Applies("attention's output projection", (Feature.ATTENTION,)),
    "host_layout": Applies("who lays out the graph input"),
    "image": Applies("the image side", (Feature.PATCHES,)),
    "patch": Applies("the patch side", (Feature.PATCHES,)),
    "qk_dtype": Applies("the operand precision of the attention scores product", (Feature.ATTENTION,)),
    "qk_cast": Applies("where the FP8 scores product's operands are cast", (Feature.ATTENTION, Feature.FP8_SCORES)),
    "pv_dtype": Applies("the operand precision of the attention values product", (Feature.ATTENTION,)),
    "pv_cast": Applies("where the FP8 values product's operands are cast", (Feature.ATTENTION, Feature.FP8_VALUES)),
}


def graph_features(graph: Graph) -> frozenset[Feature]:
    """The features of ``graph`` settings can act on, read off its ops, tensors and params."""
    ops = list(graph.ops.iter_rows(named=True))
    tensors = {t["tensor_id"]: t for t in graph.tensors.iter_rows(named=True)}
    params = graph.params
    kinds = {op["kind"] for op in ops}
    rules = {op["rule"] for op in ops}
    fp8 = {op["op_id"] for op in ops if op["rule"] == "linear"
           and any(tensors[t]["role"] == "weight" and str(tensors[t]["dtype"]).startswith("f8") for t in op["inputs"])}
    fp8_inputs = {t for op in ops if op["op_id"] in fp8 for t in op["inputs"] if tensors[t]["role"] != "weight"}
    producers = {op["output"] for op in ops if op["kind"] in ("layernorm", "gelu")}
    out = {
        Feature.MATMUL: "matmul" in kinds,
        Feature.LINEAR: "linear" in rules,
        Feature.ATTENTION: bool(rules & {"scores", "attention"}),
        Feature.FP8_WEIGHTS: bool(fp8),
        Feature.CAST_PRODUCER: bool(fp8_inputs & producers),
        Feature.LAYERNORM: "layernorm" in kinds,
        Feature.STREAM: bool(kinds & {"layernorm", "add"}),
        Feature.FP8_SCORES: "scores" in rules and params.get("qk_dtype", "f16") != "f16",
        Feature.FP8_VALUES: "values" in rules and params.get("pv_dtype", "f16") != "f16",
        Feature.PATCHES: params.get("kind") == "vit",
    }
    return frozenset(f for f, present in out.items() if present)


_OPTION_DEFAULTS = Options()
_SWITCH_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Workload)}


def check_applicability(graph: Graph, options: Options) -> None:
    """Refuse every non-default option and workload switch that ``graph`` has nothing for (by name, with what it
    sets and what the graph lacks); warn (:class:`~toolkit.errors.NoEffectWarning`) of legal ones another
    setting makes idle. Runs on the built graph, before the layout search."""
    features = graph_features(graph)
    params = graph.params
    for f in dataclasses.fields(Options):
        value = getattr(options, f.name)
        if value != getattr(_OPTION_DEFAULTS, f.name) and f.name in OPTIONS:
            _check(f"option {f.name}={value!r}", f.name, value, OPTIONS[f.name], graph, options, features,
                   OptionError)
    for name, rule in SWITCHES.items():   # the switches a Workload built into the graph's params
        if rule.shape or name not in params or name not in _SWITCH_DEFAULTS:
            continue
        value = params[name]
        if value != _SWITCH_DEFAULTS[name]:
            _check(f"workload switch {name}={value!r}", name, value, rule, graph, options, features, ModelError)


def _check(said: str, name: str, value: Any, rule: Applies, graph: Graph, options: Options,
           features: frozenset[Feature], error: type[OptionError] | type[ModelError]) -> None:
    missing = [f for f in rule.needs if f not in features]
    if missing:
        msg = (f"{said} changes nothing: workload {graph.name!r} has no {missing[0].value} ({name} sets "
               f"{rule.what}); drop it")
        raise error(msg, field=name, value=value)
    why = rule.idle(value, options, graph.params, features) if rule.idle is not None else None
    if why:
        warnings.warn(f"{said} changes nothing for workload {graph.name!r}: {why}", NoEffectWarning, stacklevel=3)


__all__ = ["OPTIONS", "SWITCHES", "Applies", "Feature", "check_applicability", "graph_features"]
