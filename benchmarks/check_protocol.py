"""Why the check's error differs from the hardware's: each protocol choice switched on its own (bench_check).

A numpy model of an MLP block repeated ``blocks`` times, with the check's own
rules (:mod:`toolkit.check.kernels` for the program, :mod:`toolkit.check.reference`
for the references): ``program`` is what the compiled program computes when no
op is inner-split (one K run per output, as mlp-small-repeat's plans), ``host``
the op-by-op stored-value reference (the hardware's host reference), ``exact``
the float64 model. It runs both our mlp-small-repeat graph (LayerNorm, biases,
residual) and the hardware's benchmark graph (ipu-stack ``siglip-mlp-benchmark``:
GEMM, GELU, GEMM; no biases, LayerNorm or residual), so each row changes one
choice: the reference, the early casts' rounding, the FP8 AMP's FP16 sums, the
input spread, the activation scale, the graph. The real check of our graph
gives the same magnitudes (bench_check's own rows); the hardware graph cannot
be compiled until its preset exists (its input feeds fc1 directly).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from toolkit.check import kernels as K
from toolkit.check import reference as R
from toolkit.numerics import decode, encode, quantize


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One protocol: the graph and each numerics choice."""

    ours: bool = True             # our graph (LayerNorm, biases, residual) or the hardware's bare GEMM-GELU-GEMM
    input_std: float = 0.25
    act_scale: int = -4           # F143 scale of the activation casts (the weights' is -4)
    reference: str = "host"       # host (stored values) | exact
    fp16_sums: bool = True        # the FP8 AMP's FP16 running sum per 32-deep panel (else FP32)
    program_via_f16: bool = False  # the program's early casts round FP16 results (F16 -> F143) rather than FP32
    reference_via_f16: bool = False  # the reference's early casts round FP16 results (the check before the fix)


def _f16(y: np.ndarray) -> np.ndarray:
    return y.astype(np.float16).astype(np.float64)


def _data(seed: int, tokens: int, width: int, hidden: int, blocks: int, std: float, ours: bool):
    rng = np.random.default_rng(seed)
    x = _f16(std * rng.standard_normal((tokens, width)))
    layers = []
    for _ in range(blocks):
        w1 = decode(encode(rng.standard_normal((width, hidden)) / np.sqrt(width), "f143", -4), "f143", -4,
                    dtype=np.float64)
        w2 = decode(encode(rng.standard_normal((hidden, width)) / np.sqrt(hidden), "f143", -4), "f143", -4,
                    dtype=np.float64)
        gamma = _f16(1 + 0.1 * rng.standard_normal(width))
        beta, b1, b2 = (_f16(0.1 * rng.standard_normal(n)) if ours else np.zeros(n) for n in (width, hidden, width))
        layers.append((w1, w2, gamma, beta, b1, b2))
    return x, layers


def _run(x, layers, mode: str, case: Case) -> np.ndarray:
    ctx = K.KernelContext(head_dim=1, partials="planned" if case.fp16_sums else "f32", scale=case.act_scale)
    via = case.program_via_f16 if mode == "program" else case.reference_via_f16

    def store(v):   # an early cast: F143 at the activation scale (exact: nothing rounded)
        if mode == "exact":
            return v
        return quantize(_f16(v) if via else v, "f143", case.act_scale).astype(np.float64)

    def linear(h, w, b, codes):
        if mode == "exact":
            return h @ w + b
        if mode == "host":
            a = h if codes else quantize(h, "f143", case.act_scale).astype(np.float64)
            return _f16(a @ w + b)
        rule = "linear_f8_codes" if codes else "linear_f8"
        y = K.RULES[rule]([h.astype(np.float32)[None, None]],
                          [w.astype(np.float32)[None, None], b.astype(np.float32)[None, None, None]], ctx)
        return _f16(y[0, 0].astype(np.float64))

    for w1, w2, gamma, beta, b1, b2 in layers:
        h = x
        if case.ours:
            if mode == "program":
                f32 = [v.astype(np.float32)[None, None, None] for v in (gamma, beta)]
                h = K.layernorm([x.astype(np.float32)[None, None]], f32, ctx)[0, 0].astype(np.float64)
            else:
                h = R.layernorm(x, gamma, beta)
            h = store(h)
        a = linear(h, w1, b1, codes=case.ours)
        g = K._gelu(a.astype(np.float32)).astype(np.float64) if mode == "program" else R.gelu(a)
        y = linear(store(g), w2, b2, codes=True)
        x = x + y if case.ours else y
        if mode != "exact":
            x = _f16(x)
    return x


