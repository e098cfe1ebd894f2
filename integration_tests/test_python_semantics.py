"""Python semantics kept under the default backend (issue 26): one `inductor` case per class
of packages/bytecode_tracer/tests/tracer/test_python_semantics.py, compared with eager and
checked to have run compiled."""

from __future__ import annotations

import collections

import pytest
import torch

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")


def _ran_compiled() -> None:
    assert ember.counters["inductor"]["forward_runs"] >= 1, dict(ember.counters["inductor"])


def test_dict_views_are_live_under_inductor():
    def fn(x):
        table = {"a": x}
        vals = table.values()
        table["b"] = x.sin()
        return sum(vals) * len(vals)

    x = torch.randn(4)
    torch.testing.assert_close(ember.compile(fn, fullgraph=True)(x), fn(x))
    _ran_compiled()


class _Scaled:
    def __get__(self, obj, owner=None):
        return self if obj is None else obj.__dict__["_scaled"]

    def __set__(self, obj, value):
        obj.__dict__["_scaled"] = value * 3


class _Box:
    scaled = _Scaled()


def test_data_descriptor_set_under_inductor():
    def fn(x, box):
        box.scaled = x.cos()
        return box.scaled + 1

    x = torch.randn(4)
    eager_box, compiled_box = _Box(), _Box()
    expected = fn(x, eager_box)
    torch.testing.assert_close(ember.compile(fn, fullgraph=True)(x, compiled_box), expected)
    torch.testing.assert_close(compiled_box._scaled, eager_box._scaled)
    _ran_compiled()


class _Measured(collections.namedtuple("_Measured", "value scale")):
    pass


def test_namedtuple_attribute_kept_under_inductor():
    def fn(x):
        out = _Measured(x.exp(), 2)
        out.extra = x * out.scale
        return out

    x = torch.randn(4)
    expected, got = fn(x), ember.compile(fn, fullgraph=True)(x)
    torch.testing.assert_close(got.value, expected.value)
    torch.testing.assert_close(got.extra, expected.extra)
    _ran_compiled()


def test_rejected_builtin_arguments_raise_under_inductor():
    def fn(x):
        y = x.relu()
        try:
            flag = isinstance(y, torch.Tensor, exact=True)
        except TypeError:
            flag = "raised"
        return y * 2, flag

    x = torch.randn(4)
    expected, got = fn(x), ember.compile(fn, fullgraph=True)(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1] == "raised"
    _ran_compiled()


class _HalveInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        ctx.mark_dirty(t)
        return t.mul_(0.5)

    @staticmethod
    def backward(ctx, grad):
        return grad * 0.5


def test_dirty_input_of_a_function_under_inductor():
    def fn(a):
        b = a.sin()
        _HalveInPlace.apply(b)
        return (b * a).sum()

    grads = []
    for run in (fn, ember.compile(fn)):
        a = torch.linspace(-1.0, 1.0, 5, requires_grad=True)
        loss = run(a)
        loss.backward()
        grads.append((loss.detach(), a.grad))
    torch.testing.assert_close(grads[1], grads[0])
    _ran_compiled()


def test_scalar_type_dtype_argument_under_inductor():
    def fn(x):
        return x.mul(2).to(bool), x.to(float) * 3

    x = torch.randn(5)
    expected, got = fn(x), ember.compile(fn, fullgraph=True)(x)
    for e, g in zip(expected, got, strict=True):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e)
    _ran_compiled()
