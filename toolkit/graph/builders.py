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

Graph switches (builder parameters, never copied builders): ``biases`` (every
linear adds a bias, or has no bias tensor), ``layernorm`` (a block normalizes
its input first, or its first linears read the block input directly),
``residual`` (the block output is input + result, or the result itself),
``projection`` (attention's output projection, or the heads' concatenated
values are the output) and ``host_layout`` (the graph input is written by the
host straight into its first consumer's operand layout, so nothing gathers it).

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
               weight_dtype: DType, bias: bool = True, out: DType = DType.F16) -> int:
    """``x @ weight (+ bias)``: inputs are the activation, the weight and (when ``bias``) the FP16 bias; ``out``
    is what the result is stored as (F143 when an FP8 attention product casts early at this producer)."""
    w = b.tensor(f"{prefix}.weight", (inner, cols), weight_dtype, Role.WEIGHT)
    ins = [x, w]
    if bias:
        ins.append(b.tensor(f"{prefix}.bias", (cols,), DType.F16, Role.WEIGHT))
    y = b.tensor(f"{prefix}.out", (rows, cols), out, Role.ACTIVATION)
    b.op(prefix, OpKind.MATMUL, ins, y, rows=rows, cols=cols, inner=inner, rule=Rule.LINEAR)
    return y


def _residual(b: GraphBuilder, x: int, y: int, prefix: str, rows: int, width: int, residual: bool) -> int:
    """The block output: ``x + y`` (the residual add) or ``y`` itself."""
    if not residual:
        return y
    out = b.tensor(f"{prefix}.residual.out", (rows, width), DType.F16, Role.ACTIVATION)
    b.op(f"{prefix}.residual", OpKind.ADD, [x, y], out, rows=rows, cols=width)
    return out


def add_mlp(b: GraphBuilder, x: int, *, tokens: int, width: int, hidden: int, batch: int,
            weight_dtype: DType = DType.F8_143, prefix: str = "mlp", early_casts: bool = True, biases: bool = True,
            layernorm: bool = True, residual: bool = True) -> int:
    rows = tokens * batch
    fed = _fed(weight_dtype, early_casts)
    h = add_layernorm(b, x, f"{prefix}.ln", rows, width, fed) if layernorm else x
    a = add_linear(b, h, f"{prefix}.fc1", rows, width, hidden, weight_dtype, biases)
    g = b.tensor(f"{prefix}.gelu.out", (rows, hidden), fed, Role.ACTIVATION)
    b.op(f"{prefix}.gelu", OpKind.GELU, [a], g, rows=rows, cols=hidden)
    y = add_linear(b, g, f"{prefix}.fc2", rows, hidden, width, weight_dtype, biases)
    return _residual(b, x, y, prefix, rows, width, residual)


def add_attention(b: GraphBuilder, x: int, *, tokens: int, width: int, heads: int, batch: int,
                  fused_qkv: bool = False, weight_dtype: DType = DType.F8_143, prefix: str = "attn",
                  early_casts: bool = True, biases: bool = True, layernorm: bool = True, residual: bool = True,
                  projection: bool = True, context: int | None = None, context_tokens: int | None = None,
                  products: Products | None = None) -> int:
    """Self-attention over ``x`` (``tokens`` per image), or, given ``context`` (``context_tokens`` rows per
    image), ``x``'s queries attending over ``context``'s keys and values (a pooling head; ``fused_qkv`` then
    fuses only K and V). ``layernorm`` / ``residual``: the pre-norm and the residual add around the block;
    ``biases``: the projections' biases; ``projection``: the output projection after the heads; ``products``:
    the QK and PV products' operand precision and cast placement."""
    rows = tokens * batch
    head_dim = width // heads
    groups = batch * heads
    keys = tokens if context is None else context_tokens
    qk_in, pv_in = (products or Products()).stored(fused_qkv)
    h = add_layernorm(b, x, f"{prefix}.ln", rows, width, _fed(weight_dtype, early_casts)) if layernorm else x
    if fused_qkv and context is None:
        qkv = add_linear(b, h, f"{prefix}.qkv", rows, width, 3 * width, weight_dtype, biases, qk_in)
        q = k = v = qkv
    elif fused_qkv:   # the context's K and V in one GEMM (K then V), the queries' own projection
        q = add_linear(b, h, f"{prefix}.q", rows, width, width, weight_dtype, biases, qk_in)
        k = v = add_linear(b, context, f"{prefix}.kv", keys * batch, width, 2 * width, weight_dtype, biases, qk_in)
    else:
        kv, kv_rows = (h, rows) if context is None else (context, keys * batch)
        q = add_linear(b, h, f"{prefix}.q", rows, width, width, weight_dtype, biases, qk_in)
        k = add_linear(b, kv, f"{prefix}.k", kv_rows, width, width, weight_dtype, biases, qk_in)
        v = add_linear(b, kv, f"{prefix}.v", kv_rows, width, width, weight_dtype, biases, pv_in)
    s = b.tensor(f"{prefix}.scores.out", (groups, tokens, keys), DType.F16, Role.ACTIVATION)
    b.op(f"{prefix}.scores", OpKind.MATMUL, [q] if q == k else [q, k], s, rows=tokens, cols=keys,
         inner=head_dim, groups=groups, rule=Rule.SCORES)   # inputs: Q then K (one fused QKV tensor: both)
    p = b.tensor(f"{prefix}.softmax.out", (groups, tokens, keys), pv_in, Role.ACTIVATION)
    b.op(f"{prefix}.softmax", OpKind.SOFTMAX, [s], p, rows=tokens, cols=keys, groups=groups)
    o = b.tensor(f"{prefix}.values.out", (rows, width), DType.F16, Role.ACTIVATION)
    b.op(f"{prefix}.values", OpKind.MATMUL, [p, v], o, rows=tokens, cols=head_dim, inner=keys, groups=groups,
         rule=Rule.VALUES)
    y = add_linear(b, o, f"{prefix}.proj", rows, width, width, weight_dtype, biases) if projection else o
    return _residual(b, x, y, prefix, rows, width, residual)


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
            early, kept = ("V", "Q and K stay") if pv == DType.F8_143 else ("Q and K", "V stays")
            msg = (f"fused QKV stores Q, K and V as one tensor, so it cannot cast {early} early while {kept} FP16 "
                   f"(qk_dtype={self.qk_dtype!r}, qk_cast={self.qk_cast!r}, pv_dtype={self.pv_dtype!r}, "
                   f"pv_cast={self.pv_cast!r}): the fused projection has one output tensor and a tensor has one "
                   f"dtype, so its GEMM cannot store some columns F143 and the others FP16 (a per-column-range "
                   f"cast in the GEMM's epilogue is not modelled); cast the FP8 product late (it casts the FP16 "
                   f"panels it receives), make both products FP8 with early casts, or use separate QKV "
                   f"(fused_qkv=False)")
            raise ModelError(msg, field="qk_cast" if qk == DType.F8_143 else "pv_cast",
                             value=self.qk_cast if qk == DType.F8_143 else self.pv_cast)
        return qk, pv

    def params(self) -> dict[str, str]:
        """The graph params the layout, schedule and check read (which product runs on the FP8 AMP)."""
        return {"qk_dtype": self.qk_dtype, "qk_cast": self.qk_cast, "pv_dtype": self.pv_dtype,
                "pv_cast": self.pv_cast}


