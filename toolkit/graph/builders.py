"""Model builders: MLP block, attention block, encoder layer, and symbolic repeat.

Each ``add_*`` function appends one block's ops to a :class:`GraphBuilder`
and returns the block's output tensor; the public ``*_block`` functions wrap
them into a one-block :class:`Graph`. Activations are FP16, weights FP8 F143
by default (run on the FP8 AMP, which reads F143 casts of its left operand),
LayerNorm parameters and biases FP16. ``early_casts`` moves those casts to the
producers: the LayerNorm and GELU outputs that feed FP8 matmuls are stored as
F143 (half the bytes on the exchange, one cast per element instead of one per
consumer tile); otherwise each FP8 matmul casts the FP16 panel it received.
Batch folds into rows for the projections; attention groups are
``batch x heads`` independent (tokens x tokens) products.

The attention products QK (scores) and PV (values) run in FP16, or in F143 on
the FP8 AMP (``qk_dtype`` / ``pv_dtype``, graph params of the same names; both
operands at the check's scale, FP16 sums; ``ipu-stack``
docs/FP8_ATTENTION_AND_HOST_IO_2026_09_11.md). An FP8 product's casts sit at
the producers (``early``: the Q/K projections, or the softmax and the V
projection, store F143; docs/FP8_PV_FUSION_2026_09_13.md and
FP8_QK_FULL_MODEL_2026_09_13.md) or in the product (``late``: it casts the
FP16 panels it received).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from toolkit.errors import ModelError
from toolkit.graph.ir import DType, Graph, GraphBuilder, OpKind, Role, Rule


def _positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            msg = f"{name}={value!r} must be a positive integer"
            raise ModelError(msg, field=name, value=value)


def _heads(width: int, heads: int, head_dim: int | None) -> int:
    _positive(heads=heads)
    if width % heads:
        msg = f"heads={heads} does not divide width={width}; choose heads so that width / heads is whole"
        raise ModelError(msg, field="heads", value=heads)
    if head_dim is not None and head_dim * heads != width:
        msg = f"head_dim={head_dim} x heads={heads} = {head_dim * heads} does not equal width={width}"
        raise ModelError(msg, field="head_dim", value=head_dim)
    return width // heads


def _fed(weight_dtype: DType, early_casts: bool) -> DType:
    """What a producer feeding FP8 matmuls stores: F143 when the casts are early (at the producer), else FP16."""
    return DType.F8_143 if early_casts and weight_dtype in (DType.F8_143, DType.F8_152) else DType.F16


def add_layernorm(b: GraphBuilder, x: int, prefix: str, rows: int, width: int, out: DType = DType.F16) -> int:
    gamma = b.tensor(f"{prefix}.gamma", (width,), DType.F16, Role.WEIGHT)
    beta = b.tensor(f"{prefix}.beta", (width,), DType.F16, Role.WEIGHT)
    y = b.tensor(f"{prefix}.out", (rows, width), out, Role.ACTIVATION)
    b.op(prefix, OpKind.LAYERNORM, [x, gamma, beta], y, rows=rows, cols=width)
    return y


def add_linear(b: GraphBuilder, x: int, prefix: str, rows: int, inner: int, cols: int,
               weight_dtype: DType, out: DType = DType.F16) -> int:
    w = b.tensor(f"{prefix}.weight", (inner, cols), weight_dtype, Role.WEIGHT)
    bias = b.tensor(f"{prefix}.bias", (cols,), DType.F16, Role.WEIGHT)
    y = b.tensor(f"{prefix}.out", (rows, cols), out, Role.ACTIVATION)
    b.op(prefix, OpKind.MATMUL, [x, w, bias], y, rows=rows, cols=cols, inner=inner, rule=Rule.LINEAR)
    return y


def add_mlp(b: GraphBuilder, x: int, *, tokens: int, width: int, hidden: int, batch: int,
            weight_dtype: DType = DType.F8_143, prefix: str = "mlp", early_casts: bool = True) -> int:
    rows = tokens * batch
    fed = _fed(weight_dtype, early_casts)
    h = add_layernorm(b, x, f"{prefix}.ln", rows, width, fed)
    a = add_linear(b, h, f"{prefix}.fc1", rows, width, hidden, weight_dtype)
    g = b.tensor(f"{prefix}.gelu.out", (rows, hidden), fed, Role.ACTIVATION)
    b.op(f"{prefix}.gelu", OpKind.GELU, [a], g, rows=rows, cols=hidden)
    y = add_linear(b, g, f"{prefix}.fc2", rows, hidden, width, weight_dtype)
    out = b.tensor(f"{prefix}.residual.out", (rows, width), DType.F16, Role.ACTIVATION)
    b.op(f"{prefix}.residual", OpKind.ADD, [x, y], out, rows=rows, cols=width)
    return out


def add_attention(b: GraphBuilder, x: int, *, tokens: int, width: int, heads: int, batch: int,
                  fused_qkv: bool = False, weight_dtype: DType = DType.F8_143, prefix: str = "attn",
                  early_casts: bool = True, products: Products | None = None) -> int:
    rows = tokens * batch
    head_dim = width // heads
    groups = batch * heads
    qk_in, pv_in = (products or Products()).stored(fused_qkv)
    h = add_layernorm(b, x, f"{prefix}.ln", rows, width, _fed(weight_dtype, early_casts))
    if fused_qkv:
        qkv = add_linear(b, h, f"{prefix}.qkv", rows, width, 3 * width, weight_dtype, qk_in)
        q = k = v = qkv
    else:
        q = add_linear(b, h, f"{prefix}.q", rows, width, width, weight_dtype, qk_in)
        k = add_linear(b, h, f"{prefix}.k", rows, width, width, weight_dtype, qk_in)
        v = add_linear(b, h, f"{prefix}.v", rows, width, width, weight_dtype, pv_in)
    s = b.tensor(f"{prefix}.scores.out", (groups, tokens, tokens), DType.F16, Role.ACTIVATION)
    b.op(f"{prefix}.scores", OpKind.MATMUL, [q] if q == k else [q, k], s, rows=tokens, cols=tokens,
         inner=head_dim, groups=groups, rule=Rule.SCORES)   # inputs: Q then K (one fused QKV tensor: both)
    p = b.tensor(f"{prefix}.softmax.out", (groups, tokens, tokens), pv_in, Role.ACTIVATION)
    b.op(f"{prefix}.softmax", OpKind.SOFTMAX, [s], p, rows=tokens, cols=tokens, groups=groups)
    o = b.tensor(f"{prefix}.values.out", (rows, width), DType.F16, Role.ACTIVATION)
    b.op(f"{prefix}.values", OpKind.MATMUL, [p, v], o, rows=tokens, cols=head_dim, inner=tokens, groups=groups,
         rule=Rule.VALUES)
    y = add_linear(b, o, f"{prefix}.proj", rows, width, width, weight_dtype)
    out = b.tensor(f"{prefix}.residual.out", (rows, width), DType.F16, Role.ACTIVATION)
    b.op(f"{prefix}.residual", OpKind.ADD, [x, y], out, rows=rows, cols=width)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Products:
    """Operand precision of the attention products (``f16`` or ``f8_143``) and where an FP8 product's casts sit."""

    qk_dtype: str = "f16"
    qk_cast: str = "late"
    pv_dtype: str = "f16"
    pv_cast: str = "late"

    def stored(self, fused_qkv: bool) -> tuple[DType, DType]:
        """What the producers of the QK operands (Q, K) and of the PV operands (P, V) store."""
        qk = DType.F8_143 if self.qk_dtype != "f16" and self.qk_cast == "early" else DType.F16
        pv = DType.F8_143 if self.pv_dtype != "f16" and self.pv_cast == "early" else DType.F16
        if fused_qkv and qk != pv:
            msg = (f"fused QKV stores Q, K and V as one tensor, so QK and PV casts must both be early or neither "
                   f"(qk_dtype={self.qk_dtype!r}, qk_cast={self.qk_cast!r}, pv_dtype={self.pv_dtype!r}, "
                   f"pv_cast={self.pv_cast!r}); make both FP8 products early, cast late, or use separate QKV")
            raise ModelError(msg, field="qk_cast" if qk == DType.F8_143 else "pv_cast",
                             value=self.qk_cast if qk == DType.F8_143 else self.pv_cast)
        return qk, pv

    def params(self) -> dict[str, str]:
        """The graph params the layout, schedule and check read (which product runs on the FP8 AMP)."""
        return {"qk_dtype": self.qk_dtype, "qk_cast": self.qk_cast, "pv_dtype": self.pv_dtype,
                "pv_cast": self.pv_cast}


