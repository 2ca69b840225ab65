"""The whole SigLIP So400m/14 vision model as ipu-stack's ViT benchmark runs it.

What the graph holds, and where each fact comes from (``osmarks/ipu-stack``):

- The image is 378 x 378 RGB, the usable region of the 384-pixel model's
  VALID 14 x 14 patch convolution: 27 x 27 = 729 tokens of width 1152, 16
  heads of 72, MLP width 4304 (``docs/SIGLIP_VIT_BENCHMARK.md``).
- Patch embedding: the host packs the pixels in patch order, ``[batch, 729,
  588]`` (588 = 14 x 14 x 3), outside the timed program; the convolution is the
  timed GEMM 588 -> 1152 with its bias (``docs/SIGLIP_VIT_BENCHMARK.md``,
  ``crates/ipu-tests/src/vit.rs``: a host input, then ``dense``). So there is
  no patch gather on the device: the patches are a graph input, and a graph
  input appears at event 0 on its first consumer's need layout
  (``toolkit.schedule``), i.e. the host writes the patch rows straight into
  the embedding GEMM's operand panels.
- Position embedding: an add of a learned ``[729, 1152]`` table, broadcast
  over the images (``vit.rs``: ``vit.position`` of shape ``[1, tokens,
  width]``; addition supports suffix broadcasting, ``SIGLIP_VIT_BENCHMARK.md``).
- ``blocks`` pre-norm encoder layers (LayerNorm, attention, residual,
  LayerNorm, MLP, residual), default 27, built once and repeated with distinct
  weights, the residual state carried (``vit.rs``; ``docs/VIT_REPEAT_2026_09_10.md``:
  "the embedding, position addition, final encoder normalization and MAP head
  run once"). Here: one symbolic region of the graph between a prologue and an
  epilogue.
- The final encoder LayerNorm, then the MAP head: a learned probe (one query
  token per image, the same vector for every image; ``vit.rs`` binds it as a
  ``[batch, 1, width]`` parameter, so it is a per-image input row here) with its
  own query projection, key and value projections of the 729 tokens, 16 heads
  of 72, the output projection, then LayerNorm and MLP 1152 -> 4304 -> 1152
  added to the attention result (the MAP attention itself has no residual and
  no LayerNorm before it; ``vit.rs``, the ``SIGLIP_VIT_BENCHMARK.md`` chart).
  The output is ``[batch, 1152]`` (ipu-stack keeps a singleton probe axis).
  With ``fused_qkv`` the encoder layers fuse Q, K and V into one GEMM and the
  MAP head K and V (its queries come from the probe), as ipu-stack does
  (``vit.rs``: 10 GEMMs fused, 13 separate).
- Precisions: F16 activations, residuals, biases and GELU; LayerNorm statistics
  in F32 (``SIGLIP_VIT_BENCHMARK.md``). The 27-layer hardware figures ran fused
  QKV and FP8 projection/MLP GEMMs at F143 scale -4, FP16 encoder QK, FP8
  encoder PV, FP16 MAP QK, parameters resident
  (``docs/FP8_QK_FULL_MODEL_2026_09_13.md``: 10,088,124 cycles at batch 1 with
  FP16 QK; 16,065,444 at batch 2 with FP8 encoder QK after an eight-step
  search; ``docs/GEMM_UTILIZATION_2026_09_13.md`` gives that build's per-layer
  kernel geometries, e.g. fused QKV R244/K128/C64). This graph's matmul
  weights follow ``weight_dtype`` (every linear, the embedding included); its
  attention products are FP16 (an FP8 PV or QK is not expressible here yet).
"""

from __future__ import annotations

from toolkit.errors import ModelError
from toolkit.graph.builders import Products, _heads, _positive, add_attention, add_layernorm, add_linear, add_mlp
from toolkit.graph.ir import DType, Graph, GraphBuilder, OpKind, Role

#: So400m/14 at 384 x 384 (``docs/SIGLIP_VIT_BENCHMARK.md``): the usable 378-pixel region, 14-pixel patches
SO400M_IMAGE, SO400M_PATCH, CHANNELS = 378, 14, 3


def vit_model(*, width: int, hidden: int, heads: int, image: int = SO400M_IMAGE, patch: int = SO400M_PATCH,
              channels: int = CHANNELS, batch: int = 1, blocks: int = 27, head_dim: int | None = None,
              fused_qkv: bool = False, weight_dtype: DType = DType.F8_143, early_casts: bool = True,
              products: Products | None = None) -> Graph:
    """Patch embedding, position embedding, ``blocks`` repeated encoder layers, final LayerNorm, MAP head.

    The encoder layers are one symbolic repeated region (``graph.repeats``:
    its first and last op, the residual carried in and out); the embedding
    is its prologue, the final LayerNorm and the MAP head its epilogue.
    """
    _positive(width=width, hidden=hidden, image=image, patch=patch, channels=channels, batch=batch, blocks=blocks)
    hd = _heads(width, heads, head_dim)
    if image % patch:
        msg = f"image={image} is not a multiple of patch={patch}; the patch convolution is VALID over whole patches"
        raise ModelError(msg, field="image", value=image)
    tokens = (image // patch) ** 2
    rows = tokens * batch
    patch_width = patch * patch * channels
    params = {"kind": "vit", "tokens": tokens, "width": width, "hidden": hidden, "heads": heads, "head_dim": hd,
              "batch": batch, "blocks": blocks, "fused_qkv": fused_qkv, "image": image, "patch": patch}
    products = products or Products()
    params.update(products.params())
    b = GraphBuilder("vit")
    pixels = b.tensor("patches", (rows, patch_width), DType.F16, Role.INPUT, host_layout=True)
    e = add_linear(b, pixels, "embed", rows, patch_width, width, weight_dtype)
    table = b.tensor("pos.table", (tokens, width), DType.F16, Role.WEIGHT)
    x = b.tensor("pos.out", (rows, width), DType.F16, Role.ACTIVATION)
    b.op("pos", OpKind.ADD, [e, table], x, rows=rows, cols=width)
    common = {"width": width, "heads": heads, "batch": batch, "weight_dtype": weight_dtype,
              "early_casts": early_casts}

    def layer(b: GraphBuilder, x: int) -> int:
        a = add_attention(b, x, tokens=tokens, fused_qkv=fused_qkv, products=products, **common)
        return add_mlp(b, a, tokens=tokens, hidden=hidden, **{k: v for k, v in common.items() if k != "heads"})

    x = b.repeat_region("layer", blocks, x, layer)
    x = add_layernorm(b, x, "final_ln", rows, width)
    probe = b.tensor("map.probe", (batch, width), DType.F16, Role.INPUT, host_layout=True)
    pooled = add_attention(b, probe, tokens=1, prefix="map.attn", layernorm=False, residual=False, context=x,
                           context_tokens=tokens, fused_qkv=fused_qkv, products=products, **common)
    out = add_mlp(b, pooled, tokens=1, hidden=hidden, prefix="map.mlp",
                  **{k: v for k, v in common.items() if k != "heads"})
    b.mark_output(out)
    return b.build(params)


__all__ = ["CHANNELS", "SO400M_IMAGE", "SO400M_PATCH", "vit_model"]
