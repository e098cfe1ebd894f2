"""Checkpointed regions (regions.py): a torch-level graph whose nodes carry
meta["recompute"] has its region's activations recomputed in the backward by both
partitioners, with gradients unchanged."""

from __future__ import annotations

import torch
import torch.fx

from ember_aot_autograd import aot_module, partition_report


def chain(x, w):
    for _ in range(3):
        x = torch.tanh(torch.relu(x @ w) * 2)
    return x.sum()


def traced(regions: bool) -> torch.fx.GraphModule:
    gm = torch.fx.symbolic_trace(chain)
    if regions:
        for number, node in enumerate(n for n in gm.graph.nodes if n.op == "call_function"):
            if node.target is not torch.sum and "sum" not in str(node.target):
                node.meta["recompute"] = number // 4 + 1  # matmul, relu, mul, tanh
    return gm


def test_region_activations_are_recomputed_not_saved():
    x = torch.randn(16, 16, requires_grad=True)
    w = torch.randn(16, 16, requires_grad=True)
    plain = partition_report(traced(False), [x, w])
    marked = partition_report(traced(True), [x, w])
    assert marked["default"].saved_activation_bytes < plain["default"].saved_activation_bytes
    assert marked["default"].backward_ops > plain["default"].backward_ops
    # min-cut already recomputes these cheap chains; regions never make it save more
    assert marked["min_cut"].saved_activation_bytes <= plain["min_cut"].saved_activation_bytes


def test_gradients_are_unchanged():
    x = torch.randn(16, 16, requires_grad=True)
    w = torch.randn(16, 16, requires_grad=True)
    compiled = aot_module(traced(True), [x, w], lambda gm, _: gm)
    compiled(x, w).backward()
    got = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    chain(x, w).backward()
    assert torch.allclose(got[0], x.grad) and torch.allclose(got[1], w.grad)
