"""Pins are resolved and checked before the search: each names what it pins, or is refused by name.

A pinned grid knob that no candidate can honour (a row shard larger than the
row blocks of any layout, an inner block deeper than every linear op, more
compute tiles than the target has) would otherwise be clamped silently and
reported as if it had been used. A plan pin (option ``plans``) is matched to
op names (:func:`resolve_pins`): a short name pins every op ending in it when
they share one shape, and the pins frame (:data:`PINS_SCHEMA`,
``LayoutResult.pins``) says which ops each entry matched; a pin of an op one
QKV form has keeps the search to that form (:func:`pin_plans`).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable

import polars as pl

from toolkit.errors import ModelError, OptionError
from toolkit.graph import Graph, Workload, build_graph
from toolkit.graph.streaming import stream_attention
from toolkit.layout.constraints import constraint_plan, read_constraint
from toolkit.layout.gemm import GemmPlan, parse_plan
from toolkit.layout.gemm_search import _check_fits, _check_product, linear_ops
from toolkit.layout.ipu_stack import normalize_memory, resolve_number
from toolkit.layout.plans import AMP_GROUP
from toolkit.options import CONSTRAINT_KEY, Options
from toolkit.target import Target

#: the plan pins as matched to ops (LayoutResult.pins): each entry as given, the op it pins (a short name may pin
#: several ops of one shape), the plan, and the QKV form of the graph it was matched in
PINS_SCHEMA = {"entry": pl.String, "key": pl.String, "op": pl.String, "plan": pl.String, "fused_qkv": pl.Boolean}


def pin_plans(graph: Graph, target: Target, options: Options
              ) -> tuple[int, dict[bool, Graph], dict[bool, tuple], pl.DataFrame]:
    """What the search starts from, every pin checked (cheap: no candidate is screened): the compute tiles, the
    graph in each QKV form searched (a plan pin of an op one form has, ``attn.qkv`` or ``attn.q``, keeps that
    form), the pinned plans per form and the pins frame (which ops each entry matched,
    :data:`PINS_SCHEMA`)."""
    tiles = compute_tiles(graph, target, options)
    check_pins(graph, options)
    graphs = _graph_variants(graph, options)
    prepared = {f: _prepare(g) for f, g in graphs.items()}
    pins, pinned = resolve_pins(options.plans, {f: v[0] for f, v in prepared.items()},
                                {f: v[1] for f, v in prepared.items()}, tiles, options.weight_class,
                                _elsewhere(graph, graphs, options))
    return tiles, {f: g for f, g in graphs.items() if f in pins}, pins, pinned


def compute_tiles(graph: Graph, target: Target, options: Options) -> int:
    """The tiles the search may use: the option, else the workload's limit, else the target's; never more than
    the target has."""
    if options.tiles is not None and options.tiles > target.tiles:
        msg = f"option tiles={options.tiles} exceeds the {target.tiles} tiles of target {target.name!r}"
        raise OptionError(msg, field="tiles", value=options.tiles)
    return min(options.tiles or graph.params.get("compute_tiles") or target.tiles, target.tiles)


def check_pins(graph: Graph, options: Options) -> None:
    """Refuse grid pins no layout of ``graph`` can use (each error names the largest value that applies)."""
    linear = graph.ops.filter(graph.ops["rule"] == "linear")
    if not linear.height:
        return
    tokens, batch = int(graph.params["tokens"]), int(graph.params["batch"])
    blocks = [options.row_block] if options.row_block is not None else list(options.row_blocks)
    most_rows = max(batch * math.ceil(tokens / min(rb, tokens)) for rb in blocks)
    limits = {
        "row_shard": (most_rows, "the row blocks of any layout searched"),
        "inner_block": (int(linear["inner"].max()), "the deepest linear op's inner dimension"),
        "inner_split": (math.ceil(linear["inner"].max() / AMP_GROUP), "the 16-deep inner groups of the deepest op"),
        "panel_groups": (math.ceil(linear["cols"].max() / AMP_GROUP), "the 16-column groups of the widest op"),
    }
    for name, (limit, what) in limits.items():
        v = getattr(options, name)
        if v is not None and v > limit:
            msg = (f"option {name}={v} cannot apply to {graph.name!r}: it exceeds {what} ({limit}); "
                   f"pin at most {limit}, or leave it to the search")
            raise OptionError(msg, field=name, value=v)


def resolve_pins(pins: tuple[tuple[str, str], ...], variants: dict[bool, list[dict]], tensors: dict[bool, dict],
                 tiles: int, weight_class: str | None = None, elsewhere: Callable[[str], str | None] | None = None
                 ) -> tuple[dict[bool, tuple[tuple[str, GemmPlan], ...]], pl.DataFrame]:
    """Pinned plans per graph variant (only the variants every pin names an op of) and the pins frame
    (:data:`PINS_SCHEMA`: which ops each entry matched).

    A key matches the op named it, else every op ending in ``"." + key``
    (``mlp.fc1`` pins that op alone, not also ``map.mlp.fc1``; ``k`` pins
    ``attn.k`` and ``map.attn.k``, which have one shape); an ipu-stack
    constraint line (:data:`toolkit.options.CONSTRAINT_KEY`) names its op by
    ipu-stack's number (:mod:`toolkit.layout.ipu_stack`). A pin naming an op
    of one QKV form only (``qkv``, ``q``) keeps the search to that form.

    Refused by name: keys that match no op (with the op names), a key matching
    ops of different shapes (with the full names to use), an op pinned twice
    (with both entries), pins of ops of both QKV forms, keys naming an op that
    is not a linear or an attention product, malformed plans and plans needing
    more tiles than the compute tiles. A line's memory class equal to the
    pinned ``weight_class`` is the layout's (the plan names none).
    ``elsewhere`` says, for a key no op matches, where it would (the QKV form
    not searched).
    """
    out: dict[bool, dict[str, tuple[str, GemmPlan]]] = {v: {} for v in variants}
    rows: list[dict] = []
    names = sorted({op["name"] for ops in variants.values() for op in ops})
    forms: dict[str, tuple[set[bool], list[str]]] = {}   # entry -> the variants it matched in, the ops it pinned
    for key, text in pins:
        entry = text if key == CONSTRAINT_KEY else f"{key}={text}"
        if key == CONSTRAINT_KEY:
            line = read_constraint(text)
            for v, ops in variants.items():
                try:
                    op = resolve_number(line.op, ops, text)
                    plan = normalize_memory(constraint_plan(line, int(op["rows"]), int(op["cols"]), op["name"]),
                                            weight_class)
                except OptionError as exc:   # both QKV forms searched: say which graph the line does not fit
                    if len(variants) < 2:
                        raise
                    msg = (f"{exc} [in the graph with {'fused' if v else 'separate'} QKV; ipu-stack builds one "
                           f"form (--fuse-qkv or not): pin fused_qkv to the form the lines were written for]")
                    raise OptionError(msg, field=exc.field, value=text) from None
                _check_fits(op, plan, tiles, "plans.RxCxK", text)
                _pin(out[v], rows, op["name"], plan, entry, key, v)
            continue
        exact = key in names
        hit_forms: set[bool] = set()
        hit_ops: list[str] = []
        for v, ops in variants.items():
            hits = [op for op in ops if op["name"] == key or (not exact and op["name"].endswith("." + key))]
            if not hits:
                continue
            _check_one_shape(key, text, hits)
            lin = {op["name"] for op in linear_ops(ops, tensors[v])}
            products = {op["name"] for op in ops if op["rule"] in ("scores", "values")}   # attention products
            for op in hits:
                if op["name"] not in lin | products:
                    msg = (f"plans pins op {op['name']!r} (key {key!r}), which is a {op['kind']}; plans apply to "
                           f"matmuls: {sorted(lin | products)}")
                    raise OptionError(msg, field=f"plans.{key}", value=text, op=op["name"])
                plan = parse_plan(text, op=op["name"])
                if op["name"] in products:
                    _check_product(op, plan, key, text)
                else:
                    _check_fits(op, plan, tiles, f"plans.{key}", text)
                _pin(out[v], rows, op["name"], plan, entry, key, v)
                hit_ops.append(op["name"])
            hit_forms.add(v)
        if not hit_forms:
            words = list(dict.fromkeys(names + [n.rsplit(".", 1)[-1] for n in names]))
            close = difflib.get_close_matches(key, words, n=2)
            where = elsewhere(key) if elsewhere is not None else None
            hint = f": {where}" if where else f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
            msg = (f"plans names op {key!r} (entry {entry!r}), which no op of the graph is or ends with{hint}; "
                   f"the plannable ops: {_plannable(variants)}")
            raise OptionError(msg, field=f"plans.{key}", value=text)
        forms[entry] = (hit_forms, hit_ops)
    kept = set(variants)
    for hit_forms, _ in forms.values():
        kept &= hit_forms
    if not kept:
        said = [f"{e!r} only the {'fused' if True in f else 'separate'}-QKV graph's ({', '.join(dict.fromkeys(o))})"
                for e, (f, o) in forms.items() if len(f) < len(variants)]
        msg = (f"plans pin ops of both QKV forms: {' and '.join(said)}; no graph has both: pin the ops of one "
               f"form")
        raise OptionError(msg, field="plans", value=tuple(forms))
    frame = pl.DataFrame([r for r in rows if r["fused_qkv"] in kept], schema=PINS_SCHEMA, orient="row")
    return {v: tuple(sorted((name, plan) for name, (_, plan) in out[v].items())) for v in sorted(kept)}, frame


def _pin(pinned: dict[str, tuple[str, GemmPlan]], rows: list[dict], name: str, plan: GemmPlan, entry: str,
         key: str, variant: bool) -> None:
    """Pin ``name`` to ``plan`` for ``entry``, refusing an op pinned twice (naming both entries)."""
    if name in pinned:
        msg = f"op {name!r} pinned twice: {pinned[name][0]!r} and {entry!r}; keep one"
        raise OptionError(msg, field="plans", value=entry, op=name)
    pinned[name] = (entry, plan)
    rows.append({"entry": entry, "key": key, "op": name, "plan": plan.label(), "fused_qkv": variant})


def _shape(op: dict) -> str:
    groups = f"{op['groups']} groups of " if (op.get("groups") or 1) > 1 else ""
    return f"{groups}{op['rows']} x {op['cols']}, inner {op['inner']}"


def _check_one_shape(key: str, text: str, hits: list[dict]) -> None:
    """A short key's ops take one plan: refused when their shapes (rows, columns, inner, groups, rule) differ."""
    shapes = {(op["rule"], op["rows"], op["cols"], op["inner"], op.get("groups")) for op in hits}
    if len(shapes) > 1:
        said = ", ".join(f"{op['name']!r} ({_shape(op)})" for op in hits)
        full = ", ".join(f"'{op['name']}={text}'" for op in hits)
        msg = (f"plans key {key!r} matches ops of different shapes: {said}; one plan cannot suit them all: pin "
               f"each by its full name ({full}, with a plan per op)")
        raise OptionError(msg, field=f"plans.{key}", value=text, op=hits[0]["name"])


