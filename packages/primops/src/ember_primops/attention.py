"""Attention prims: aten's fused scaled-dot-product attention kernels and their backwards.

One prim per aten kernel (CPU flash, CUDA flash, CUDA memory-efficient), each paired with its
backward: every kernel keeps the softmax statistics (logsumexp) in its own shape and layout,
read only by its own backward, so the pairs are not interchangeable and one generic
"attention" prim could not carry them. The later stages hand these to the library as extern
kernels, which is what makes a compiled attention exactly as fast as eager's.

Metas are aten's own meta kernels: they give the strides the kernels really return (the
output takes the query's layout, so HF's transposed heads ``(B, L, H, E)`` stay that way and
the following ``transpose(1, 2).reshape`` is free; the CPU logsumexp is ``(B, L, H)`` seen as
``(B, H, L)``). References call the kernels.

Dropout. The CPU flash kernel has none (eager takes the math path for dropout, whose
decomposition draws from our counter-based random prims). The CUDA kernels draw their dropout
mask from the device's default generator inside the kernel and return the philox state the
backward reuses: as extern calls they consume the generator exactly as eager does, so a
compiled training step draws the same masks as eager when started from the same seed. That
makes them ``nondeterministic_seeded``: never recomputed by a partitioner.
"""

from __future__ import annotations

import torch

from ._checks import check_dtype, check_same_dtype, check_tensor
from ._extern_base import as_tuple
from ._registry import define_prim, fail

aten = torch.ops.aten


def _check_qkv(p: str, query, key, value, *, shared_heads: bool = True) -> None:
    """``shared_heads``: the kernel lets groups of query heads share a key/value head (GQA)."""
    for t, what in ((query, "query"), (key, "key"), (value, "value")):
        check_tensor(p, t, what)
        if t.ndim != 4:
            fail(p, f"{what} must be 4-d (batch, heads, length, head dim), got {list(t.shape)}")
    check_same_dtype(p, [query, key, value])
    check_dtype(p, query, "float")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        fail(
            p,
            f"query {list(query.shape)}, key {list(key.shape)}, value {list(value.shape)}: "
            "need the head dims of query and key and the lengths of key and value to agree",
        )
    heads, kv_heads = query.shape[1], key.shape[1]
    if kv_heads != value.shape[1] or heads % kv_heads or (heads != kv_heads and not shared_heads):
        fail(p, f"{heads} query heads cannot share {kv_heads} key/value heads")


def _check_mask(p: str, mask, query) -> None:
    if mask is None:
        return
    check_tensor(p, mask, "attn_mask")
    if mask.dtype != torch.bool and mask.dtype != query.dtype:
        fail(p, f"attn_mask must be bool or {query.dtype}, got {mask.dtype}", dtype=True)


def _define(schema: str, check, kernel, *, notes: str, tags: tuple[str, ...] = ()) -> None:
    """``kernel`` is the aten call: reference on real tensors, meta on meta/fake ones (aten's
    meta kernels give the strides the real kernel returns, which the extern keeps)."""

    def meta(*args):
        check(*args)
        return as_tuple(kernel(*args))

    def reference(*args):
        return as_tuple(kernel(*args))

    define_prim(schema, "extern", meta, reference, tags=tags, notes=notes)


# -- CPU flash attention ---------------------------------------------------------------


def _check_flash_cpu(query, key, value, attn_mask, is_causal, scale) -> None:
    p = "sdpa_flash_cpu"
    _check_qkv(p, query, key, value)
    _check_mask(p, attn_mask, query)


def _flash_cpu(query, key, value, attn_mask, is_causal, scale):
    return aten._scaled_dot_product_flash_attention_for_cpu(
        query, key, value, 0.0, is_causal, attn_mask=attn_mask, scale=scale
    )


_define(
    "sdpa_flash_cpu(Tensor query, Tensor key, Tensor value, Tensor? attn_mask, bool is_causal,"
    " float? scale) -> (Tensor, Tensor)",
    _check_flash_cpu,
    _flash_cpu,
    notes="(out, logsumexp) of aten's CPU flash attention; no dropout; GQA by head counts",
)


