"""aten's fused inference kernels for ``nn.MultiheadAttention`` and
``nn.TransformerEncoderLayer`` (their "fast path": eval mode, no grad, batch first), as the
ops they fuse: projections, attention (as matmuls and a softmax), layer norms, the
feed-forward.
Run as aten kernels they would be opaque calls in a compiled graph (an encoder's whole
layer, nothing fused around it); decomposed, they compile like the training path.

Masks follow the kernels' convention: a boolean mask marks the positions NOT attended
(``key_padding_mask``'s), a float mask is added to the scores; ``mask_type`` says its shape:
0 a [L, S] attention mask, 1 a [B, S] key padding mask, 2 a merged [B, H, L, S] one.
"""

from __future__ import annotations

import math

import torch

from ember_primops.decompositions._registry import register_decomposition

aten = torch.ops.aten


def _linear(x, weight, bias):
    """``x @ weight.T + bias`` over x's last dim, through the registered mm ops (composite
    ops such as ``linear`` do not reach a decomposition's mode: they were never dispatched)."""
    rows = aten.view.default(aten.clone.default(x, memory_format=torch.contiguous_format),
                             [-1, x.shape[-1]])  # fmt: skip
    w = aten.t.default(weight)
    out = aten.addmm.default(bias, rows, w) if bias is not None else aten.mm.default(rows, w)
    return aten.view.default(out, [*x.shape[:-1], weight.shape[0]])


def _layer_norm(x, weight, bias, eps):
    return aten.native_layer_norm.default(x, [x.shape[-1]], weight, bias, eps)[0]


def _score_mask(mask, mask_type, batch, heads, length, source):
    """The mask (boolean: True is not attended; float: added) broadcastable to [B, H, L, S]."""
    if mask is None:
        return None
    if mask.dim() == 2 and mask_type == 1:  # key padding: [B, S] -> [B, 1, 1, S]
        mask = aten.view.default(mask, [batch, 1, 1, source])
    elif mask.dim() == 2:  # [L, S]
        mask = aten.view.default(mask, [1, 1, length, source])
    elif mask.dim() == 3:  # [B * H, L, S], or one [1, L, S] for all
        shared = mask.shape[0] == 1
        mask = aten.view.default(
            mask, [1 if shared else batch, 1 if shared else heads, length, source]
        )
    return mask


def _heads(x, batch, length, heads):
    """[B, L, D] -> [B * H, L, D / H], the layout bmm takes."""
    split = aten.view.default(x, [batch, length, heads, x.shape[-1] // heads])
    moved = aten.clone.default(aten.permute.default(split, [0, 2, 1, 3]),
                               memory_format=torch.contiguous_format)  # fmt: skip
    return aten.view.default(moved, [batch * heads, length, x.shape[-1] // heads])


@register_decomposition(aten._native_multi_head_attention.default)
def native_multi_head_attention(
    query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias,
    mask=None, need_weights=True, average_attn_weights=True, mask_type=None,
):  # fmt: skip
    batch, length, source = query.shape[0], query.shape[1], key.shape[1]
    weights = aten.split.Tensor(qkv_weight, embed_dim)
    biases = aten.split.Tensor(qkv_bias, embed_dim) if qkv_bias is not None else [None] * 3
    q, k, v = (
        _heads(_linear(x, w, b), batch, x.shape[1], num_head)
        for x, w, b in zip((query, key, value), weights, biases, strict=True)
    )
    q = aten.mul.Scalar(q, 1 / math.sqrt(q.shape[-1]))
    scores = aten.view.default(
        aten.bmm.default(q, aten.transpose.int(k, 1, 2)), [batch, num_head, length, source]
    )
    mask = _score_mask(mask, mask_type, batch, num_head, length, source)
    if mask is not None and mask.dtype == torch.bool:
        scores = aten.masked_fill.Scalar(scores, mask, float("-inf"))
    elif mask is not None:
        scores = aten.add.Tensor(scores, mask)
    probabilities = aten._softmax.default(scores, -1, False)
    context = aten.bmm.default(
        aten.view.default(probabilities, [batch * num_head, length, source]), v
    )
    context = aten.permute.default(
        aten.view.default(context, [batch, num_head, length, embed_dim // num_head]), [0, 2, 1, 3]
    )
    context = aten.view.default(
        aten.clone.default(context, memory_format=torch.contiguous_format),
        [batch, length, embed_dim],
    )
    if not need_weights:
        returned = aten.new_empty.default(query, [0])  # the kernel's undefined weights (its meta's)
    elif average_attn_weights:
        returned = aten.mean.dim(probabilities, [1])
    else:
        returned = probabilities
    return _linear(context, proj_weight, proj_bias), returned


@register_decomposition(aten._transformer_encoder_layer_fwd.default)
def transformer_encoder_layer_fwd(
    src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu,
    norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2,
    ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None, mask_type=None,
):  # fmt: skip
    x = _layer_norm(src, norm_weight_1, norm_bias_1, eps) if norm_first else src
    x, _ = native_multi_head_attention(
        x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
        mask, False, True, mask_type,
    )  # fmt: skip
    x = aten.add.Tensor(x, src)
    if not norm_first:
        x = _layer_norm(x, norm_weight_1, norm_bias_1, eps)
    residual = x
    if norm_first:
        x = _layer_norm(x, norm_weight_2, norm_bias_2, eps)
    hidden = _linear(x, ffn_weight_1, ffn_bias_1)
    hidden = aten.gelu.default(hidden) if use_gelu else aten.relu.default(hidden)
    x = aten.add.Tensor(_linear(hidden, ffn_weight_2, ffn_bias_2), residual)
    return x if norm_first else _layer_norm(x, norm_weight_2, norm_bias_2, eps)
