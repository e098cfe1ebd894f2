"""Shared helpers: counting eager compilers and eager-vs-compiled comparisons."""

from __future__ import annotations

import copy

import pytest
import torch

from ember_aot_autograd import (
    aot_function,
    assert_functional,
    assert_has_val,
    default_partition,
    min_cut_rematerialization_partition,
)

PARTITIONERS = {"default": default_partition, "min_cut": min_cut_rematerialization_partition}


class CountingCompiler:
    """An eager compiler that checks each graph it gets and counts them."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list):
        assert_functional(gm)
        assert_has_val(gm)
        self.graphs.append(gm)
        return gm

    @property
    def calls(self) -> int:
        return len(self.graphs)


@pytest.fixture(params=sorted(PARTITIONERS))
def partition_fn(request):
    return PARTITIONERS[request.param]


def leaves(inputs):
    """Independent copies of the inputs (same requires_grad), for eager and compiled runs."""
    return [
        x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x
        for x in inputs
    ]


def check_against_eager(fn, inputs, partition_fn=default_partition, loss=None, **tol):
    """Runs fn eagerly and compiled on copies of `inputs`; compares outputs, grads, inputs."""
    fw, bw = CountingCompiler(), CountingCompiler()
    compiled = aot_function(fn, fw, bw, partition_fn=partition_fn)
    eager_in, compiled_in = leaves(inputs), leaves(inputs)
    expected, actual = fn(*eager_in), compiled(*compiled_in)
    flat_expected = _tensors(expected)
    flat_actual = _tensors(actual)
    assert len(flat_expected) == len(flat_actual)
    for e, a in zip(flat_expected, flat_actual, strict=True):
        torch.testing.assert_close(a, e, **tol)
        assert a.requires_grad == e.requires_grad
    differentiable = [t for t in flat_expected if t.requires_grad]
    if differentiable:
        loss = loss or (lambda ts: sum((t.float() * (i + 1)).sum() for i, t in enumerate(ts)))
        loss([t for t in flat_expected if t.requires_grad]).backward()
        loss([t for t in flat_actual if t.requires_grad]).backward()
    for e, a in zip(eager_in, compiled_in, strict=True):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(a, e, **tol)  # input mutations
            if e.grad is None:
                assert a.grad is None
            else:
                torch.testing.assert_close(a.grad, e.grad, **tol)
    return compiled, fw, bw


def _tensors(output):
    flat, _ = torch.utils._pytree.tree_flatten(output)
    return [t for t in flat if isinstance(t, torch.Tensor)]


def clone_module(module: torch.nn.Module) -> torch.nn.Module:
    return copy.deepcopy(module)
