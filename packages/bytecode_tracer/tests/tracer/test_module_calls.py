"""Calling an nn.Module inside a trace does what nn.Module.__call__ does (issue 26): forward
pre-hooks and hooks run around forward in the same graph, a lazy module initialises itself
first, and registering or removing a hook later retraces."""

from __future__ import annotations

import torch
from torch import nn

from conftest import Compiled, same


class Affine(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor([1.5, -2.0, 0.5]))

    def forward(self, x, shift=0.0):
        return x * self.scale + shift


class Holder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Affine()

    def forward(self, x):
        return self.inner(x).relu()


# ---- forward hooks and pre-hooks ---------------------------------------------------------
def test_forward_hook_replacing_the_output_is_traced_in_the_graph():
    model = Holder()
    seen = []

    def squash(module, inputs, output):
        seen.append(type(module).__name__)
        return output.tanh() * 3

    handle = model.inner.register_forward_hook(squash)
    compiled = Compiled(model)
    x = torch.randn(4, 3)
    expected = model(x)
    seen.clear()
    assert same(compiled(x), expected)
    assert seen == ["Affine"] and compiled.backend.graph_count == 1 and not compiled.breaks
    assert "tanh" in compiled.backend.ops(0)
    # Removed: the next call retraces and runs without it.
    handle.remove()
    assert same(compiled(x), model(x))
    assert compiled.backend.graph_count == 2


def test_pre_hooks_replace_the_arguments_plain_and_with_kwargs():
    model = Holder()
    model.inner.register_forward_pre_hook(lambda module, args: args[0] * 2)

    def add_shift(module, args, kwargs):
        return args, {**kwargs, "shift": 10.0}

    model.inner.register_forward_pre_hook(add_shift, with_kwargs=True)
    compiled = Compiled(model, fullgraph=True)
    x = torch.randn(2, 3)
    assert same(compiled(x), model(x))
    assert compiled.backend.graph_count == 1


def test_hook_with_kwargs_sees_the_keyword_arguments():
    module = Affine()

    def keep_kwargs(mod, args, kwargs, output):
        return output + kwargs["shift"] * 100

    module.register_forward_hook(keep_kwargs, with_kwargs=True)

    def fn(x):
        return module(x, shift=2.0)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))


def test_global_hook_registered_after_the_first_call_retraces():
    model = Holder()

    def fn(x):
        return model(x) * 2

    compiled = Compiled(fn)
    x = torch.randn(2, 3)
    assert same(compiled(x), fn(x))
    handle = nn.modules.module.register_module_forward_hook(lambda m, i, o: o + 1)
    try:
        assert same(compiled(x), fn(x))
        assert compiled.backend.graph_count == 2
    finally:
        handle.remove()
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 2  # the first trace stands again


def test_bound_method_of_a_user_object_as_pre_hook():
    class Offset:
        def __init__(self, amount):
            self.amount = amount

        def bump(self, module, args):
            return (args[0] + self.amount,)

    model = Holder()
    model.inner.register_forward_pre_hook(Offset(3.0).bump)
    compiled = Compiled(model, fullgraph=True)
    x = torch.randn(2, 3)
    assert same(compiled(x), model(x))


def test_backward_hook_stays_a_graph_break_and_still_fires():
    model = Holder()
    grads = []
    model.inner.register_full_backward_hook(lambda m, gi, go: grads.append(go[0].clone()))
    compiled = Compiled(model)
    x = torch.randn(2, 3, requires_grad=True)
    compiled(x).sum().backward()
    assert len(grads) == 1
    expected = []
    model.inner._backward_hooks.clear()
    model.inner.register_full_backward_hook(lambda m, gi, go: expected.append(go[0].clone()))
    model(x).sum().backward()
    assert same(grads[0], expected[0])