def _single(name: str, params: dict, body) -> Graph:
    b = GraphBuilder(name)
    x = b.tensor("x", (params["tokens"] * params["batch"], params["width"]), DType.F16, Role.INPUT)
    out = body(b, x)
    b.mark_output(out)
    return b.build(params)


def mlp_block(*, tokens: int, width: int, hidden: int, batch: int = 1,
              weight_dtype: DType = DType.F8_143, early_casts: bool = False) -> Graph:
    """LayerNorm, FC1, GELU, FC2, residual add."""
    _positive(tokens=tokens, width=width, hidden=hidden, batch=batch)
    params = {"kind": "mlp", "tokens": tokens, "width": width, "hidden": hidden, "batch": batch}
    return _single("mlp", params, lambda b, x: add_mlp(b, x, tokens=tokens, width=width, hidden=hidden,
                                                      batch=batch, weight_dtype=weight_dtype,
                                                      early_casts=early_casts))


def attention_block(*, tokens: int, width: int, heads: int, batch: int = 1, fused_qkv: bool = False,
                    head_dim: int | None = None, weight_dtype: DType = DType.F8_143,
                    early_casts: bool = False, products: Products | None = None) -> Graph:
    """LayerNorm, Q/K/V (separate or fused), per-head scores, softmax, weighted sum, projection, residual."""
    _positive(tokens=tokens, width=width, batch=batch)
    hd = _heads(width, heads, head_dim)
    products = products or Products()
    params = {"kind": "attention", "tokens": tokens, "width": width, "heads": heads, "head_dim": hd,
              "batch": batch, "fused_qkv": fused_qkv, **products.params()}
    return _single("attention", params, lambda b, x: add_attention(
        b, x, tokens=tokens, width=width, heads=heads, batch=batch, fused_qkv=fused_qkv,
        weight_dtype=weight_dtype, early_casts=early_casts, products=products))