def error(case: Case, seeds=range(4), tokens: int = 129, width: int = 128, hidden: int = 256,
          blocks: int = 3) -> tuple[float, float]:
    """(mean, max) over ``seeds`` of the largest |program - reference| of the last block's output."""
    errs = []
    for s in seeds:
        x, layers = _data(s, tokens, width, hidden, blocks, case.input_std, case.ours)
        errs.append(float(np.abs(_run(x, layers, "program", case) - _run(x, layers, case.reference, case)).max()))
    return float(np.mean(errs)), float(np.max(errs))


#: (label, case): from the check as it was to the hardware's protocol, one choice at a time
STEPS: tuple[tuple[str, Case], ...] = (
    ("old check: our graph, input std 1, activation scale 0, exact model, FP32 sums",
     Case(input_std=1.0, act_scale=0, reference="exact", fp16_sums=False)),
    ("... against the old op-by-op reference (early casts rounded F16 -> F143)",
     Case(input_std=1.0, act_scale=0, fp16_sums=False, reference_via_f16=True)),
    ("... early casts rounded once, as the kernels and the hardware's host reference do",
     Case(input_std=1.0, act_scale=0, fp16_sums=False)),
    ("... + the FP8 AMP's FP16 sums per 32-deep panel", Case(input_std=1.0, act_scale=0)),
    ("... + input std 0.25", Case(act_scale=0)),
    ("... + activation scale -4 (the new check on our graph)", Case()),
    ("hardware graph (GEMM-GELU-GEMM, no bias/LayerNorm/residual), the new check's protocol", Case(ours=False)),
    ("  hardware graph, exact model", Case(ours=False, reference="exact")),
    ("  hardware graph, activation scale 0", Case(ours=False, act_scale=0)),
    ("  hardware graph, input std 1", Case(ours=False, input_std=1.0)),
    ("  hardware graph, FP32 sums", Case(ours=False, fp16_sums=False)),
    ("  hardware graph, early casts via FP16 in the program", Case(ours=False, program_via_f16=True)),
)


#: the hardware's MLP checks on its own graph (GEMM-GELU-GEMM), at each preset's shape: (rows, width, hidden, blocks)
HARDWARE_MLPS = {
    "mlp-small-repeat": (129, 128, 256, 3),
    "mlp-single-b1": (729, 1152, 4304, 1),
    "mlp-single-b4": (4 * 729, 1152, 4304, 1),
    "mlp-b2-n3": (2 * 729, 1152, 4304, 3),
}


def hardware_graph_rows(seeds=range(2)) -> str:
    """The new check's protocol on the hardware's own MLP graph at each preset's shape, beside the hardware's
    figure and the largest output magnitude (the hardware's programs inner-split their GEMMs; this model sums
    each output in one K run, so it is a lower bound on the FP16 partials' share)."""
    from toolkit.check.hardware import hardware_error
    rows = ["| workload | hardware graph shape | max abs error (mean) | worst seed | max abs output | hardware | "
            "ours / hardware |", "|---|---|---:|---:|---:|---:|---:|"]
    case = Case(ours=False)
    for name, (tokens, width, hidden, blocks) in HARDWARE_MLPS.items():
        errs, tops = [], []
        for s in seeds:
            x, layers = _data(s, tokens, width, hidden, blocks, case.input_std, False)
            host = _run(x, layers, "host", case)
            errs.append(float(np.abs(_run(x, layers, "program", case) - host).max()))
            tops.append(float(np.abs(host).max()))
        hw = hardware_error(name)["max_abs_error"]
        rows.append(f"| {name} | {tokens} x {width} -> {hidden}, {blocks} block(s) | {np.mean(errs):.6f} | "
                    f"{max(errs):.6f} | {max(tops):.3f} | {hw:g} | {np.mean(errs) / hw:.2f} |")
    return "\n".join(rows)


