"""The bridge to ipu-stack: its op numbers, and the argument list that runs a chosen program on hardware.

ipu-stack's ``--gemm-plan-constraint OP:...`` names an op by its operation
index in the graph its test binary builds (``crates/ipu-tests/src/main.rs``:
operations are numbered as they are created; inputs and parameters are values,
not operations). Its benchmark graphs create, per block:

- ``siglip-mlp-benchmark``: gemm (fc1), gelu, gemm (fc2): fc1 is 0, fc2 is 2;
  no LayerNorm, bias or residual add.
- ``siglip-attention-benchmark``: the Q, K and V gemms (0, 1, 2), or with
  ``--fuse-qkv`` one gemm and three slices of it (0 .. 3); then three
  ``split_heads`` and one ``flash_attention`` (scores, softmax and values);
  no LayerNorm, output projection or residual add.

:data:`IPU_STACK_OPS` says how many ipu-stack operations each of our ops is,
by rule, so any of our graphs is numbered the way ipu-stack would number the
same chain of GEMMs (``mlp-single-b1``'s fc1 is 0 and fc2 is 2 although its
LayerNorm comes first). Ops ipu-stack's benchmarks do not have count zero;
:func:`ipu_stack_args` names them in its warnings.
"""

from __future__ import annotations

import dataclasses

from toolkit.errors import OptionError
from toolkit.layout.constraints import write_constraint
from toolkit.layout.gemm import GemmPlan
from toolkit.options import ATTENTION_PRODUCTS

#: ipu-stack operations per op of ours, by rule (``fused`` linear: one gemm and three slices; ``scores``: three
#: split_heads and the flash_attention that also runs softmax and values); rules not listed count zero
IPU_STACK_OPS = {"linear": 1, "fused": 4, "gelu": 1, "scores": 4}
#: what ipu-stack's benchmark graphs leave out, by rule (named in the emit warnings)
NOT_IN_BENCHMARK = {"layernorm": "LayerNorm", "add": "the residual add", "cast": "FP8 casts"}
#: the test binary that takes ``--gemm-plan-constraint`` (scripts/mlp-layout-sweep.py)
BINARY = "ipu-trivial-test"
#: the file ``--tile-mapping`` names (a JSON array: the execution tile of every planned tile)
MAPPING_FILE = "tile-mapping.json"
#: the F143 operand scale of the hardware's FP8 programs (HARDWARE.md section 5: "FP8 weights (F143 scale -4)")
FP8_SCALE = -4


def _rule(op: dict, ops: list[dict]) -> str:
    if op["rule"] != "linear":
        return op["rule"]
    readers = {o["rule"] for o in ops if op["output"] in o["inputs"]}
    return "fused" if {"scores", "values"} <= readers else "linear"


def op_numbers(ops: list[dict]) -> dict[int, dict]:
    """ipu-stack's op number of every linear op of ``ops`` (in graph order): the sum of
    :data:`IPU_STACK_OPS` over the ops before it."""
    out, at = {}, 0
    for op in ops:
        rule = _rule(op, ops)
        if rule in ("linear", "fused"):
            out[at] = op
        at += IPU_STACK_OPS.get(rule, 0)
    return out


def resolve_number(number: int, ops: list[dict], text: str) -> dict:
    """The linear op ipu-stack numbers ``number``, or an error naming the closest GEMM number."""
    numbers = op_numbers(ops)
    if number in numbers:
        return numbers[number]
    legal = sorted(numbers)
    if not legal:
        msg = f"constraint {text!r}: field OP is {number}: this graph has no GEMM a constraint line can pin"
        raise OptionError(msg, field="plans.OP", value=text)
    close = min(legal, key=lambda n: (abs(n - number), n))
    names = ", ".join(f"{n} ({numbers[n]['name']})" for n in legal)
    msg = (f"constraint {text!r}: field OP is {number}, which is not a GEMM of this graph in ipu-stack's numbering; "
           f"the closest legal value is {close} (GEMMs: {names})")
    raise OptionError(msg, field="plans.OP", value=text)