def encoder_layer(*, tokens: int, width: int, hidden: int, heads: int, batch: int = 1, fused_qkv: bool = False,
                  head_dim: int | None = None, weight_dtype: DType = DType.F8_143,
                  early_casts: bool = False, products: Products | None = None) -> Graph:
    """One transformer encoder layer: attention block then MLP block."""
    _positive(tokens=tokens, width=width, hidden=hidden, batch=batch)
    hd = _heads(width, heads, head_dim)
    products = products or Products()
    params = {"kind": "encoder", "tokens": tokens, "width": width, "hidden": hidden, "heads": heads,
              "head_dim": hd, "batch": batch, "fused_qkv": fused_qkv, **products.params()}

    def body(b: GraphBuilder, x: int) -> int:
        a = add_attention(b, x, tokens=tokens, width=width, heads=heads, batch=batch, fused_qkv=fused_qkv,
                          weight_dtype=weight_dtype, early_casts=early_casts, products=products)
        return add_mlp(b, a, tokens=tokens, width=width, hidden=hidden, batch=batch, weight_dtype=weight_dtype,
                       early_casts=early_casts)

    return _single("encoder", params, body)


def repeat(block: Graph, n: int, *, name: str = "layer") -> Graph:
    """``n`` instances of ``block`` chained output to input, kept symbolic.

    The result holds the block's ops once, tagged with block ``name``, and one
    ``repeats`` row (instances, carried tensors). Weights become per-instance.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        msg = f"blocks={n!r} must be a positive integer number of repeat instances"
        raise ModelError(msg, field="blocks", value=n)
    if block.repeats.height:
        msg = f"graph {block.name!r} already repeats; nest repeats by repeating the inner block with more instances"
        raise ModelError(msg, field="block", value=block.name)
    t = block.tensors
    carried_in = int(t.filter(pl.col("role") == "input")["tensor_id"].first())
    carried_out = int(t.filter(pl.col("role") == "output")["tensor_id"].first())
    tensors = t.with_columns(
        pl.lit(name).alias("block"),
        (pl.col("role") == "weight").alias("per_instance"),
    )
    ops = block.ops.with_columns(pl.lit(name).alias("block"))
    b = GraphBuilder(block.name)
    b.add_repeat(name, n, int(ops["op_id"].min()), int(ops["op_id"].max()), carried_in, carried_out)
    reps = b.build({}).repeats
    return Graph(name=block.name, ops=ops, tensors=tensors, repeats=reps, params={**block.params, "blocks": n})