def _single(name: str, params: dict, body, host_layout: bool = False) -> Graph:
    b = GraphBuilder(name)
    x = b.tensor("x", (params["tokens"] * params["batch"], params["width"]), DType.F16, Role.INPUT,
                 host_layout=host_layout)
    out = body(b, x)
    b.mark_output(out)
    return b.build({**params, "host_layout": host_layout})


def mlp_block(*, tokens: int, width: int, hidden: int, batch: int = 1,
              weight_dtype: DType = DType.F8_143, early_casts: bool = False, biases: bool = True,
              layernorm: bool = True, residual: bool = True, host_layout: bool = False) -> Graph:
    """LayerNorm, FC1, GELU, FC2, residual add (LayerNorm, biases and residual each switchable)."""
    _positive(tokens=tokens, width=width, hidden=hidden, batch=batch)
    params = {"kind": "mlp", "tokens": tokens, "width": width, "hidden": hidden, "batch": batch, "biases": biases,
              "layernorm": layernorm, "residual": residual}
    return _single("mlp", params, lambda b, x: add_mlp(
        b, x, tokens=tokens, width=width, hidden=hidden, batch=batch, weight_dtype=weight_dtype,
        early_casts=early_casts, biases=biases, layernorm=layernorm, residual=residual), host_layout)


def attention_block(*, tokens: int, width: int, heads: int, batch: int = 1, fused_qkv: bool = False,
                    head_dim: int | None = None, weight_dtype: DType = DType.F8_143,
                    early_casts: bool = False, biases: bool = True, layernorm: bool = True, residual: bool = True,
                    projection: bool = True, host_layout: bool = False, products: Products | None = None) -> Graph:
    """LayerNorm, Q/K/V (separate or fused), per-head scores, softmax, weighted sum, projection, residual
    (LayerNorm, biases, output projection and residual each switchable; ``products``: the QK/PV precision)."""
    _positive(tokens=tokens, width=width, batch=batch)
    hd = _heads(width, heads, head_dim)
    products = products or Products()
    params = {"kind": "attention", "tokens": tokens, "width": width, "heads": heads, "head_dim": hd,
              "batch": batch, "fused_qkv": fused_qkv, "biases": biases, "layernorm": layernorm,
              "residual": residual, "projection": projection, **products.params()}
    return _single("attention", params, lambda b, x: add_attention(
        b, x, tokens=tokens, width=width, heads=heads, batch=batch, fused_qkv=fused_qkv,
        weight_dtype=weight_dtype, early_casts=early_casts, biases=biases, layernorm=layernorm, residual=residual,
        projection=projection, products=products), host_layout)


def encoder_layer(*, tokens: int, width: int, hidden: int, heads: int, batch: int = 1, fused_qkv: bool = False,
                  head_dim: int | None = None, weight_dtype: DType = DType.F8_143,
                  early_casts: bool = False, biases: bool = True, layernorm: bool = True, residual: bool = True,
                  projection: bool = True, host_layout: bool = False, products: Products | None = None) -> Graph:
    """One transformer encoder layer: attention block then MLP block (the switches apply to both blocks)."""
    _positive(tokens=tokens, width=width, hidden=hidden, batch=batch)
    hd = _heads(width, heads, head_dim)
    products = products or Products()
    params = {"kind": "encoder", "tokens": tokens, "width": width, "hidden": hidden, "heads": heads,
              "head_dim": hd, "batch": batch, "fused_qkv": fused_qkv, "biases": biases, "layernorm": layernorm,
              "residual": residual, "projection": projection, **products.params()}
    common = {"tokens": tokens, "width": width, "batch": batch, "weight_dtype": weight_dtype,
              "early_casts": early_casts, "biases": biases, "layernorm": layernorm, "residual": residual}

    def body(b: GraphBuilder, x: int) -> int:
        a = add_attention(b, x, heads=heads, fused_qkv=fused_qkv, projection=projection, products=products,
                          **common)
        return add_mlp(b, a, hidden=hidden, **common)

    return _single("encoder", params, body, host_layout)


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
