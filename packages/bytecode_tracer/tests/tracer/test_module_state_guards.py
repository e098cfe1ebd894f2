"""A module's state changed between calls (issue 26): what a trace read of it is guarded,
so the next call retraces instead of replaying the old order or the old method."""

from __future__ import annotations

import torch
from torch import nn

from conftest import Compiled, same


class TwoTensors(nn.Module):
    """Two parameters (or buffers) of different sizes, so their order shows in the sum."""

    def __init__(self, *, buffers: bool = False) -> None:
        super().__init__()
        for name, size in (("first", 1), ("second", 3)):
            value = torch.full([size], 1.0)
            if buffers:
                self.register_buffer(name, value)
            else:
                setattr(self, name, nn.Parameter(value))


def _weighted_sum(listing):
    def fn(x):
        weights = (10.0, 100.0)
        for i, t in enumerate(listing()):
            x = x + t.sum() * weights[i]
        for i, (_, t) in enumerate(listing(named=True)):
            x = x - t.sum() * weights[i]
        return x * 2 + sum(t.numel() * (i + 1) for i, t in enumerate(listing()))

    return fn


def _check_reordering(table: str) -> None:
    module = TwoTensors(buffers=table == "_buffers")
    plain = "buffers" if table == "_buffers" else "parameters"

    def listing(named=False):
        return getattr(module, f"named_{plain}" if named else plain)()

    fn = _weighted_sum(listing)
    compiled = Compiled(fn)
    x = torch.zeros(1)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1
    # Popped and put back: the same tensors, listed in the other order.
    entries = getattr(module, table)
    entries["first"] = entries.pop("first")
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 2
    # A dict rebuilt in the original order finds the first trace again.
    module.__dict__[table] = dict(sorted(entries.items()))
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 2


def test_reordered_parameters_retrace():
    _check_reordering("_parameters")


def test_reordered_buffers_retrace():
    _check_reordering("_buffers")


def test_parameter_added_to_a_child_retraces():
    outer = nn.Sequential(TwoTensors())

    def fn(x):
        return x + sum(p.sum() for p in outer.parameters())

    compiled = Compiled(fn)
    x = torch.zeros(2)
    assert same(compiled(x), fn(x))
    outer[0].third = nn.Parameter(torch.full([2], 5.0))
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 2


class Cosine(nn.Module):
    def forward(self, x):
        return torch.cos(x) * 2


def _sine_forward(self, x):
    return torch.sin(x) - 1


def _tanh_forward(self, x):
    return torch.tanh(x) + 3


def test_forward_set_on_the_instance_runs_and_retraces():
    import types

    module = Cosine()

    def fn(x):
        return module(x) + 1

    compiled = Compiled(fn)
    x = torch.randn(5)
    assert same(compiled(x), fn(x))
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1
    module.forward = types.MethodType(_sine_forward, module)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 2
    assert "sin" in compiled.backend.ops(1)
    module.forward = types.MethodType(_tanh_forward, module)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 3
    del module.forward  # the class's forward again: the first trace fits
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 3
    module.forward = lambda x: x * 7  # a plain callable, called without self
    assert same(compiled(x), fn(x))
    assert not compiled.breaks


class ScaledCall(nn.Module):
    """Replaces nn.Module.__call__: calling the module is not calling forward."""

    def __call__(self, x):
        return self.forward(x) * 4 + 0.5

    def forward(self, x):
        return x - 2


class WrappedCall(nn.Module):
    def __call__(self, x):
        return super().__call__(x).neg()

    def forward(self, x):
        return x * 3


def test_class_call_override_runs_instead_of_forward():
    scaled, wrapped = ScaledCall(), WrappedCall()

    def fn(x):
        return scaled(x) + wrapped(x)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_hasattr_on_an_input_tensor_follows_its_own_attributes():
    def fn(x):
        if hasattr(x, "tag"):
            x = x + 2
        if hasattr(x, "fake_mode"):  # an attribute of fake tensors only
            x = x * 100
        return x - 1

    compiled = Compiled(fn, fullgraph=True)
    plain = torch.ones(3)
    assert same(compiled(plain), fn(plain))
    tagged = torch.ones(3)
    tagged.tag = None
    assert same(compiled(tagged), fn(tagged))
    assert compiled.backend.graph_count == 2
    assert same(compiled(plain), fn(plain))  # each input finds its own trace again
    assert same(compiled(tagged), fn(tagged))
    del tagged.tag
    assert same(compiled(tagged), fn(tagged))
    assert compiled.backend.graph_count == 2


class _Helpers(nn.Module):
    def proj(self, x):  # named like the subclass's submodule: the method wins in Python
        return x * 5.0


class ShadowedNames(_Helpers):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(4, 4)  # registered in _modules, read back as _Helpers.proj
        self.act = nn.Tanh()
        self.offset = torch.full([4], 0.25)  # a plain tensor: the instance dict
        self.gain = 3.0

    def act(self, x):
        return x - 1.0

    def offset(self):
        return torch.zeros(4)

    def gain(self):
        return -1.0

    def forward(self, x):
        return self.act(self.proj(x + self.offset)) * self.gain


def test_module_attribute_lookup_follows_pythons_order():
    module = ShadowedNames()
    compiled = Compiled(module, fullgraph=True)
    x = torch.randn(2, 4)
    assert same(compiled(x), module(x))
    assert compiled.backend.graph_count == 1
    assert "linear" not in compiled.backend.ops(0)
