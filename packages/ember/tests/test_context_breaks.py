"""A graph break inside a with-block over a user class's context manager, compiled with
the default backend (inductor): eager's values and grad mode, two graphs
(packages/bytecode_tracer/tests/tracer/test_user_context_breaks.py pins the trace)."""

from __future__ import annotations

import pytest
import torch

import ember


class Switch:
    def __init__(self, mode):
        self.saved = torch.is_grad_enabled()
        self.mode = mode

    def __enter__(self):
        torch._C._set_grad_enabled(self.mode)

    def __exit__(self, kind, value, tb):
        torch._C._set_grad_enabled(self.saved)


def block(x):
    with Switch(True):
        y = x * 2 + 1
        ember.graph_break()
        y = torch.relu(y) * x
    return y - 1


@pytest.mark.parametrize("outer_grad", [False, True])
def test_break_in_a_user_with_block_under_inductor(outer_grad):
    x = torch.rand(4, 3, requires_grad=True)
    compiled = ember.compile(block)
    with torch.set_grad_enabled(outer_grad):
        expected = block(x)
        got = compiled(x)
        assert torch.is_grad_enabled() is outer_grad
    torch.testing.assert_close(got, expected)
    assert got.requires_grad == expected.requires_grad
    records = compiled._ember_compiler.records
    assert sum(len(r.graphs) for r in records) == 2  # before the break, after it
    assert ember.counters["inductor"]["forward_runs"] == 2  # each compiled by inductor, run


def by_backend(x, backend):
    from torch.nn.attention import SDPBackend

    return x * 2 if backend == SDPBackend.MATH else x - int(backend)


def test_a_pybind_enum_member_is_a_constant_under_inductor():
    from torch.nn.attention import SDPBackend

    compiled = ember.compile(by_backend, fullgraph=True)
    x = torch.randn(3)
    for backend in (SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION):
        torch.testing.assert_close(compiled(x, backend), by_backend(x, backend))
    assert ember.counters["inductor"]["forward_runs"] == 2
    assert sum(len(r.graphs) for r in compiled._ember_compiler.records) == 2
