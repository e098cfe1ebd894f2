"""Attention: the CPU flash-attention aten op and its backward, over the SDPA extern prim
(forward) and mm/bmm + softmax algebra (logsumexp, backward)."""

from __future__ import annotations

import math

import torch

from ember_primops import prims
from ember_primops.decompositions._helpers import scalar
from ember_primops.decompositions._registry import register_decomposition
from ember_primops.decompositions.matmul import batched_matmul
from ember_primops.decompositions.type_promotion import computation_dtype, convert

aten = torch.ops.aten


@register_decomposition(aten._scaled_dot_product_flash_attention_for_cpu.default)
def sdpa_flash_cpu(
    query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None
):
    if dropout_p:
        raise NotImplementedError(
            "_scaled_dot_product_flash_attention_for_cpu with dropout_p > 0 has no prim "
            "decomposition (its mask is drawn inside the kernel)"
        )
    out = prims.scaled_dot_product_attention(query, key, value, attn_mask, is_causal, scale)
    lse = _attention_logsumexp(query, key, attn_mask, is_causal, scale)
    return out, lse


def _attention_scores(query, key, attn_mask, is_causal, scale):
    compute = computation_dtype(query.dtype)
    q, k = convert(query, compute), convert(key, compute)
    s = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    scores = prims.mul(batched_matmul(q, aten.transpose.int(k, -2, -1)), scalar(s, q))
    L, S = query.shape[-2], key.shape[-2]
    if is_causal:
        rows = prims.broadcast_in_dim(
            prims.iota(L, start=0, step=1, dtype=torch.int64, device=q.device), [L, S], [0]
        )
        cols = prims.broadcast_in_dim(
            prims.iota(S, start=0, step=1, dtype=torch.int64, device=q.device), [L, S], [1]
        )
        scores = prims.where(prims.ge(rows, cols), scores, scalar(-math.inf, scores))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = prims.where(attn_mask, scores, scalar(-math.inf, scores))
        else:
            scores = prims.add(scores, convert(attn_mask, compute))
    return scores, s


def _attention_logsumexp(query, key, attn_mask, is_causal, scale):
    scores, _ = _attention_scores(query, key, attn_mask, is_causal, scale)
    last = scores.dim() - 1
    top = prims.amax(scores, [last])
    top = prims.where(prims.isinf(top), scalar(0, top), top)
    total = prims.sum(prims.exp(prims.sub(scores, prims.expand_dims(top, [last]))), [last])
    return prims.add(prims.log(total), top)


@register_decomposition(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def sdpa_flash_cpu_backward(
    grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, *, attn_mask=None, scale=None
):
    compute = computation_dtype(query.dtype)
    scores, s = _attention_scores(query, key, attn_mask, is_causal, scale)
    last = scores.dim() - 1
    probs = prims.exp(prims.sub(scores, prims.expand_dims(convert(logsumexp, compute), [last])))
    g, v = convert(grad_out, compute), convert(value, compute)
    q, k, o = convert(query, compute), convert(key, compute), convert(out, compute)
    grad_v = batched_matmul(aten.transpose.int(probs, -2, -1), g)
    grad_p = batched_matmul(g, aten.transpose.int(v, -2, -1))
    row = prims.expand_dims(prims.sum(prims.mul(g, o), [o.dim() - 1]), [o.dim() - 1])
    grad_s = prims.mul(probs, prims.sub(grad_p, row))
    grad_q = prims.mul(batched_matmul(grad_s, k), scalar(s, grad_s))
    grad_k = prims.mul(batched_matmul(aten.transpose.int(grad_s, -2, -1), q), scalar(s, grad_s))
    return (convert(grad_q, query.dtype), convert(grad_k, key.dtype), convert(grad_v, value.dtype))