def table() -> str:
    """The decomposition as markdown rows (label, mean and max over 4 seeds)."""
    rows = ["| protocol | max abs error (mean of 4 seeds) | worst seed |", "|---|---:|---:|"]
    for label, case in STEPS:
        mean, worst = error(case)
        rows.append(f"| {label} | {mean:.6f} | {worst:.6f} |")
    return "\n".join(rows)


#: the hardware's projected-attention checks (FP8_ATTENTION_AND_HOST_IO_2026_09_11.md): products, hardware figure
HARDWARE_ATTENTION = (("FP16 products", "f16", "f16", 0.000061), ("FP8 QK", "f8", "f16", 0.000145),
                      ("FP8 PV", "f16", "f8", 0.001511), ("FP8 QK and PV", "f8", "f8", 0.001562))


def _attention(x, w, heads: int, qk: str, pv: str, mode: str, cast_products: bool) -> np.ndarray:
    """Projected attention (fused QKV, no LayerNorm, bias, output projection or residual): the hardware's
    benchmark graph. ``mode``: program (the check's kernel rules) or host (float64, stored values; FP8 product
    operands cast only when ``cast_products``)."""
    ctx = K.KernelContext(head_dim=1, partials="planned", scale=-4)
    tokens, width = x.shape[0], x.shape[1]
    hd = width // heads
    if mode == "program":
        qkv = K.RULES["linear_f8"]([x.astype(np.float32)[None, None]], [w.astype(np.float32)[None, None]], ctx)
        qkv = _f16(qkv[0, 0].astype(np.float64))
    else:
        qkv = _f16(quantize(x, "f143", -4).astype(np.float64) @ w)
    q, k, v = (qkv[:, i * width:(i + 1) * width].reshape(tokens, heads, hd).transpose(1, 0, 2) for i in range(3))
    rule = {"f8": "_f8", "f16": ""}
    if mode == "program":
        s = K.RULES["scores" + rule[qk]]([q.astype(np.float32)[:, None], k.astype(np.float32)[:, None]], [], ctx)
        s = _f16(s[:, 0].astype(np.float64))
        p = _f16(K.softmax([s.astype(np.float32)], [], K.KernelContext(head_dim=hd, partials="planned"))
                 .astype(np.float64))
        o = K.RULES["values" + rule[pv]]([p.astype(np.float32)[:, None], v.astype(np.float32)[:, None]], [], ctx)
        return _f16(o[:, 0].astype(np.float64))
    def cast(a: np.ndarray) -> np.ndarray:
        return quantize(a, "f143", -4).astype(np.float64)

    qq, kk = (cast(q), cast(k)) if qk == "f8" and cast_products else (q, k)
    s = _f16(qq @ kk.transpose(0, 2, 1))
    p = _f16(R.softmax(s, 1.0 / np.sqrt(hd)))
    pp, vv = (cast(p), cast(v)) if pv == "f8" and cast_products else (p, v)
    return _f16(pp @ vv)


def attention_rows(seed: int = 0, tokens: int = 729, width: int = 1152, heads: int = 16) -> str:
    """Projected attention (the hardware's graph) with FP16 or FP8 products: our error against the host reference
    with and without the products' operand casts (the hardware's 2026-09-11 reference had none), beside the
    hardware's figures."""
    rng = np.random.default_rng(seed)
    x = _f16(0.25 * rng.standard_normal((tokens, width)))
    w = decode(encode(rng.standard_normal((width, 3 * width)) / np.sqrt(width), "f143", -4), "f143", -4,
               dtype=np.float64)
    rows = ["| products | max abs error, reference casts the products' operands (our check) | reference without "
            "product casts (the hardware's) | max abs output | hardware |", "|---|---:|---:|---:|---:|"]
    for label, qk, pv, hw in HARDWARE_ATTENTION:
        prog = _attention(x, w, heads, qk, pv, "program", True)
        ours = float(np.abs(prog - _attention(x, w, heads, qk, pv, "host", True)).max())
        theirs = float(np.abs(prog - _attention(x, w, heads, qk, pv, "host", False)).max())
        rows.append(f"| {label} | {ours:.6f} | {theirs:.6f} | {float(np.abs(prog).max()):.4f} | {hw:g} |")
    return "\n".join(rows)