def _check_flash_cpu_backward(
    grad_out, query, key, value, out, logsumexp, attn_mask, is_causal, scale
) -> None:
    p = "sdpa_flash_cpu_backward"
    _check_qkv(p, query, key, value)
    _check_mask(p, attn_mask, query)
    for t, what in ((grad_out, "grad_out"), (out, "out"), (logsumexp, "logsumexp")):
        check_tensor(p, t, what)
    if grad_out.shape != out.shape:
        fail(p, f"grad_out {list(grad_out.shape)} and out {list(out.shape)} differ")


def _flash_cpu_backward(grad_out, query, key, value, out, logsumexp, attn_mask, is_causal, scale):
    return aten._scaled_dot_product_flash_attention_for_cpu_backward(
        grad_out,
        query,
        key,
        value,
        out,
        logsumexp,
        0.0,
        is_causal,
        attn_mask=attn_mask,
        scale=scale,
    )


_define(
    "sdpa_flash_cpu_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value,"
    " Tensor out, Tensor logsumexp, Tensor? attn_mask, bool is_causal, float? scale)"
    " -> (Tensor, Tensor, Tensor)",
    _check_flash_cpu_backward,
    _flash_cpu_backward,
    notes="(grad_query, grad_key, grad_value) of sdpa_flash_cpu from its saved logsumexp",
)


# -- CUDA flash attention ---------------------------------------------------------------


def _check_flash_cuda(query, key, value, dropout_p, is_causal, scale) -> None:
    _check_qkv("sdpa_flash_cuda", query, key, value)


def _flash_cuda(query, key, value, dropout_p, is_causal, scale):
    # dense inputs only: no cumulative sequence lengths; max lengths are the shapes
    out, lse, _, _, _, _, rng_state, unused, _ = aten._scaled_dot_product_flash_attention(
        query, key, value, dropout_p, is_causal, False, scale=scale
    )
    return out, lse, rng_state, unused


_define(
    "sdpa_flash_cuda(Tensor query, Tensor key, Tensor value, float dropout_p, bool is_causal,"
    " float? scale) -> (Tensor, Tensor, Tensor, Tensor)",
    _check_flash_cuda,
    _flash_cuda,
    tags=("nondeterministic_seeded",),
    notes="(out, logsumexp, rng_state, unused) of aten's CUDA flash attention (fp16/bf16)",
)


def _check_flash_cuda_backward(
    grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, rng_state, unused, scale
) -> None:
    _check_qkv("sdpa_flash_cuda_backward", query, key, value)
    check_tensor("sdpa_flash_cuda_backward", grad_out, "grad_out")


def _flash_cuda_backward(
    grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, rng_state, unused, scale
):
    max_q, max_k = query.shape[2], key.shape[2]
    return aten._scaled_dot_product_flash_attention_backward(
        grad_out, query, key, value, out, logsumexp, None, None, max_q, max_k,
        dropout_p, is_causal, rng_state, unused, scale=scale,
    )  # fmt: skip


_define(
    "sdpa_flash_cuda_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value,"
    " Tensor out, Tensor logsumexp, float dropout_p, bool is_causal, Tensor rng_state,"
    " Tensor unused, float? scale) -> (Tensor, Tensor, Tensor)",
    _check_flash_cuda_backward,
    _flash_cuda_backward,
    notes="(grad_query, grad_key, grad_value) of sdpa_flash_cuda; replays its dropout mask",
)


# -- CUDA memory-efficient attention -------------------------------------------------------


def _check_efficient(query, key, value, attn_bias, compute_log_sumexp, dropout_p, is_causal, scale):
    _check_qkv("sdpa_efficient", query, key, value, shared_heads=False)
    _check_mask("sdpa_efficient", attn_bias, query)


def kernel_bias(attn_bias: torch.Tensor | None) -> torch.Tensor | None:
    """The bias in the layout the memory-efficient kernels read: unit stride in the last dim
    and rows starting on 16-element boundaries. Eager's sdpa aligns the mask this way before
    calling them; a bias our kernels computed (or recomputed for the backward) may be laid
    out otherwise. The values are the same; grad_bias's layout never depends on it."""
    if attn_bias is None:
        return None
    sizes, strides = attn_bias.shape, attn_bias.stride()
    if any(isinstance(v, torch.SymInt) for v in (*sizes, *strides)):
        # a trace on fakes of symbolic size: asking whether a stride is aligned (or making
        # an aligned copy) would guard on the length; the output's meta does not depend on
        # the bias' layout, and at run time, on concrete sizes, this decides again
        return attn_bias
    aligned = strides[-1] == 1 and all(
        stride % 16 == 0 or size == 1 for size, stride in zip(sizes[:-1], strides[:-1], strict=True)
    )
    return attn_bias if aligned else _aligned_copy(attn_bias)


