"""Backward decompositions: gradients under DecomposeMode(strict) equal eager's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ember_primops.decompose_mode import DecomposeMode

CASES = {
    "layer_norm": (lambda x, w: F.layer_norm(x, (6,), w, w * 0.5), [(4, 5, 6), (6,)]),
    "batch_norm": (
        lambda x, w: F.batch_norm(x, None, None, w, w, training=True),
        [(4, 3, 5), (3,)],
    ),
    "group_norm": (lambda x, w: F.group_norm(x, 3, w, w), [(2, 6, 5), (6,)]),
    "softmax": (lambda x, w: (F.softmax(x, -1) * w).sum(-1), [(3, 6), (6,)]),
    "log_softmax": (lambda x, w: F.log_softmax(x * w, 0), [(3, 6), (6,)]),
    "gelu_tanh": (lambda x, w: F.gelu(x * w, approximate="tanh"), [(3, 6), (6,)]),
    "silu_relu": (lambda x, w: F.silu(x) + F.relu(x * w), [(3, 6), (6,)]),
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1), [(2, 3, 6, 6), (4, 3, 3, 3)]),
    # the bias gradient is a sum in the graph, not the library's third output
    "conv2d_bias": (
        lambda x, w, b: F.conv2d(x, w, b, padding=1),
        [(2, 3, 6, 6), (4, 3, 3, 3), (4,)],
    ),
    "conv_transpose1d_groups_bias": (
        lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2, groups=2),
        [(2, 4, 5), (4, 3, 3), (6,)],
    ),
    "max_pool": (lambda x, w: F.max_pool2d(x * w, 2), [(2, 3, 6, 6), (6,)]),
    "adaptive_avg": (lambda x, w: F.adaptive_avg_pool2d(x * w, 3), [(2, 3, 7, 6), (6,)]),
    "embedding": (lambda x, w: F.embedding(torch.tensor([[0, 2], [1, 2]]), x) * w, [(4, 6), (6,)]),
    "mse_nll": (
        lambda x, w: F.mse_loss(x, w.expand_as(x)) + F.cross_entropy(x, torch.tensor([1, 0, 5])),
        [(3, 6), (6,)],
    ),
    "attention": (
        lambda x, w: F.scaled_dot_product_attention(x, x * w, x, is_causal=True),
        [(2, 2, 5, 6), (6,)],
    ),
    "slice_select": (lambda x, w: x[1:, 2] * w[0] + x[:, ::2].sum(), [(4, 6), (6,)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_match_eager(name):
    fn, shapes = CASES[name]
    torch.manual_seed(0)
    inputs = [torch.randn(s, dtype=torch.float64, requires_grad=True) for s in shapes]
    expected = torch.autograd.grad(fn(*inputs).sum(), inputs)
    mode = DecomposeMode(strict=True)
    with mode:
        got = torch.autograd.grad(fn(*inputs).sum(), inputs)
    assert any(
        k.endswith("_backward.default") or "backward" in k for k in mode.decomposed_counts
    ), mode.decomposed_counts
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-7, atol=1e-9)