def _plannable(variants: dict[bool, list[dict]]) -> str:
    """The plannable ops' names (linears and attention products) of every variant, as a message says them."""
    names = sorted({op["name"] for ops in variants.values() for op in ops
                    if op["rule"] in ("linear", "scores", "values")})
    return ", ".join(map(repr, names))


def _graph_variants(graph: Graph, options: Options) -> dict[bool, Graph]:
    """The graph in each QKV form searched: both where the graph allows, unless pinned or fixed by the workload.

    A workload whose name fixes its QKV form (``search_qkv=False``, e.g. the
    attention-b1 / attention-fused-b1 presets) keeps it unless ``fused_qkv`` is pinned.
    """
    fused_now = bool(graph.params.get("fused_qkv", False))
    has_attention = bool(graph.ops["rule"].is_in(["scores", "attention"]).any())
    streaming = graph.params.get("attention") == "streaming"   # a variant is streamed as the graph was
    searchable = has_attention and graph.params.get("search_qkv", True)
    searched = [False, True] if searchable else [fused_now]
    choices = searched if options.fused_qkv is None else [options.fused_qkv]
    out = {}
    for f in choices:
        if f == fused_now or not has_attention:
            out[f] = graph
        else:
            try:
                out[f] = _in_form(graph, f)
                if streaming:
                    out[f] = stream_attention(out[f], int(graph.params["key_block"]))
            except ModelError:   # a form the graph cannot take (mixed early casts of fused QKV): searched only
                if options.fused_qkv is not None:
                    raise
    return out


