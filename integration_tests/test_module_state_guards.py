"""Module and tensor state changed between calls (issue 26), under the default backend:
each later call matches eager and the change costs exactly one more graph."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")


def _graphs() -> int:
    return ember.counters["inductor"]["forward_graphs"]


def test_reordered_parameters_retrace_under_inductor():
    module = nn.Module()
    module.small = nn.Parameter(torch.ones(1))
    module.large = nn.Parameter(torch.ones(4))

    def fn(x):
        for i, p in enumerate(module.parameters()):
            x = x + p.sum() * (3.0, 7.0)[i]
        return x

    compiled = ember.compile(fn)
    x = torch.zeros(2)
    torch.testing.assert_close(compiled(x), fn(x))
    module._parameters["small"] = module._parameters.pop("small")
    torch.testing.assert_close(compiled(x), fn(x))
    assert _graphs() == 2


def test_forward_set_on_the_instance_under_inductor():
    import types

    class Doubling(nn.Module):
        def forward(self, x):
            return x * 2

    def minus_one(self, x):
        return torch.relu(x) - 1

    module = Doubling()

    def fn(x):
        return module(x) + 1

    compiled = ember.compile(fn)
    x = torch.randn(6)
    torch.testing.assert_close(compiled(x), fn(x))
    module.forward = types.MethodType(minus_one, module)
    torch.testing.assert_close(compiled(x), fn(x))
    assert _graphs() == 2


def test_class_call_override_under_inductor():
    class Offset(nn.Module):
        def __call__(self, x):
            return self.forward(x) + 10

        def forward(self, x):
            return x.sin()

    module = Offset()

    def fn(x):
        return module(x) * 2

    x = torch.randn(4)
    torch.testing.assert_close(ember.compile(fn, fullgraph=True)(x), fn(x))
    # The compiled module goes through __call__ too, as torch.compile's wrapper does.
    torch.testing.assert_close(ember.compile(module)(x), module(x))
    assert _graphs() == 2


def test_hasattr_on_an_input_tensor_under_inductor():
    def fn(x):
        return x.cos() + 5 if hasattr(x, "marked") else x.cos()

    compiled = ember.compile(fn, fullgraph=True)
    plain, marked = torch.randn(4), torch.randn(4)
    marked.marked = True
    torch.testing.assert_close(compiled(plain), fn(plain))
    torch.testing.assert_close(compiled(marked), fn(marked))
    torch.testing.assert_close(compiled(plain), fn(plain))
    assert _graphs() == 2


def test_module_attribute_lookup_order_under_inductor():
    class Base(nn.Module):
        def mix(self, x):
            return x.exp()

    class Child(Base):
        def __init__(self) -> None:
            super().__init__()
            self.mix = nn.Linear(3, 3)  # shadowed by Base.mix for reads, as in Python
            self.bias = torch.ones(3)

        def bias(self):
            return torch.zeros(3)

        def forward(self, x):
            return self.mix(x) + self.bias

    module = Child()
    x = torch.randn(2, 3)
    torch.testing.assert_close(ember.compile(module, fullgraph=True)(x), module(x))
    assert _graphs() == 1


def test_hooks_of_the_compiled_module_and_its_children_under_inductor():
    """Hooks on a child run in forward's graph; the compiled module's own hook runs around
    it as a frame of its own, as under torch.compile (issue 26)."""
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    def shift(module, inputs, output):  # each module's hook shows in the value
        return output * 2 + len(type(module).__name__)

    for module in model.modules():
        module.register_forward_hook(shift)
    x = torch.randn(3, 4)
    expected = model(x)
    compiled = ember.compile(model, fullgraph=True)
    torch.testing.assert_close(compiled(x), expected)
    assert _graphs() == 2  # forward with its children's hooks; the module's own hook
    model[1]._forward_hooks.clear()  # removed: forward retraced, eager's value again
    torch.testing.assert_close(compiled(x), model(x))
    assert _graphs() == 3


def test_lazy_module_compiled_before_its_first_call_under_inductor():
    torch.manual_seed(0)
    model = nn.Sequential(nn.LazyLinear(6), nn.Tanh(), nn.LazyLinear(1))
    compiled = ember.compile(model, fullgraph=True)
    x = torch.randn(5, 3)
    got = compiled(x)
    torch.testing.assert_close(got, model(x))
    torch.testing.assert_close(compiled(x), model(x))
    assert _graphs() == 1


def test_grad_mode_context_across_a_break_under_inductor():
    """A set_grad_enabled object made before a break and entered after it, and a break inside
    a profiler block: eager's values and grad mode, one graph per piece of work (issue 26)."""

    def fn(x):
        x = x.sin() * 2
        switch = torch.set_grad_enabled(True)
        ember.graph_break()
        with switch, torch.profiler.record_function("piece"):
            y = x.exp()
            ember.graph_break()
            y = y + 1
        return y, x * 3

    x = torch.randn(6, requires_grad=True)
    got, want = ember.compile(fn)(x), fn(x)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
        assert g.requires_grad == w.requires_grad
    assert torch.is_grad_enabled()
    assert _graphs() == 3
