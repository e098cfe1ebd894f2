"""Attention: aten's fused scaled-dot-product attention kernels, forward and backward, onto
the attention extern prims (one per kernel, see ``ember_primops.attention``).

How this matches eager. ``F.scaled_dot_product_attention`` is a composite op: aten picks a
kernel from the device, dtype, mask, dropout and the inputs' shapes before any of these ops is
dispatched, so a trace on fake tensors of the right device records the very kernel eager
would run (CPU: the flash kernel, or the math path for dropout and shapes it refuses; CUDA:
flash, memory-efficient, or the math path). The fused kernels arrive here and stay fused as
extern calls of the same aten kernel, bit for bit eager's; the math path arrives as
matmul/softmax/dropout ops and decomposes like any other code (its dropout draws from our
counter-based random prims, not from torch's generator: same distribution, other bits).
"""

from __future__ import annotations

import torch

from ember_primops._namespace import prims
from ember_primops.decompositions._registry import register_decomposition

aten = torch.ops.aten


@register_decomposition(aten._scaled_dot_product_flash_attention_for_cpu.default)
def sdpa_flash_cpu(
    query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None
):
    if dropout_p:
        # the kernel itself refuses dropout (eager routes dropout to the math path)
        raise NotImplementedError(
            "_scaled_dot_product_flash_attention_for_cpu with dropout_p > 0 (aten's CPU "
            "kernel supports no dropout either)"
        )
    return prims.sdpa_flash_cpu(query, key, value, attn_mask, is_causal, scale)


@register_decomposition(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def sdpa_flash_cpu_backward(
    grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, *, attn_mask=None, scale=None
):
    return prims.sdpa_flash_cpu_backward(
        grad_out, query, key, value, out, logsumexp, attn_mask, is_causal, scale
    )


@register_decomposition(aten._scaled_dot_product_flash_attention.default)
def sdpa_flash_cuda(
    query, key, value, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None
):
    if return_debug_mask:
        raise NotImplementedError(
            "_scaled_dot_product_flash_attention with return_debug_mask=True (F.sdpa never "
            "asks for it)"
        )
    out, lse, rng_state, unused = prims.sdpa_flash_cuda(
        query, key, value, dropout_p, is_causal, scale
    )
    # dense inputs: no cumulative sequence lengths, the max lengths are the lengths, and the
    # debug mask is empty (what aten returns when it is not asked for)
    debug_mask = torch.empty(0, dtype=query.dtype, device=query.device)
    return (out, lse, None, None, query.shape[2], key.shape[2], rng_state, unused, debug_mask)


@register_decomposition(aten._scaled_dot_product_flash_attention_backward.default)
def sdpa_flash_cuda_backward(
    grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k,
    dropout_p, is_causal, philox_seed, philox_offset, *, scale=None,
):  # fmt: skip
    if cum_seq_q is not None or cum_seq_k is not None:
        raise NotImplementedError("flash attention backward over nested (ragged) inputs")
    return prims.sdpa_flash_cuda_backward(
        grad_out, query, key, value, out, logsumexp, dropout_p, is_causal,
        philox_seed, philox_offset, scale,
    )  # fmt: skip


@register_decomposition(aten._scaled_dot_product_efficient_attention.default)
def sdpa_efficient(
    query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0, is_causal=False, *, scale=None
):
    return prims.sdpa_efficient(
        query, key, value, attn_bias, compute_log_sumexp, dropout_p, is_causal, scale
    )


@register_decomposition(aten._scaled_dot_product_efficient_attention_backward.default)
def sdpa_efficient_backward(
    grad_out, query, key, value, attn_bias, out, logsumexp, philox_seed, philox_offset,
    dropout_p, grad_input_mask, is_causal=False, *, scale=None,
):  # fmt: skip
    return prims.sdpa_efficient_backward(
        grad_out, query, key, value, attn_bias, out, logsumexp, philox_seed, philox_offset,
        dropout_p, list(grad_input_mask), is_causal, scale,
    )  # fmt: skip
