"""Seeded test data and the float64 numpy reference forward pass of a graph.

Data (one seeded ``numpy.random.Generator``, tensors drawn in tensor-id order), as
``ipu-stack``'s hardware check draws it (``crates/ipu-tests/src/diagnostic.rs``,
``prepare_inputs``; docs/FP8.md: one explicit scale, -4, for both operands of
every FP8 GEMM):

- the graph input: Gaussian with standard deviation :data:`INPUT_STD` (0.25,
  the hardware check's host inputs), rounded to FP16 (as it is stored);
- matmul weights (``[inner, cols]``): Gaussian with standard deviation
  ``1 / sqrt(inner)`` (the hardware check's fan-in scaling), quantized to the
  tensor's dtype: FP8 F143 (or F152) codes with ``scale`` (value = q *
  2**scale), or FP16;
- LayerNorm gamma ``1 + 0.1 N(0, 1)``, beta and biases ``0.1 N(0, 1)``, FP16.
  (The hardware's benchmark graphs have neither; its ViT check uses gamma 1
  and biases ``1e-6 N(0, 1)``, ``vit.rs``. Ours keep every element distinct so
  a misplaced parameter shows.)

FP8 matmuls read their left operand cast to F143 at the activation scale,
which is the weights' ``scale`` unless the check is given another (the
hardware's GEMMs use one scale for both operands).

Weights of a repeated block are drawn once per instance. The reference uses
exactly the stored values (decoded codes), computes each op in float64 from
its inputs' stored values and rounds the op's result to its tensor's storage
type (FP16), as the program stores it, so a correct program differs only by
accumulation order (and its FP16 partials), a few FP16 ulps. Rounding every
stored value matters where an FP8 matmul casts its FP16 left operand to F143:
an unrounded reference would sit across F143 rounding boundaries from the
stored value and flip codes a correct program cannot match. It keeps every
tensor of every instance (as float32, far below FP16 resolution) so the check
can compare any operand.

Only what the check reads is kept (:class:`Reference`): the largest magnitude
of every op result (the tolerance scale) and the graph outputs. Results are
dropped after their last reader, so a pass holds the tensors live at one op,
not the whole model.

Op semantics shared with the simulated kernels (:mod:`toolkit.check.kernels`):
LayerNorm with ``eps = 1e-6`` over the last axis; GELU in its tanh form;
softmax over the key axis of ``scores * 1/sqrt(head_dim)`` (the attention
scale is applied inside softmax, not in the scores matmul); scores are
``Q K^T`` per (image, head); values ``P V``; linear ``x W + b``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from toolkit.graph import Graph
from toolkit.numerics import decode, encode, quantize

LN_EPS = 1e-6
#: FP8 matmuls read their left operand cast to F143 (at the activation scale the check is given)
ACTIVATION_FORMAT = "f143"
#: standard deviation of the graph input (ipu-stack's hardware check: host inputs are Gaussian x 0.25)
INPUT_STD = 0.25
GELU_C = float(np.sqrt(2.0 / np.pi))
FP8 = {"f8_143": "f143", "f8_152": "f152"}
#: every FP16 value, by bit pattern: an elementwise rule of FP16 operands is a table over these
F16_VALUES = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
_TABLES: dict[tuple[Callable, np.dtype], np.ndarray] = {}


def on_f16(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """``fn(x)`` for an elementwise ``fn``, as one lookup per element when ``x`` holds only FP16 values.

    Every value the program stores (FP16, F143) is an FP16 value, so a rule of
    one stored operand takes at most 65,536 inputs: ``fn`` runs once on each
    (per dtype, kept) and the operand indexes the table by bit pattern. The
    same numpy loops make the table, so the results are the same bits. Any
    other ``x`` (the exact model's unrounded values) runs ``fn(x)``.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        half = x.astype(np.float16)
        if not np.all((half == x) | np.isnan(x)):
            return fn(x)
    return _table(fn, x.dtype)[half.view(np.uint16)]


def _table(fn: Callable[[np.ndarray], np.ndarray], dtype: np.dtype) -> np.ndarray:
    key = (fn, np.dtype(dtype))
    if key not in _TABLES:
        with np.errstate(all="ignore"):
            _TABLES[key] = fn(F16_VALUES.astype(dtype))
    return _TABLES[key]


def f143_of_f16(half: np.ndarray, scale: int) -> np.ndarray:
    """FP16 values rounded to F143 at ``scale``, as float64: the stored-value reference's cast."""
    return _table(_cast(scale), np.dtype(np.float64))[half.view(np.uint16)]


def cast_activation(x: np.ndarray, scale: int) -> np.ndarray:
    """``x`` rounded to F143 at ``scale``, same dtype (float32 or float64); a table lookup for
    FP16 values (:func:`on_f16`); :mod:`toolkit.numerics` owns the rounding."""
    return on_f16(_cast(scale), x)


_CASTS: dict[int, Callable[[np.ndarray], np.ndarray]] = {}


def _cast(scale: int) -> Callable[[np.ndarray], np.ndarray]:
    """The cast to F143 at ``scale`` as one function per scale (the tables of :func:`on_f16` key on it)."""
    if scale not in _CASTS:
        _CASTS[scale] = lambda x: quantize(x, ACTIVATION_FORMAT, scale)
    return _CASTS[scale]


@dataclass(frozen=True, slots=True, kw_only=True)
class Data:
    """Stored values of every weight and input tensor, per instance, as ``[instances, G, R, C]``.

    ``raw`` holds the bytes as they sit in SRAM (FP8 codes or FP16), same
    shape with a trailing byte axis folded into the element dtype.
    """

    values: dict[int, np.ndarray]   # float64 values
    raw: dict[int, np.ndarray]      # uint8 codes (FP8) or float16 (FP16), [instances, G, R, C]


@dataclass(frozen=True, slots=True, kw_only=True)
class Reference:
    """What the check keeps of one reference forward pass."""

    values: dict[tuple[int, int], np.ndarray]   # float32 [G, R, C] of the graph outputs, per instance
    scales: dict[tuple[int, int], float]        # max |value| of every op result instance (empty for outputs_only)
    shapes: dict[int, tuple[int, int, int]]     # [G, R, C] of every tensor


def tensor3(shape: list[int]) -> tuple[int, int, int]:
    """The ``[groups, rows, cols]`` view of a tensor shape."""
    if len(shape) == 1:
        return (1, 1, int(shape[0]))
    if len(shape) == 2:
        return (1, int(shape[0]), int(shape[1]))
    return tuple(int(s) for s in shape[-3:])  # type: ignore[return-value]


def make_data(graph: Graph, seed: int, scale: int, input_std: float = INPUT_STD) -> Data:
    """Seeded input and weights of ``graph`` (see the module doc); ``input_std``: the input's spread."""
    rng = np.random.default_rng(seed)
    reps = dict(zip(graph.repeats["block"].to_list(), graph.repeats["instances"].to_list(), strict=True))
    weight_kind = _weight_kinds(graph)
    values: dict[int, np.ndarray] = {}
    raw: dict[int, np.ndarray] = {}
    for t in graph.tensors.iter_rows(named=True):
        if t["role"] not in ("input", "weight"):
            continue
        tid = t["tensor_id"]
        shape = tensor3(t["shape"])
        n = reps.get(t["block"], 1) if t["per_instance"] else 1
        gauss = rng.standard_normal((n, *shape))
        kind = weight_kind.get(tid, "input")
        if kind == "matrix":
            gauss = gauss / np.sqrt(shape[1])
        elif kind == "gamma":
            gauss = 1.0 + 0.1 * gauss
        elif kind in ("beta", "bias"):
            gauss = 0.1 * gauss
        else:
            gauss = input_std * gauss
        if t["dtype"] in FP8:
            codes = encode(gauss, FP8[t["dtype"]], scale)
            raw[tid] = codes
            values[tid] = decode(codes, FP8[t["dtype"]], scale, dtype=np.float64)
        else:
            half = gauss.astype(np.float16)
            raw[tid] = half
            values[tid] = half.astype(np.float64)
    return Data(values=values, raw=raw)


def _weight_kinds(graph: Graph) -> dict[int, str]:
    """matrix | bias | gamma | beta for every weight tensor, from the op that reads it."""
    roles = dict(zip(graph.tensors["tensor_id"].to_list(), graph.tensors["role"].to_list(), strict=True))
    out: dict[int, str] = {}
    for op in graph.ops.iter_rows(named=True):
        w = [t for t in op["inputs"] if roles[t] == "weight"]
        if op["kind"] == "matmul" and len(w) >= 1:
            out[w[0]] = "matrix"
            for b in w[1:]:
                out[b] = "bias"
        elif op["kind"] == "layernorm" and len(w) == 2:
            out[w[0]], out[w[1]] = "gamma", "beta"
        else:
            for b in w:
                out[b] = "bias"
    return out


# -- the reference forward pass ------------------------------------------------
def run_reference(graph: Graph, data: Data, *, scale: int, stored: bool = True,
                  outputs_only: bool = False) -> Reference:
    """One forward pass over every instance: what the check keeps of it (:class:`Reference`).

    ``stored`` (the default) is the op-by-op semantics of the program, and the
    host reference of ``ipu-stack``'s hardware check (``diagnostic.rs``,
    ``evaluate``: every result rounded to its storage precision, both operands
    of an FP8 GEMM rounded to F143 at the GEMM's scale, arithmetic in FP32;
    here float64): every result rounded to its storage type, FP8 matmuls
    reading F143 casts (at ``scale``) of their left operand. ``stored=False`` is
    the exact model (the hardware's ``--reference-fp32``): float64 from the
    stored weights and input, nothing else rounded. ``outputs_only`` keeps just
    the graph outputs (no scales).
    """
    shapes = {t: tensor3(s) for t, s in zip(graph.tensors["tensor_id"].to_list(),
                                            graph.tensors["shape"].to_list(), strict=True)}
    roles = dict(zip(graph.tensors["tensor_id"].to_list(), graph.tensors["role"].to_list(), strict=True))
    p = graph.params
    reps = graph.repeats
    n_inst = int(reps["instances"].max()) if reps.height else 1
    carried = (int(reps["carried_in"][0]), int(reps["carried_out"][0])) if reps.height else None
    ops = list(graph.ops.iter_rows(named=True))
    dtypes = dict(zip(graph.tensors["tensor_id"].to_list(), graph.tensors["dtype"].to_list(), strict=True))
    fp8 = {t for t, d in dtypes.items() if d in FP8}
    # results die after the last op of the instance that reads them (the carried value lives on into the next)
    last_read = {t: k for k, op in enumerate(ops) for t in op["inputs"]}
    keep = {carried[1]} if carried is not None else set()
    if reps.height:   # prologue results the repeated region reads stay for all its instances
        first_op, last_op = int(reps["first_op"][0]), int(reps["last_op"][0])
        made = {op["output"] for op in ops[:first_op]}
        keep |= {t for op in ops[first_op:last_op + 1] for t in op["inputs"] if t in made and t != carried[0]}
    cur: dict[int, np.ndarray] = {t: v[0] for t, v in data.values.items() if roles[t] == "input"}
    values: dict[tuple[int, int], np.ndarray] = {}
    scales: dict[tuple[int, int], float] = {}
    # the ops before the repeated region run once as instance 0, its ops once per instance, the ops after it
    # once as the last instance (the instance whose result they read)
    first, last = (int(reps["first_op"][0]), int(reps["last_op"][0])) if reps.height else (0, len(ops) - 1)
    runs = [(0, range(first))] + [(i, range(first, last + 1)) for i in range(n_inst)] + [
        (n_inst - 1, range(last + 1, len(ops)))]
    for inst, ks in runs:
        for t, v in data.values.items():
            if roles[t] == "weight":
                cur[t] = v[min(inst, v.shape[0] - 1)]
        for k in ks:
            op = ops[k]
            out = op["output"]
            y = _forward(op, cur, roles, shapes, p, fp8 if stored else frozenset(), scale, stored)
            if stored and dtypes[out] == "f16":   # as the program stores it (in place: no second large buffer)
                np.copyto(y, y.astype(np.float16))
            elif stored and dtypes[out] in FP8:   # an early cast: F143 codes for FP8 matmuls, rounded once from
                y = quantize(y, ACTIVATION_FORMAT, scale)   # the result (as the kernel and the hardware's host do)
            cur[out] = y
            if not outputs_only:
                scales[(out, inst)] = float(max(y.max(), -y.min()))
            if roles[out] == "output":
                values[(out, inst)] = y.astype(np.float32)
            for t in {*op["inputs"], out}:
                if roles[t] in ("activation", "output") and last_read.get(t, -1) <= k and t not in keep:
                    del cur[t]
        if carried is not None and ks and ks[-1] == last and inst < n_inst - 1:
            cur[carried[0]] = cur.pop(carried[1])
    return Reference(values=values, scales=scales, shapes=shapes)


def _forward(op: dict, cur: dict[int, np.ndarray], roles: dict, shapes: dict, p: dict,
             fp8: set[int] = frozenset(), scale: int = 0, products: bool = False) -> np.ndarray:
    """One op from the values in ``cur``; ``fp8``: the FP8 weights (their matmuls cast the left operand),
    ``products``: cast the operands of FP8 attention products (graph params ``qk_dtype`` / ``pv_dtype``)."""
    ins = list(op["inputs"])
    acts = [cur[t][0] for t in ins if roles[t] != "weight"]
    wts = [cur[t][0] for t in ins if roles[t] == "weight"]
    kind = op["kind"]
    name = op["name"]
    if op["rule"] == "linear":
        w_id = next(t for t in ins if roles[t] == "weight")
        a = acts[0]
        if w_id in fp8:   # the FP8 AMP reads F143 inputs cast from the FP16 value the program stores
            a = f143_of_f16(a.astype(np.float16), scale)
        y = a @ wts[0] + (wts[1][0] if len(wts) > 1 else 0.0)
        return y[None]
    if op["rule"] == "scores":
        q, k = _heads(op, cur, p, ("q", "k"))
        if products and p.get("qk_dtype", "f16") != "f16":   # an FP8 product: both operands cast to F143
            q, k = f143_of_f16(q.astype(np.float16), scale), f143_of_f16(k.astype(np.float16), scale)
        return np.matmul(q, np.swapaxes(k, 2, 3)).reshape(-1, q.shape[2], k.shape[2])
    if op["rule"] == "values":
        probs = cur[ins[0]]
        (v,) = _heads(op, cur, p, ("v",))
        if products and p.get("pv_dtype", "f16") != "f16":
            probs, v = f143_of_f16(probs.astype(np.float16), scale), f143_of_f16(v.astype(np.float16), scale)
        b, h, t, d = v.shape
        q = int(op["rows"])   # query rows per image (keys: t)
        o = np.matmul(probs.reshape(b, h, q, t), v)
        return o.transpose(0, 2, 1, 3).reshape(1, b * q, h * d)
    if kind == "attention":   # streaming attention (graph.streaming): the attention it computes, measured against
        q, k, v = _heads(op, cur, p, ("q", "k", "v"))   # the materialized program's host reference (``products``,
        s = np.matmul(q, np.swapaxes(k, 2, 3))           # the stored semantics: scores and probabilities FP16)
        s = s.astype(np.float16).astype(np.float64) if products else s
        probs = softmax(s, 1.0 / np.sqrt(float(p["head_dim"])))
        probs = probs.astype(np.float16).astype(np.float64) if products else probs
        b, h, t, d = q.shape
        return np.matmul(probs, v).transpose(0, 2, 1, 3).reshape(1, b * t, h * d)
    if kind == "layernorm":
        return layernorm(acts[0], wts[0][0], wts[1][0])[None]
    if kind == "gelu":
        return on_f16(gelu, cur[ins[0]])
    if kind == "softmax":
        return softmax(cur[ins[0]], 1.0 / np.sqrt(float(p["head_dim"])))
    if kind == "add":   # a weight operand is a per-token table (position embedding) broadcast over the images
        other = acts[1] if len(acts) > 1 else np.tile(wts[0], (acts[0].shape[0] // wts[0].shape[0], 1))
        return (acts[0] + other)[None]
    msg = f"the functional check has no reference for op {name!r} of kind {kind!r}"
    raise NotImplementedError(msg)


def _heads(op: dict, cur: dict, p: dict, which: tuple[str, ...]) -> list[np.ndarray]:
    """Q, K or V of an attention op as ``[batch, heads, tokens, head_dim]`` (fused QKV sliced by column)."""
    batch, heads, hd = int(p["batch"]), int(p["heads"]), int(p["head_dim"])
    width = heads * hd
    ins = list(op["inputs"])
    out = []
    for w in which:
        if op["rule"] == "attention":   # streaming attention reads Q, K, V as three tensors
            src = ins[min("qkv".index(w), len(ins) - 1)]   # fused: QKV once, or Q then KV
        else:
            src = (ins[0] if w == "q" else ins[-1]) if op["rule"] == "scores" else ins[1]
        x = cur[src][0]
        held = "qkv"[3 - x.shape[1] // width:]   # a fused tensor's projections in Q, K, V order (QKV, or KV)
        off = held.index(w) * width if len(held) > 1 else 0
        x = x[:, off:off + width].reshape(batch, -1, heads, hd).transpose(0, 2, 1, 3)   # Q and K rows may differ
        out.append(x)
    return out


def layernorm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + LN_EPS) * gamma + beta


def gelu(x: np.ndarray) -> np.ndarray:
    """``0.5 x (1 + tanh(c (x + 0.044715 x^3)))``, evaluated in that order in two buffers."""
    t = x**3
    t *= 0.044715
    t += x
    t *= GELU_C
    np.tanh(t, out=t)
    t += 1.0
    y = 0.5 * x
    y *= t
    return y


def softmax(x: np.ndarray, scale: float) -> np.ndarray:
    """Softmax of ``x * scale`` over the last axis, in one buffer."""
    z = x * scale
    z -= z.max(axis=-1, keepdims=True)
    np.exp(z, out=z)
    z /= z.sum(axis=-1, keepdims=True)
    return z
