"""The TorchDynamo README's toy_example through ember.compile with a printing backend."""

from __future__ import annotations

import pytest
import torch

import ember


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def test_toy_example_gives_the_three_graphs_of_the_readme(capsys):
    printed = []

    def printing_backend(gm: torch.fx.GraphModule, example_inputs):
        print(gm.graph)  # the printing backend
        printed.append([n.target.__name__ if callable(n.target) else n.target
                        for n in gm.graph.nodes if n.op.startswith("call")])  # fmt: skip
        return gm.forward

    ember.reset()
    compiled = ember.compile(toy_example, backend=printing_backend)
    for _ in range(20):
        a, b = torch.randn(10), torch.randn(10)
        assert torch.allclose(compiled(a, b), toy_example(a, b))
    compiled(torch.randn(10), torch.ones(10))
    compiled(torch.randn(10), -torch.ones(10))
    assert sorted(printed) == sorted([
        ["abs", "add", "truediv", "sum", "lt"],
        ["mul", "mul"],
        ["mul"],
    ])  # fmt: skip
    assert "call_function" in capsys.readouterr().out  # the backend printed its graphs


def test_toy_example_under_fullgraph_raises_at_the_if_line():
    ember.reset()
    compiled = ember.compile(toy_example, fullgraph=True)
    with pytest.raises(ember.exc.Unsupported) as info:
        compiled(torch.randn(10), torch.randn(10))
    assert f"{__file__}:{toy_example.__code__.co_firstlineno + 2}" in str(info.value)