def _aligned_copy(attn_bias: torch.Tensor) -> torch.Tensor:
    """`attn_bias` copied into rows of a width rounded up to 16 elements (sliced back)."""
    *outer, last = attn_bias.shape
    strides: list = [1]
    step = -(-last // 16) * 16
    for size in reversed(outer):
        strides.insert(0, step)
        step = step * size
    return attn_bias.new_empty_strided(attn_bias.shape, strides).copy_(attn_bias)


def _efficient(query, key, value, attn_bias, compute_log_sumexp, dropout_p, is_causal, scale):
    return aten._scaled_dot_product_efficient_attention(
        query, key, value, kernel_bias(attn_bias), compute_log_sumexp, dropout_p, is_causal,
        scale=scale,
    )  # fmt: skip


_define(
    "sdpa_efficient(Tensor query, Tensor key, Tensor value, Tensor? attn_bias,"
    " bool compute_log_sumexp, float dropout_p, bool is_causal, float? scale)"
    " -> (Tensor, Tensor, Tensor, Tensor)",
    _check_efficient,
    _efficient,
    tags=("nondeterministic_seeded",),
    notes="(out, logsumexp, philox_seed, philox_offset) of aten's CUDA memory-efficient attention",
)


def _check_efficient_backward(
    grad_out, query, key, value, attn_bias, out, logsumexp, philox_seed, philox_offset,
    dropout_p, grad_input_mask, is_causal, scale,
) -> None:  # fmt: skip
    _check_qkv("sdpa_efficient_backward", query, key, value, shared_heads=False)
    check_tensor("sdpa_efficient_backward", grad_out, "grad_out")


def philox_state_for_backward(
    seed: torch.Tensor, offset: torch.Tensor, dropout_p: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward's dropout state where aten's backward kernel reads it.

    Outside CUDA-graph capture the forward returns its philox seed and offset on the CPU and
    the backward reads them there; a forward replayed from a CUDA graph returns them on the
    device. A backward run outside capture after a captured forward (reduce-overhead's first
    backward, or a backward that did not capture) would read device memory on the host: it
    gets host copies. A backward being captured needs them on the device, where a host
    copy cannot be made during capture: that capture fails, and the graph runs uncaptured."""
    if dropout_p == 0.0:
        return seed, offset
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        if not (seed.is_cuda and offset.is_cuda):
            raise RuntimeError(
                "efficient attention backward with dropout captured after a forward that ran "
                "outside capture: its dropout state is on the host"
            )
        return seed, offset
    if seed.is_cuda or offset.is_cuda:
        return seed.cpu(), offset.cpu()
    return seed, offset


def _efficient_backward(
    grad_out, query, key, value, attn_bias, out, logsumexp, philox_seed, philox_offset,
    dropout_p, grad_input_mask, is_causal, scale,
):  # fmt: skip
    philox_seed, philox_offset = philox_state_for_backward(philox_seed, philox_offset, dropout_p)
    return aten._scaled_dot_product_efficient_attention_backward(
        grad_out, query, key, value, kernel_bias(attn_bias), out, logsumexp, philox_seed,
        philox_offset, dropout_p, grad_input_mask, is_causal, scale=scale,
    )  # fmt: skip


_define(
    "sdpa_efficient_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value,"
    " Tensor? attn_bias, Tensor out, Tensor logsumexp, Tensor philox_seed,"
    " Tensor philox_offset, float dropout_p, bool[4] grad_input_mask, bool is_causal,"
    " float? scale) -> (Tensor?, Tensor?, Tensor?, Tensor?)",
    _check_efficient_backward,
    _efficient_backward,
    notes="(grad_query, grad_key, grad_value, grad_bias) of sdpa_efficient; None where masked",
)
