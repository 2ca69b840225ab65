"""Streaming (FlashAttention) attention: a graph pass that fuses each attention's scores, softmax and values.

``stream_attention(graph, key_block)`` replaces every materialized attention
(the ops ``scores`` -> ``softmax`` -> ``values`` of :func:`toolkit.graph.builders.add_attention`)
by ONE op of kind ``attention`` (rule ``attention``): inputs Q, K, V (the
scores' inputs, then the values' V; a fused QKV tensor once, a pooling head's
fused KV once after Q), the values' output, ``rows`` = query
tokens, ``cols`` = head width, ``inner`` = keys, ``groups`` = images x heads,
the flops of the two products and the softmax. The scores and probabilities
tensors disappear from the graph: the streaming form never holds them whole.
The graph params gain ``attention="streaming"`` and ``key_block``, which the
layout (``toolkit.layout.streaming``), the schedule and the check read.

What the op computes per (image, head) and query-row block, key block by key
block (ipu-stack's ``--attention-strategy flash``: per 64-key block the QK
product on the AMP, the block softmax writing FP16 exponentials and FP32 row
maxima / sums, the PV product, and the attention merge that rescales an FP32
accumulator, ``crates/ipu-codegen/src/kernel/attention.rs``): scores
``S_j = Q K_j^T`` (FP16), ``m = max(m, rowmax(S_j) / sqrt(d))``,
``P_j = exp(S_j / sqrt(d) - m)`` (FP16), ``l = l e^(m_old - m) + rowsum(P_j)``,
``O = O e^(m_old - m) + P_j V_j`` (FP32), and finally ``O / l`` stored FP16.
"""

from __future__ import annotations

from toolkit.errors import ModelError
from toolkit.graph.ir import Graph, OpKind, Rule
from toolkit.tables import OPS_SCHEMA, REPEATS_SCHEMA, TENSORS_SCHEMA, empty, frame


def attentions(graph: Graph) -> list[tuple[dict, dict, dict]]:
    """Every materialized attention of ``graph`` as its (scores, softmax, values) op rows, in op order."""
    ops = graph.ops.to_dicts()
    reader = {}
    for op in ops:
        for t in op["inputs"]:
            reader.setdefault(t, op)
    out = []
    for op in ops:
        if op["rule"] != str(Rule.SCORES):
            continue
        soft = reader.get(op["output"])
        values = reader.get(soft["output"]) if soft is not None else None
        if soft is None or soft["kind"] != str(OpKind.SOFTMAX) or values is None or values["rule"] != str(Rule.VALUES):
            msg = (f"attention scores op {op['name']!r} of graph {graph.name!r} is not followed by its softmax and "
                   f"values products; the streaming form fuses exactly scores -> softmax -> values")
            raise ModelError(msg, field="attention", value="streaming", op=op["name"])
        out.append((op, soft, values))
    return out


def stream_attention(graph: Graph, key_block: int) -> Graph:
    """``graph`` with every attention in the streaming form (see the module doc); refused by name on a graph
    with no attention."""
    found = attentions(graph)
    if not found:
        msg = (f"option attention='streaming' applies to attention, but workload {graph.name!r} has none (no "
               f"scores / softmax / values ops); leave attention='materialized' for it")
        raise ModelError(msg, field="attention", value="streaming")
    fp8 = next((k for k in ("qk_dtype", "pv_dtype") if graph.params.get(k, "f16") != "f16"), None)
    if fp8 is not None:
        msg = (f"option attention='streaming' runs both attention products FP16, but workload {graph.name!r} has "
               f"{fp8}={graph.params[fp8]!r}; build it with FP16 products or keep attention='materialized'")
        raise ModelError(msg, field=fp8, value=graph.params[fp8])
    dropped_ops = {op["op_id"] for s, p, v in found for op in (p, v)}
    dropped_tensors = {t for s, p, _v in found for t in (s["output"], p["output"])}
    fused = {}
    for s, p, v in found:
        prefix = s["name"].removesuffix(".scores")
        fused[s["op_id"]] = {
            **s, "name": f"{prefix}.attention", "kind": str(OpKind.ATTENTION), "rule": str(Rule.ATTENTION),
            "inputs": list(dict.fromkeys([*s["inputs"], v["inputs"][-1]])), "output": v["output"], "rows": s["rows"],
            "cols": v["cols"], "inner": s["cols"], "groups": s["groups"],
            "flops": s["flops"] + p["flops"] + v["flops"]}
    old_ops = [fused.get(op["op_id"], op) for op in graph.ops.to_dicts() if op["op_id"] not in dropped_ops]
    op_map = {op["op_id"]: i for i, op in enumerate(old_ops)}
    for s, _p, v in found:   # the fused op stands where the scores stood and produces the values' output
        op_map[v["op_id"]] = op_map[s["op_id"]]
    old_tensors = [t for t in graph.tensors.to_dicts() if t["tensor_id"] not in dropped_tensors]
    t_map = {t["tensor_id"]: i for i, t in enumerate(old_tensors)}
    ops = [{**op, "op_id": op_map[op["op_id"]], "inputs": [t_map[t] for t in op["inputs"]],
            "output": t_map[op["output"]]} for op in old_ops]
    tensors = [{**t, "tensor_id": t_map[t["tensor_id"]],
                "producer": None if t["producer"] is None else op_map[t["producer"]]} for t in old_tensors]
    reps = [{**r, "first_op": _mapped(op_map, r["first_op"], +1), "last_op": _mapped(op_map, r["last_op"], -1),
             "carried_in": t_map[r["carried_in"]], "carried_out": t_map[r["carried_out"]]}
            for r in graph.repeats.to_dicts()]

    def columns(rows: list[dict], schema: dict) -> dict:
        return {k: [r[k] for r in rows] for k in schema}

    return Graph(name=graph.name, ops=frame(columns(ops, OPS_SCHEMA), OPS_SCHEMA, what="ops"),
                 tensors=frame(columns(tensors, TENSORS_SCHEMA), TENSORS_SCHEMA, what="tensors"),
                 repeats=frame(columns(reps, REPEATS_SCHEMA), REPEATS_SCHEMA, what="repeats") if reps
                 else empty(REPEATS_SCHEMA),
                 params={**graph.params, "attention": "streaming", "key_block": int(key_block)})


def _mapped(op_map: dict[int, int], op_id: int, step: int) -> int:
    """The new id of ``op_id``, or of the nearest kept op in direction ``step`` (a dropped op at a region's edge)."""
    while op_id not in op_map:
        op_id += step
    return op_map[op_id]
