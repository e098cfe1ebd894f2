"""The classification loss's backward is elementwise (each class's gradient picked by
comparing its index with the target) and fuses into the softmax backward: no scatter
fallback, no aten fallback for the 2-D (per-pixel) loss, gradients as eager's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import ember

CASES = {
    "mean": ((6, 9), (6,), {}),
    "sum": ((6, 9), (6,), {"reduction": "sum"}),
    "none": ((6, 9), (6,), {"reduction": "none"}),
    "ignore_index": ((6, 9), (6,), {"ignore_index": 2}),
    "weight": ((6, 9), (6,), {"weight": 9}),
    "label_smoothing": ((6, 9), (6,), {"label_smoothing": 0.1}),
    "one_sample": ((9,), (), {}),
    "per_pixel": ((2, 4, 3, 5), (2, 3, 5), {"weight": 4, "ignore_index": 1}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cross_entropy_backward_fuses(case):
    shape, target_shape, options = CASES[case]
    torch.manual_seed(0)
    options = dict(options)
    if "weight" in options:
        options["weight"] = torch.rand(options["weight"])
    classes = shape[1] if len(shape) > 1 else shape[0]
    x = torch.randn(shape, requires_grad=True)
    target = torch.randint(0, classes, target_shape)
    if case == "ignore_index":
        target[0] = 2  # at least one ignored sample

    def loss(x, target):
        return F.cross_entropy(x, target, **options).sum()

    (expected,) = torch.autograd.grad(loss(x, target), x)
    ember.reset()
    (got,) = torch.autograd.grad(ember.compile(loss, backend="inductor")(x, target), x)
    torch.testing.assert_close(got, expected)
    stats = ember.counters
    assert stats["inductor"]["backward_graphs"] == 1
    assert not stats["inductor_fallbacks"] and not stats["aten_fallbacks"], (
        dict(stats["inductor_fallbacks"]),
        dict(stats["aten_fallbacks"]),
    )
    if len(shape) == 2:  # forward and backward: 3 kernels (a scatter made it 6 and a fallback)
        assert stats["inductor"]["kernels"] <= 3, dict(stats["inductor"])
