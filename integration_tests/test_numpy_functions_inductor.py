"""NumPy's nan_to_num, signbit, sort and take_along_axis in compiled code, under the default
backend (issue 26): the inductor twin of
packages/bytecode_tracer/tests/tracer/test_numpy_functions_more.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")


def test_numpy_functions_under_inductor():
    def fn(x):
        a = x.numpy()
        holes = np.where(a > 1.0, np.inf, a)
        order = np.argsort(a, axis=-1, kind="stable")
        return np.nan_to_num(holes), np.signbit(a), np.sort(a), np.take_along_axis(a, order, -1)

    torch.manual_seed(0)
    x = torch.randn(6, 7)
    compiled = ember.compile(fn, backend="inductor", fullgraph=True)
    for got, expected in zip(compiled(x), fn(x), strict=True):
        assert got.dtype == expected.dtype and np.allclose(got, expected)
    assert ember.counters["inductor"]["forward_runs"] >= 1, dict(ember.counters["inductor"])
    assert ember.counters["inductor"]["forward_graphs"] == 1


def test_numpy_function_without_rule_runs_eagerly_under_inductor():
    # np.unique breaks; NumPy's own frames are not compiled: one graph each side of it
    def fn(x):
        u = np.unique(np.round((x * 2).numpy()))
        return torch.from_numpy(u) + 1

    x = torch.tensor([1.0, 1.0, 2.0, 3.0, 2.0])
    got = ember.compile(fn, backend="inductor")(x)
    assert torch.equal(got, fn(x))
    assert ember.counters["inductor"]["forward_graphs"] == 2, dict(ember.counters["inductor"])


def test_int_argument_as_numpy_axis_under_inductor():
    # the axis changes between calls: specialized per value (a recompile), never a break
    def fn(a, idx, axis):
        return np.take_along_axis(a, idx, axis) * 2

    a = np.arange(9.0).reshape(3, 3)
    idx = np.array([[2, 0, -1], [1, 1, 0], [0, 2, 2]])
    compiled = ember.compile(fn, backend="inductor")
    for axis in (0, 1, None):
        i = idx.ravel() if axis is None else idx
        assert np.array_equal(compiled(a, i, axis), fn(a, i, axis))
    assert ember.counters["inductor"]["forward_graphs"] == 3, dict(ember.counters["inductor"])


def test_tensor_of_an_array_with_a_dtype_under_inductor():
    def fn(x, y):
        a = np.stack([np.ones((2, 3)) * 1.7, x.numpy() * -1.7], axis=0)
        t = torch.tensor(a, dtype=torch.long)
        t.unsqueeze_(0)
        return t + y, torch.as_tensor(a, dtype=torch.float32)

    x, y = torch.ones(2, 3, dtype=torch.float64), torch.randn(1, 1, 2, 3)
    got = ember.compile(fn, backend="inductor", fullgraph=True)(x, y)
    for g, e in zip(got, fn(x, y), strict=True):
        assert g.dtype == e.dtype and torch.equal(g, e), (g, e)
    assert ember.counters["inductor"]["forward_graphs"] == 1, dict(ember.counters["inductor"])


def test_array_divided_by_tensor_under_inductor():
    def fn(t, m, a):
        return a / t, m @ a

    t, m, a = torch.rand(5) + 0.5, torch.rand(3, 5), np.arange(5.0)
    got = ember.compile(fn, backend="inductor", fullgraph=True)(t, m, a)
    for g, e in zip(got, fn(t, m, a), strict=True):
        assert type(g) is torch.Tensor and g.dtype == e.dtype and torch.allclose(g, e)
    assert ember.counters["inductor"]["forward_graphs"] == 1, dict(ember.counters["inductor"])


def test_numpy_scalar_argument_under_inductor():
    def fn(x, s):
        return x * s + np.float64(s) ** 2

    compiled = ember.compile(fn, backend="inductor", fullgraph=True)
    x = torch.randn(6)
    for s in (np.int64(3), np.int64(3), np.float32(0.5)):
        got, expected = compiled(x, s), fn(x, s)
        assert got.dtype == expected.dtype and torch.allclose(got, expected)
    assert ember.counters["inductor"]["forward_graphs"] == 2, dict(ember.counters["inductor"])


def test_numpy_issubdtype_under_inductor():
    def fn(x, n):
        return np.issubdtype(type(n), np.integer) + x * 2

    x = torch.randn(4)
    got = ember.compile(fn, backend="inductor", fullgraph=True)(x, 3)
    assert torch.equal(got, fn(x, 3))
    assert ember.counters["inductor"]["forward_graphs"] == 1, dict(ember.counters["inductor"])


def test_numpy_force_of_a_grad_requiring_input_under_inductor():
    # numpy(force=True) of a leaf that requires grad: the array shares the leaf's memory
    def fn(x):
        return x.numpy(force=True), (x * 2).numpy(force=True).sum()

    x = torch.randn(5, requires_grad=True)
    (a, s), (ea, es) = ember.compile(fn, backend="inductor")(x), fn(x)
    assert type(a) is np.ndarray and np.shares_memory(a, ea) and np.array_equal(a, ea)
    assert type(s) is type(es) and np.isclose(s, es)
    assert ember.counters["inductor"]["forward_graphs"] == 1, dict(ember.counters["inductor"])


def test_nan_to_num_of_complex_under_inductor():
    def fn(a):
        return np.nan_to_num(a), np.nan_to_num(a, nan=1.0, posinf=2.0, neginf=-3.0)

    a = np.array([complex(np.nan, np.inf), complex(-np.inf, 1), 3 + 4j], dtype=np.complex64)
    got = ember.compile(fn, backend="inductor", fullgraph=True)(a)
    for g, e in zip(got, fn(a), strict=True):
        assert g.dtype == e.dtype and np.array_equal(g, e), (g, e)
    assert ember.counters["inductor"]["forward_graphs"] == 1, dict(ember.counters["inductor"])


def test_tensor_of_numpy_scalars_under_inductor():
    def fn(x):
        b = x.numpy()
        return torch.LongTensor([np.arange(6)[2], 4]) + 1, torch.FloatTensor([b[0], b[2]]) * 2

    x = torch.tensor([1.7, -2.2, 3.0])
    got = ember.compile(fn, backend="inductor", fullgraph=True)(x)
    for g, e in zip(got, fn(x), strict=True):
        assert g.dtype == e.dtype and torch.equal(g, e), (g, e)
    assert ember.counters["inductor"]["forward_graphs"] == 1, dict(ember.counters["inductor"])


def test_numpy_dtype_argument_under_inductor():
    def fn(x, dt):
        return x.numpy().astype(dt) * 3

    compiled = ember.compile(fn, backend="inductor", fullgraph=True)
    x = torch.tensor([1.5, -2.0])
    for dt in (np.dtype(np.int32), np.dtype("int32"), np.dtype(np.float16)):
        got, expected = compiled(x, dt), fn(x, dt)
        assert got.dtype == expected.dtype and np.array_equal(got, expected)
    assert ember.counters["inductor"]["forward_graphs"] == 2, dict(ember.counters["inductor"])


def test_symbolic_int_operand_under_inductor():
    def fn(x, n):
        return np.where(x < 0.5, n, x) * 2

    compiled = ember.compile(fn, backend="inductor", dynamic=True)
    x = np.random.default_rng(0).standard_normal(8)
    for n in (3, 4):
        got, expected = compiled(x, n), fn(x, n)
        assert got.dtype == expected.dtype and np.allclose(got, expected)
    assert ember.counters["inductor"]["forward_graphs"] == 1, dict(ember.counters["inductor"])


def test_python_int_out_of_int8_bounds_under_inductor():
    # the twin of packages/bytecode_tracer/tests/tracer/test_numpy_python_int_bounds.py:
    # inductor's cast of 300 to int8 wraps (to 44); NumPy raises or compares exactly
    a = np.array([-44, 0, 3, 44, 127], dtype=np.int8)
    add = ember.compile(lambda a, n: a + n, backend="inductor", dynamic=True)
    for n in (3, -7):
        assert np.array_equal(add(a, n), a + n)
    with pytest.raises(OverflowError):
        add(a, 300)
    with pytest.raises(OverflowError):
        ember.compile(lambda a: a * 300, backend="inductor")(a)
    compare = ember.compile(lambda a: (a < 300, a == -300, np.clip(a, 0, 300)), backend="inductor")
    for got, expected in zip(compare(a), (a < 300, a == -300, np.clip(a, 0, 300)), strict=True):
        assert got.dtype == expected.dtype and np.array_equal(got, expected), (got, expected)
    assert ember.counters["inductor"]["forward_graphs"] >= 1, dict(ember.counters["inductor"])