def constraint_lines(ops: list[dict], plans: tuple[tuple[str, GemmPlan], ...], weight_class: str
                     ) -> tuple[list[str], list[str]]:
    """ipu-stack's line for every linear op with a plan of its own, and a warning for every field a line
    cannot say (weights gathered, rows-fast tile order) or op on the global grid (no plan to write)."""
    by_name = dict(plans)
    lines, warnings = [], []
    for number, op in op_numbers(ops).items():
        plan = by_name.get(op["name"])
        if plan is None:
            warnings.append(f"op {op['name']!r} follows the layout's global grid, which no constraint line says")
            continue
        line, lost = write_constraint(number, plan, int(op["rows"]), int(op["cols"]), weight_class)
        lines.append(line)
        if lost:
            warnings.append(f"op {op['name']!r} ({plan.label()}): ipu-stack's line cannot say {', '.join(lost)}")
    products = [f"{name} {plan.label()}" for name, plan in plans
                if any(op["name"] == name and op["rule"] in ("scores", "values") for op in ops)]
    if products:
        warnings.append(f"the attention product grids ({', '.join(products)}) have no constraint line: ipu-stack "
                        f"chooses its own (--attention-products)")
    return lines, warnings


def ipu_stack_args(graph_params: dict, kind: str, ops: list[dict], plans: tuple[tuple[str, GemmPlan], ...],
                   weight_class: str, fp8_scale: int | None, tile_mapping: tuple[int, ...] = (),
                   qk_preparation: str = "grouped") -> tuple[list[str], list[str]]:
    """The ``ipu-trivial-test`` argument list (workload, batch, constraints) that runs the program, and the
    warnings: what the command cannot say (the ops and fields it leaves out). A tile mapping is passed as
    ``--tile-mapping`` :data:`MAPPING_FILE` (a JSON list indexed by planned tile), which the caller writes."""
    lines, warnings = constraint_lines(ops, plans, weight_class)
    batch, blocks = int(graph_params["batch"]), int(graph_params.get("blocks", 1) or 1)
    args = [BINARY, "c600-init.ipucfg"]   # the device configuration; --sdk defaults to $POPLAR_SDK_ENABLED
    if kind == "mlp":
        args += ["--workload", "siglip-mlp-benchmark", "--mlp-batch", str(batch), "--mlp-tokens",
                 str(graph_params["tokens"]), "--mlp-dim", str(graph_params["width"]), "--mlp-hidden-dim",
                 str(graph_params["hidden"])]
        args += ["--mlp-blocks", str(blocks)] if blocks > 1 else []
    elif kind == "attention":
        args += ["--workload", "siglip-attention-benchmark", "--attention-batch", str(batch),
                 "--attention-heads", str(graph_params["heads"])]
        args += ["--attention-blocks", str(blocks)] if blocks > 1 else []
        args += ["--fuse-qkv"] if any(_rule(op, ops) == "fused" for op in ops) else []
        if int(graph_params["head_dim"]) != 72 or int(graph_params["tokens"]) != 729:
            warnings.append("ipu-stack's attention benchmark has 729 tokens and heads of 72: this graph's "
                            f"{graph_params['tokens']} tokens and heads of {graph_params['head_dim']} are not said")
        args += _attention_products(ops, dict(plans), warnings)
        swapped = {name for name, g in plans if g.swapped}
        if qk_preparation == "separate" and swapped & {op["name"] for op in ops if op["rule"] == "linear"}:
            warnings.append("qk_preparation='separate' is an older ipu-stack build's schedule (each Q / K unpack "
                            "in its own phase); its current build always groups them")
        values = {o["output"] for o in ops if o["rule"] == "values"}
        projection = [op["name"] for op in ops if op["rule"] == "linear" and values & set(op["inputs"])]
        if projection:
            warnings.append(f"ipu-stack's attention benchmark has no output projection: {projection[0]!r} is not "
                            f"run and its line (if any) names an op the benchmark does not have")
    else:
        args += ["--workload", "siglip-vit-benchmark"]
        warnings.append(f"no ipu-stack benchmark runs a {kind} graph alone; siglip-vit-benchmark adds the patch "
                        f"embedding and MAP head, and numbers its ops its own way (not checked here)")
    if blocks > 1:
        warnings.append(f"the {blocks} blocks run as ipu-stack's structured repeat; the op numbers are those of "
                        f"one block (its numbering of a repeat body is not checked here)")
    if fp8_scale is not None:
        args += ["--fp8-scale", str(fp8_scale)]
    left_out = sorted({NOT_IN_BENCHMARK[op["rule"]] for op in ops if op["rule"] in NOT_IN_BENCHMARK})
    if graph_params.get("biases", True) and any(op["rule"] == "linear" and len(op["inputs"]) > 2 for op in ops):
        left_out.append("biases")
    if left_out and kind in ("mlp", "attention"):
        warnings.append(f"ipu-stack's benchmark has no {', '.join(left_out)}: those ops of this graph are not run")
    for line in lines:
        args += ["--gemm-plan-constraint", line]
    if tile_mapping:
        args += ["--tile-mapping", MAPPING_FILE]
        warnings.append(f"write the tile mapping to {MAPPING_FILE}: json.dumps(list(c.layout.chosen.tile_mapping))")
    return args, warnings