def _in_form(graph: Graph, fused: bool) -> Graph:
    """``graph`` rebuilt with fused (or separate) QKV from its workload params."""
    fields = {k: v for k, v in graph.params.items() if k in Workload.__slots__}
    fields.setdefault("name", graph.name)
    return build_graph(Workload(**{**fields, "fused_qkv": fused}))


def _elsewhere(graph: Graph, graphs: dict[bool, Graph], options: Options):
    """For a plan key no op of the searched graphs matches: where it would match (the QKV form not searched, and
    why it is not), or None."""
    def where(key: str) -> str | None:
        if len(graphs) != 1 or not bool(graph.ops["rule"].is_in(["scores"]).any()):
            return None
        fused = not next(iter(graphs))
        form = "fused" if fused else "separate"
        try:
            other = _in_form(graph, fused)
        except ModelError as exc:   # the form the search would try cannot be built (mixed casts of fused QKV)
            return f"the {form}-QKV form of workload {graph.name!r}, which might have it, cannot be built ({exc})"
        except TypeError:   # a graph whose params are no Workload's
            return None
        names = [n for n in other.ops["name"] if n == key or n.endswith("." + key)]
        if not names:
            return None
        why = (f"option fused_qkv={options.fused_qkv} is pinned" if options.fused_qkv is not None else
               f"workload {graph.name!r} keeps its QKV form (search_qkv=False)")
        return f"{', '.join(map(repr, names))} exist only with {form} QKV, and {why}"
    return where


def _prepare(g: Graph) -> tuple[list[dict], dict, dict]:
    ops = list(g.ops.iter_rows(named=True))
    tensors = {r["tensor_id"]: r for r in g.tensors.iter_rows(named=True)}
    reps = dict(zip(g.repeats["block"].to_list(), g.repeats["instances"].to_list(), strict=True))
    return ops, tensors, reps


__all__ = ["PINS_SCHEMA", "check_pins", "compute_tiles", "pin_plans", "resolve_pins"]
