"""ember.export: one graph with guards, runnable and printable; breaks are errors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import ember


def fn(a, b, scale=2.0):
    return torch.relu(a @ b) * scale, a.sum()


def test_export_gives_one_runnable_graph_with_guards():
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    exported = ember.export(fn)(a, b)
    ops = [n.target for n in exported.graph_module.graph.nodes if n.op.startswith("call")]
    assert len(ops) == 4
    a2, b2 = torch.randn(3, 4), torch.randn(4, 5)
    got = exported(a2, b2)
    expected = fn(a2, b2)
    assert all(torch.allclose(g, e) for g, e in zip(got, expected, strict=True))
    text = str(exported)
    assert "def forward" in text and "L['a'] is a tensor float32[3, 4]" in text


def test_export_refuses_arguments_outside_its_guards():
    exported = ember.export(fn)(torch.randn(3, 4), torch.randn(4, 5))
    with pytest.raises(ember.ExportGuardError, match="L\\['a'\\]"):
        exported(torch.randn(2, 4), torch.randn(4, 5))


def test_export_of_a_function_with_a_graph_break_raises():
    def breaking(a):
        b = a + 1
        print(b.shape)
        return b

    with pytest.raises(ember.exc.Unsupported, match="print"):
        ember.export(breaking)(torch.randn(2))


def test_export_module():
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    x = torch.randn(2, 4)
    exported = ember.export(model)(x)
    assert torch.allclose(exported(x), model(x))
