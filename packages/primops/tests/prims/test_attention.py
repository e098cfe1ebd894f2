"""Attention prims: metas give the strides aten's kernels return (CPU, on every input layout
HF produces), the CUDA prims' metas work without a GPU, and F.scaled_dot_product_attention
decomposes to exactly the kernel eager runs: one fused prim forward, one backward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ember_primops import PrimInputError
from ember_primops.decompose_mode import DecomposeMode

aten = torch.ops.aten
prims = torch.ops.ember_prims

B, H, L, E = 2, 4, 6, 8


def _layouts():
    """(name, make(shape) -> tensor) for the layouts attention inputs come in."""
    return {
        "contiguous": lambda: torch.randn(B, H, L, E),
        "hf_transposed": lambda: torch.randn(B, L, H, E).transpose(1, 2),
        "fused_qkv_slice": lambda: torch.randn(B, L, 3, H, E)[:, :, 1].transpose(1, 2),
        "head_dim_slice": lambda: torch.randn(B, H, L, 2 * E)[..., :E],
    }


@pytest.mark.parametrize("layout", sorted(_layouts()))
def test_flash_cpu_meta_strides_are_the_kernels(layout):
    make = _layouts()[layout]
    q, k, v = make(), make(), make()
    out, lse = prims.sdpa_flash_cpu(q, k, v, None, True, None)
    want_out, want_lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, True)
    torch.testing.assert_close(out, want_out, rtol=0, atol=0)
    torch.testing.assert_close(lse, want_lse, rtol=0, atol=0)
    meta = [t.to("meta") for t in (q, k, v)]
    m_out, m_lse = prims.sdpa_flash_cpu(*meta, None, True, None)
    assert m_out.stride() == want_out.stride() and m_lse.stride() == want_lse.stride()
    g = torch.randn_like(out)
    grads = prims.sdpa_flash_cpu_backward(g, q, k, v, out, lse, None, True, None)
    want = aten._scaled_dot_product_flash_attention_for_cpu_backward(
        g, q, k, v, want_out, want_lse, 0.0, True
    )
    m_grads = prims.sdpa_flash_cpu_backward(g.to("meta"), *meta, m_out, m_lse, None, True, None)
    for got, expected, m in zip(grads, want, m_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        assert m.stride() == expected.stride()


def test_flash_cpu_checks_its_arguments():
    q = torch.randn(B, H, L, E)
    with pytest.raises(PrimInputError, match="query heads"):
        prims.sdpa_flash_cpu(q, torch.randn(B, 3, L, E), torch.randn(B, 3, L, E), None, False, None)
    with pytest.raises(PrimInputError, match="4-d"):
        prims.sdpa_flash_cpu(q[0], q[0], q[0], None, False, None)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_cuda_prims_have_metas_without_a_gpu(dtype):
    q = torch.empty(B, L, H, E, dtype=dtype, device="meta").transpose(1, 2)
    kv = torch.empty(B, H, L, E, dtype=dtype, device="meta")
    out, lse, rng, unused = prims.sdpa_flash_cuda(q, q, q, 0.0, True, None)
    assert out.shape == q.shape and lse.shape == (B, H, L) and lse.dtype == torch.float32
    grads = prims.sdpa_flash_cuda_backward(out, q, q, q, out, lse, 0.0, True, rng, unused, None)
    assert [g.shape for g in grads] == [q.shape] * 3
    bias = torch.empty(B, 1, L, L, dtype=dtype, device="meta")
    out, lse, seed, offset = prims.sdpa_efficient(q, kv, kv, bias, True, 0.0, False, None)
    assert out.shape == q.shape and lse.shape[:2] == (B, H)
    gq, gk, gv, gb = prims.sdpa_efficient_backward(
        out, q, kv, kv, bias, out, lse, seed, offset, 0.0, [True, True, True, True], False, None
    )
    assert (gq.shape, gk.shape, gv.shape, gb.shape) == (q.shape, kv.shape, kv.shape, bias.shape)
    assert torch.Tag.nondeterministic_seeded in prims.sdpa_efficient.default.tags
    with pytest.raises(PrimInputError, match="query heads"):  # no GQA in this kernel
        prims.sdpa_efficient(q, kv[:, :2], kv[:, :2], None, False, 0.0, False, None)


def _ops_run(fn, *inputs):
    mode = DecomposeMode(strict=True)
    with mode:
        out = fn(*inputs)
        grads = torch.autograd.grad(out.sum(), inputs)
    return out, grads, mode


_FLOAT_MASK = torch.randn(1, 1, L, L, generator=torch.Generator().manual_seed(1))
_BOOL_MASK = torch.ones(L, L, dtype=torch.bool).tril()
CASES = {
    "causal": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    "bool_mask": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=_BOOL_MASK),
    "float_mask": lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=_FLOAT_MASK, scale=0.2
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_sdpa_decomposes_to_the_fused_kernel_forward_and_backward(name):
    torch.manual_seed(0)
    inputs = [torch.randn(B, L, H, E).transpose(1, 2).requires_grad_() for _ in range(3)]
    expected = CASES[name](*inputs)
    expected_grads = torch.autograd.grad(expected.sum(), inputs)
    out, grads, mode = _ops_run(CASES[name], *inputs)
    counts = mode.decomposed_counts
    assert counts["aten._scaled_dot_product_flash_attention_for_cpu.default"] == 1, counts
    assert counts["aten._scaled_dot_product_flash_attention_for_cpu_backward.default"] == 1
    assert not any("bmm" in k or "softmax" in k for k in counts), counts
    # the same aten kernels run: bit-equal to eager
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    for g, e in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(g, e, rtol=0, atol=0)


def test_dropout_takes_the_math_path_as_eager_does():
    torch.manual_seed(0)
    inputs = [torch.randn(B, H, L, E, requires_grad=True) for _ in range(3)]
    _, _, mode = _ops_run(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.5), *inputs
    )
    counts = mode.decomposed_counts
    assert not any("flash" in k for k in counts), counts
    assert any("bernoulli" in k or "dropout" in k for k in counts), counts


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(2, 4, 8, 24).transpose(-1, -2),  # last dim strided
        lambda: torch.randn(2, 4, 8, 24),  # rows of 24: not on 16-element boundaries
        lambda: torch.randn(1, 1, 8, 32).expand(2, 4, 8, 32),  # broadcast, aligned rows
    ],
)
def test_efficient_kernels_get_the_bias_aligned_as_eager_aligns_it(make):
    from ember_primops.attention import kernel_bias

    bias = make()
    aligned = kernel_bias(bias)
    assert torch.equal(aligned, bias)
    assert aligned.stride(-1) == 1
    for size, stride in zip(aligned.shape[:-1], aligned.stride()[:-1], strict=True):
        assert stride % 16 == 0 or size == 1
    if bias.stride(-1) == 1 and bias.stride(-2) % 16 == 0:
        assert aligned is bias  # already in the kernels' layout: no copy
