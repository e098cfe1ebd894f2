"""A compiled graph runs as written under the caller's autocast.

The graph's casts are its own ops; the wrapper's library calls (``torch.bmm`` for a float32
batched matmul, not an ``out=`` call on this target) would otherwise be cast again by an
enclosing ``torch.autocast`` and return bfloat16 into what the kernels read as a float32
buffer: on an H200, HF BERT's float32 attention scores faulted the softmax kernel after them
(an illegal memory access, reading twice the bytes the bfloat16 buffer holds)."""

from __future__ import annotations

import torch

from ember_primops import prims


def _scores_softmax(q, k):
    e = prims.exp(prims.bmm(q, k))  # the product: an extern on the Triton target
    total = prims.broadcast_in_dim(prims.sum(e, [2]), [3, 16, 16], [0, 1])
    return (prims.div(e, total),)


def test_float32_extern_stays_float32_under_autocast(compile_prims):
    torch.manual_seed(0)
    q, k = torch.randn(3, 16, 8), torch.randn(3, 8, 16)
    expected = _scores_softmax(q, k)[0]
    sched, compiled = compile_prims(_scores_softmax, q, k)
    assert any(g.extern is not None for g in sched), "the product should stay a library call"
    with torch.autocast("cpu", dtype=torch.bfloat16):
        (got,) = compiled([q, k])
        assert torch.is_autocast_enabled("cpu")  # the caller's state is given back
    assert got.dtype == torch.float32
    # bfloat16 scores would be off by ~1e-2
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