#: ipu-stack's --attention-products mode of each (scores on a grid, values on a grid) combination
PRODUCT_MODES = dict(zip(((False, False), (True, False), (False, True), (True, True)), ATTENTION_PRODUCTS,
                         strict=True))


def product_mode(ops: list[dict], plans: dict) -> str | None:
    """The :data:`PRODUCT_MODES` word of a program's attention products (``plans``: op name -> plan; a product
    with a plan runs on a grid), None for a graph without attention."""
    if not any(op["rule"] == "scores" for op in ops):
        return None
    return PRODUCT_MODES[tuple(any(op["name"] in plans for op in ops if op["rule"] == r) for r in ("scores", "values"))]


def _attention_products(ops: list[dict], plans: dict[str, GemmPlan], warnings: list[str]) -> list[str]:
    """``--attention-strategy materialized --attention-products MODE`` for the program's product ownership (its
    grids' partition counts are ipu-stack's planner's own choice: named in a warning when pinned here)."""
    mode = product_mode(ops, plans)
    if mode is None:
        return []
    grids = [op["name"] for op in ops if op["rule"] in ("scores", "values") and op["name"] in plans]
    if grids:
        warnings.append("ipu-stack chooses its attention product grids itself (--attention-products selects which "
                        "products get one): " + ", ".join(f"{n} {plans[n].label()}" for n in grids)
                        + " are not passed")
    return ["--attention-strategy", "materialized", "--attention-products", mode]


def _member_ops(workload, options, batch: int | None) -> tuple[list[dict], object]:
    from toolkit.graph import build_graph
    from toolkit.options import as_options
    o = as_options(options)
    overrides = {} if o.fused_qkv is None else {"fused_qkv": o.fused_qkv}
    graph = build_graph(workload, batch=batch, **({"weight_dtype": o.weight_dtype} if o.weight_dtype else {}),
                        **overrides)
    return list(graph.ops.iter_rows(named=True)), o


def _member_plans(ops: list[dict], o, pins: tuple[tuple[str, str], ...]) -> tuple[tuple[str, GemmPlan], ...]:
    from toolkit.layout.pins import resolve_pins  # the layout's own resolution (names, numbers, fits)
    from toolkit.target import ipu21
    tiles = o.tiles or ipu21().tiles
    return resolve_pins(pins, {False: ops}, {False: {}}, tiles, o.weight_class)[0][False]


def member_lines(workload, options, *, batch: int | None = None) -> tuple[list[str], list[str]]:
    """A program's ipu-stack lines: the ``plans`` of ``options`` (our labels, lines, or both; a mapping or an
    :class:`~toolkit.options.Options`) resolved on ``workload``'s graph (a preset name or a Workload, at
    ``batch``) and written as ipu-stack prints them (:func:`~toolkit.layout.constraints.write_constraint`), with
    the warnings of :func:`constraint_lines` for what a line cannot say (a weight store ipu-stack does not build
    from the line, rows-fast order, attention product grids). The other options (weight dtype, tile mapping,
    kernel build) are not plans and stay options. :func:`member_labels` reads the lines back."""
    ops, o = _member_ops(workload, options, batch)
    plans = _member_plans(ops, o, o.plans)
    return constraint_lines(ops, plans, o.weight_class or "interleaved")


def member_labels(workload, lines, options=None, *, batch: int | None = None) -> dict[str, str]:
    """Back from ipu-stack lines: each line's op (named as in ``workload``'s graph) and the label of the plan
    ipu-stack builds from it (the weight store it builds, the result grid; ``options``: the rest of the
    program's options, e.g. its weight dtype). ``member_lines(w, {"plans": member_labels(w, lines)})`` gives
    ``lines`` back."""
    ops, o = _member_ops(workload, options, batch)
    pins = tuple(("#", text) for text in lines)
    return {name: plan.label() for name, plan in _member_plans(ops, o, pins)}


def normalize_memory(plan: GemmPlan, weight_class: str | None) -> GemmPlan:
    """A read plan whose memory class is the pinned layout class says nothing of its own."""
    return dataclasses.replace(plan, memory="") if weight_class and plan.memory == weight_class else plan


__all__ = ["BINARY", "FP8_SCALE", "IPU_STACK_OPS", "MAPPING_FILE", "PRODUCT_MODES", "constraint_lines",
           "ipu_stack_args", "member_labels", "member_lines", "normalize_memory", "op_numbers", "resolve_number"]