# ---- lazy modules ------------------------------------------------------------------------
def test_lazy_linear_initialises_inside_the_trace_once():
    torch.manual_seed(0)
    model = nn.Sequential(nn.LazyLinear(5), nn.ReLU(), nn.LazyLinear(2))
    compiled = Compiled(model, fullgraph=True)
    x = torch.randn(4, 7)
    got = compiled(x)
    assert isinstance(model[0], nn.Linear) and model[0].weight.shape == (5, 7)
    assert same(got, model(x))
    assert compiled.backend.graph_count == 1
    assert same(compiled(x), model(x))
    assert compiled.backend.graph_count == 1  # the guards follow the class it became


# ---- module methods: listings with arguments, classmethods, static forwards, __getitem__ --
class Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.own = nn.Parameter(torch.tensor([2.0, 3.0]))
        self.child = Affine()
        self.register_buffer("count", torch.tensor([4.0, 1.0]))


def test_listings_with_arguments_match_eager():
    model = Stack()

    def fn(x):
        total = x
        for p in model.parameters(recurse=False):
            total = total + p.sum()
        for name, p in model.named_parameters(prefix="top"):
            total = total * (len(name) + p.sum())
        for name, b in model.named_buffers("b", False):
            total = total - b.sum() * len(name)
        names = [n for n, _ in model.named_modules(prefix="m")]
        return total + len("".join(names))

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(2)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_classmethod_and_staticmethod_forward_of_modules():
    class Twice(nn.Module):
        @staticmethod
        def forward(x):
            return x * 2

    class Caller(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.twice = Twice()
            self.base = 5.0

        @classmethod
        def through(cls, module, x):
            return module(x) + len(cls.__name__)

        def forward(self, x):
            return self.through(self.twice, x) + self.base

    model = Caller()
    compiled = Compiled(model, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), model(x))
    assert compiled.backend.graph_count == 1


def test_module_with_its_own_len_and_getitem():
    class Picker(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 3)])

        def __len__(self):
            return len(self.layers) - 1  # the last layer is left out on purpose

        def __getitem__(self, i):
            return self.layers[len(self.layers) - 1 - i]  # reversed

        def forward(self, x):
            for i in range(len(self)):
                x = self[i](x)
            return x

    model = Picker()
    compiled = Compiled(model, fullgraph=True)
    x = torch.randn(2, 3)
    assert same(compiled(x), model(x))
    assert compiled.backend.graph_count == 1


def test_a_parameter_is_a_parameter_in_the_trace():
    # isinstance/type of a Parameter read from the frame (an argument, a module's) are
    # its guarded class: both branches went the plain tensor's way before
    def fn(x, weight, module):
        kinds = [isinstance(w, nn.Parameter) for w in (weight, module.scale, x)]
        exact = type(module.scale) is nn.Parameter
        return (x * 2 if kinds[0] else x - 2), kinds, exact, isinstance(weight, torch.Tensor)

    compiled = Compiled(fn, fullgraph=True)
    module = Affine()
    x = torch.randn(3)
    for weight in (nn.Parameter(torch.randn(3)), torch.randn(3)):
        assert same(compiled(x, weight, module), fn(x, weight, module))
    assert compiled.backend.graph_count == 2  # the argument's class is guarded


def test_parameter_made_without_grad_in_the_trace():
    # nn.Parameter(t, requires_grad=False) is t's alias of class Parameter: used inside
    # the graph (also under inference_mode); one that would leave it is a break there
    def uses(x):
        p = nn.Parameter(x.cos(), requires_grad=False)
        return x * p + 1, isinstance(p, nn.Parameter), p.requires_grad

    def returns(x, kept):
        p = nn.Parameter(x * 2, requires_grad=False)
        kept.append(p)
        return x.sin() + p

    x = torch.randn(4)
    compiled = Compiled(uses, fullgraph=True)
    assert same(compiled(x), uses(x))
    with torch.inference_mode():
        y = torch.randn(4)
        assert same(compiled(y), uses(y))
    assert not compiled.breaks

    compiled = Compiled(returns)
    kept = []
    assert same(compiled(x, kept), returns(x, []))
    assert type(kept[0]) is nn.Parameter and same(kept[0], x * 2)
    assert any("nn.Parameter made inside" in str(b) for b in compiled.breaks)
