"""Calling an fx GraphModule inside a compiled function: traced into the caller's graph.

fx gives every GraphModule class a `__call__` that runs nn.Module.__call__ inside a
try/except (which only prints the generated code's line of an error before raising it again).
Ember traces it as nn.Module.__call__ (hooks, then the generated forward), as torch.compile
does, rather than refusing tensor ops under a user's try/except.
"""

from __future__ import annotations

import pytest
import torch
import torch.fx

import ember

BACKENDS = ["eager", "aot_eager", "inductor"]


class Counting:
    def __init__(self, name):
        self.inner = ember.lookup_backend(name)
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return self.inner(gm, example_inputs)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.proj(x).relu() * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_symbolically_traced_module_is_one_graph_with_its_caller(backend):
    traced = torch.fx.symbolic_trace(Block())

    def run(x):
        return traced(x) - 1

    counting = Counting(backend)
    compiled = ember.compile(run, backend=counting, fullgraph=True)
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(x), run(x))
    assert counting.graphs == 1


def test_hooks_of_a_graph_module_still_run():
    traced = torch.fx.symbolic_trace(Block())
    traced.register_forward_hook(lambda module, args, out: out + 100)

    def run(x):
        return traced(x)

    counting = Counting("inductor")
    compiled = ember.compile(run, backend=counting, fullgraph=True)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), run(x))
    assert counting.graphs == 1
