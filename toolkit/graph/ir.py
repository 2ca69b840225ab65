"""The model graph: ops, tensors and symbolic repeat regions as polars frames.

A graph is small and symbolic: a repeated block (``repeat(layer, 27)``) is
stored once, with one ``repeats`` row saying how many instances it has, which
ops it spans (``first_op`` .. ``last_op``) and which tensor is carried from one
instance to the next. Ops before that span (a prologue, e.g. a patch
embedding) and after it (an epilogue, e.g. a pooling head) run once
(``GraphBuilder.repeat_region``). Weights of a repeated
block are marked ``per_instance``: each instance has its own values, stored
once per instance only when placed. ``Graph.instances()`` expands the per-
instance view lazily.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import polars as pl

from toolkit import tables
from toolkit.errors import ModelError
from toolkit.tables import OPS_SCHEMA, REPEATS_SCHEMA, TENSORS_SCHEMA, empty, frame


class DType(StrEnum):
    """Element types of the IPU21: FP8 (F143, F152), FP16, FP32."""

    F8_143 = "f8_143"
    F8_152 = "f8_152"
    F16 = "f16"
    F32 = "f32"

    @property
    def bytes(self) -> int:
        return _DTYPE_BYTES[self]


_DTYPE_BYTES = {DType.F8_143: 1, DType.F8_152: 1, DType.F16: 2, DType.F32: 4}


class OpKind(StrEnum):
    """The closed set of op kinds."""

    MATMUL = "matmul"
    LAYERNORM = "layernorm"
    GELU = "gelu"
    SOFTMAX = "softmax"
    ADD = "add"
    CAST = "cast"
    COPY = "copy"
    ATTENTION = "attention"   # streaming (FlashAttention) attention of one layer: Q, K, V in, the heads' values out


#: An op's behaviour: the key of every per-op rule table (plan, estimate, lowering, reference semantics). A
#: matmul is a linear (with weights: A[rows, inner] x W[inner, cols] + bias) or an attention product (scores:
#: Q K^T, values: P V, per (image, head)); every other kind is its own rule.
Rule = StrEnum("Rule", {"LINEAR": "linear", "SCORES": "scores", "VALUES": "values",
                        **{k.name: k.value for k in OpKind if k is not OpKind.MATMUL}})


class Role(StrEnum):
    INPUT = "input"
    WEIGHT = "weight"
    ACTIVATION = "activation"
    OUTPUT = "output"


# Approximate non-matmul flops per element (used only for reporting and the roofline).
FLOPS_PER_ELEMENT = {
    OpKind.LAYERNORM: 8, OpKind.GELU: 10, OpKind.SOFTMAX: 5, OpKind.ADD: 1, OpKind.CAST: 1, OpKind.COPY: 0,
    OpKind.ATTENTION: 0,   # its flops are its two products' and its softmax's (toolkit.graph.streaming)
}


@dataclass(frozen=True, slots=True)
class Graph:
    """A model graph: one row per op and tensor; repeated blocks kept symbolic."""

    name: str
    ops: pl.DataFrame        # OPS_SCHEMA
    tensors: pl.DataFrame    # TENSORS_SCHEMA
    repeats: pl.DataFrame    # REPEATS_SCHEMA (empty when nothing repeats)
    params: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return tables.short_repr(self)

    def instances(self) -> pl.LazyFrame:
        """Every op of every instance (lazy): repeated ops once per instance, the rest once."""
        ops = self.ops.lazy()
        reps = self.repeats.lazy().select("block", pl.int_ranges(0, "instances").alias("instance"))
        return (
            ops.join(reps, on="block", how="left")
            .with_columns(pl.col("instance").fill_null(pl.lit([0], dtype=pl.List(pl.Int64))))
            .explode("instance")
        )

    def total_flops(self) -> int:
        """Flops of the whole model with every repeat instance counted."""
        return int(self.instances().select(pl.col("flops").sum()).collect().item())

    def frames(self) -> dict[str, pl.DataFrame]:
        return {"ops": self.ops, "tensors": self.tensors, "repeats": self.repeats}


class GraphBuilder:
    """Accumulates op and tensor rows (a graph has tens of ops; rows are few)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._ops: dict[str, list[Any]] = {k: [] for k in OPS_SCHEMA}
        self._tensors: dict[str, list[Any]] = {k: [] for k in TENSORS_SCHEMA}
        self._repeats: dict[str, list[Any]] = {k: [] for k in REPEATS_SCHEMA}
        self.block = "main"

    def tensor(self, name: str, shape: tuple[int, ...], dtype: DType, role: Role, *, per_instance: bool = False,
               host_layout: bool = False) -> int:
        """Append one tensor. ``host_layout``: a graph input the host writes straight into the operand layout of its
        first consumer (no exchange gathers it there); other inputs start on the residual stream's layout."""
        tid = len(self._tensors["tensor_id"])
        for dim_index, dim in enumerate(shape):
            if int(dim) <= 0:
                msg = f"tensor {name!r} has non-positive dimension {dim} at axis {dim_index} (shape {shape})"
                raise ModelError(msg, field="shape", value=shape)
        if dtype not in set(DType):   # a builder's dtype may be its string name ("f16")
            msg = f"tensor {name!r} has dtype {dtype!r}; use one of {[d.value for d in DType]}"
            raise ModelError(msg, field="dtype", value=dtype)
        dtype = DType(dtype)
        row = {
            "tensor_id": tid, "name": name, "shape": list(shape), "dtype": str(dtype), "role": str(role),
            "producer": None, "block": self.block, "per_instance": per_instance,
            "size_bytes": math.prod(shape) * dtype.bytes, "host_layout": host_layout,
        }
        if host_layout and role != Role.INPUT:
            msg = (f"tensor {name!r} has host_layout=True but role {str(role)!r}; only a graph input is placed by "
                   f"the host")
            raise ModelError(msg, field="host_layout", value=name)
        for k, v in row.items():
            self._tensors[k].append(v)
        return tid

    def op(self, name: str, kind: OpKind, inputs: list[int], output: int, *, rows: int, cols: int,
           inner: int = 0, groups: int = 1, rule: Rule | None = None) -> int:
        """Append one op; ``rule`` defaults to the kind's own (a matmul's must be given)."""
        oid = len(self._ops["op_id"])
        if rule is None:
            if kind == OpKind.MATMUL:
                msg = f"op {name!r} is a matmul: say which rule it follows (linear, scores or values)"
                raise ModelError(msg, field="rule", op=name)
            rule = Rule(str(kind))
        if kind == OpKind.MATMUL:
            flops = 2 * rows * cols * inner * groups
        else:
            flops = FLOPS_PER_ELEMENT[kind] * rows * cols * groups
        row = {
            "op_id": oid, "name": name, "kind": str(kind), "rule": str(rule), "block": self.block, "inputs": inputs,
            "output": output, "rows": rows, "cols": cols, "inner": inner, "groups": groups, "flops": flops,
        }
        for k, v in row.items():
            self._ops[k].append(v)
        self._tensors["producer"][output] = oid
        if self._tensors["role"][output] == Role.INPUT:
            msg = f"op {name!r} writes graph input {self._tensors['name'][output]!r}"
            raise ModelError(msg, field="output", op=name)
        return oid

    def mark_output(self, tid: int) -> None:
        self._tensors["role"][tid] = str(Role.OUTPUT)

    def set_role(self, tid: int, role: Role) -> None:
        self._tensors["role"][tid] = str(role)

    def repeat_region(self, block: str, instances: int, x: int, body: Callable[[GraphBuilder, int], int]) -> int:
        """Append ``body(self, x)`` as the graph's repeated region: its ops and tensors tagged ``block``, its
        weights per instance, ``x`` carried in and the body's result carried out (and returned). Ops appended
        before form the prologue, ops after it the epilogue; both run once."""
        if self.block != "main" or self._repeats["block"]:
            msg = f"graph {self.name!r} already has a repeated region; a graph has at most one"
            raise ModelError(msg, field="block", value=block)
        first_op, first_tensor = self.next_op, len(self._tensors["tensor_id"])
        self.block = block
        try:
            out = body(self, x)
        finally:
            self.block = "main"
        if self.next_op == first_op:
            msg = f"repeated region {block!r} of graph {self.name!r} has no ops"
            raise ModelError(msg, field="block", value=block)
        roles = self._tensors["role"]
        for t in range(first_tensor, len(roles)):
            self._tensors["per_instance"][t] = roles[t] == Role.WEIGHT
        self.add_repeat(block, instances, first_op, self.next_op - 1, x, out)
        return out

    def add_repeat(self, block: str, instances: int, first_op: int, last_op: int, carried_in: int,
                   carried_out: int) -> None:
        for k, v in zip(REPEATS_SCHEMA, (block, instances, first_op, last_op, carried_in, carried_out), strict=True):
            self._repeats[k].append(v)

    @property
    def next_op(self) -> int:
        return len(self._ops["op_id"])

    def build(self, params: dict[str, Any]) -> Graph:
        repeats = frame(self._repeats, REPEATS_SCHEMA, what="repeats") if self._repeats["block"] else empty(
            REPEATS_SCHEMA)
        return Graph(
            name=self.name,
            ops=frame(self._ops, OPS_SCHEMA, what="ops"),
            tensors=frame(self._tensors, TENSORS_SCHEMA, what="tensors"),
            repeats=repeats,
            params=params,
        )
