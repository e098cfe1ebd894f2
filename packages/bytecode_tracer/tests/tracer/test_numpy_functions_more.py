"""NumPy functions traced as torch ops with NumPy's results (issue 26): nan_to_num,
signbit and other ufuncs, sort, stable argsort and take_along_axis, in one graph and equal
to NumPy's (dtype included). An argsort whose order of ties is NumPy's own stays a break.
integration_tests/test_numpy_functions_inductor.py runs them under the default backend."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import Compiled


def _check(compiled, fn, *args):
    got, expected = compiled(*args), fn(*args)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert type(g) is type(e) and g.dtype == e.dtype, (g, e)
        assert np.allclose(g, e, equal_nan=True), (g, e)


def test_nan_to_num_signbit_and_ufuncs():
    def fn(x):
        a = x.numpy()
        holes = np.where(a > 1.5, np.inf, np.where(a < -1.5, np.nan, a))
        return (
            np.nan_to_num(holes),
            np.nan_to_num(holes, nan=-7.0, posinf=3.0, neginf=-3.0),
            np.nan_to_num(np.arange(4)),
            np.signbit(a),
            np.copysign(a, -1.0),
            np.logaddexp(a, a * 2),
            np.degrees(a),
            np.float_power(np.abs(a), 3),
        )

    compiled = Compiled(fn, fullgraph=True)
    torch.manual_seed(0)
    _check(compiled, fn, torch.randn(4, 5) * 2)
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_sort_stable_argsort_and_take_along_axis():
    def fn(x):
        a = x.numpy()
        order = np.argsort(a, axis=1, kind="stable")
        last = np.full((a.shape[0], 1), -1, dtype=np.int64)  # negative: from the end
        return (
            np.sort(a),
            np.sort(a, axis=None),
            order,
            np.take_along_axis(a, order, axis=1),
            np.take_along_axis(a, last, axis=1),
        )

    compiled = Compiled(fn, fullgraph=True)
    x = torch.tensor([[3.0, 1.0, 3.0, 0.5], [2.0, 2.0, -1.0, 2.0]])  # ties included
    _check(compiled, fn, x)
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_default_argsort_is_a_break():
    def fn(x):
        return np.argsort(x.numpy())

    compiled = Compiled(fn)
    x = torch.tensor([2.0, 1.0, 2.0, 1.0])
    assert np.array_equal(compiled(x), fn(x))
    assert any("argsort" in str(b) for b in compiled.breaks)


def test_numpy_own_python_code_is_not_compiled_frame_by_frame():
    # np.unique has no rule: a break, and it runs eagerly; its helpers (Python code in
    # NumPy's package) are not compiled as frames of their own, as under torch.compile.
    def fn(x):
        a = (x * 2).numpy()
        u = np.unique(np.round(a))
        return torch.from_numpy(u) + 1

    compiled = Compiled(fn)
    x = torch.tensor([1.0, 1.0, 2.0, 3.0, 2.0])
    got, expected = compiled(x), fn(x)
    assert torch.equal(got, expected) and got.dtype == expected.dtype
    assert any("numpy.unique" in str(b) for b in compiled.breaks)
    traced = {r.code.co_filename for r in compiled.compiler.records}
    assert traced == {fn.__code__.co_filename}, traced
    assert compiled.backend.graph_count == 2  # before and after the break


def test_symbolic_int_as_axis_is_specialized_and_as_shape_stays_symbolic():
    # an int argument that changed between calls (symbolic) where NumPy needs a value (an
    # axis): the trace guards its value and recompiles for the next, never a break; as a
    # size of np.ones it stays symbolic (the second graph serves n=3 and n=4)
    def fn(a, idx, axis, n):
        return np.take_along_axis(a, idx, axis) + np.ones((1, n)).sum()

    compiled = Compiled(fn)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3)).astype(np.float32)
    idx = rng.integers(-3, 3, size=(3, 3))
    calls = [(0, 2), (1, 3), (0, 2), (1, 4)]
    for axis, n in calls:
        got, expected = compiled(a, idx, axis, n), fn(a, idx, axis, n)
        assert got.dtype == expected.dtype and np.allclose(got, expected)
    assert compiled.backend.graph_count == 2 and not compiled.breaks


def test_take_along_axis_none_is_along_the_flattened_array():
    def fn(x, i):
        return np.take_along_axis(x.numpy(), i.numpy(), None)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.arange(12.0).reshape(3, 4)
    i = torch.tensor([11, 0, -1, 5])
    got, expected = compiled(x, i), fn(x, i)
    assert got.dtype == expected.dtype and np.array_equal(got, expected)
    assert compiled.backend.graph_count == 1


def test_tensor_of_an_array_with_a_dtype():
    # torch.tensor(a, dtype=) converts a copy; torch.as_tensor(a, dtype=) shares the
    # array's memory where the dtype is its own, else converts
    def fn(x, y):
        a = np.stack([np.ones((2, 3)) * 1.7, x.numpy() * -1.7], axis=0)
        t = torch.tensor(a, dtype=torch.long)
        t.unsqueeze_(0)
        same = torch.as_tensor(a, dtype=torch.float64)
        same.add_(1)  # writes into a (as eager: the same memory)
        return t + y, torch.as_tensor(a, dtype=torch.float32), torch.tensor(a, dtype=None)

    compiled = Compiled(fn, fullgraph=True)
    x, y = torch.ones(2, 3, dtype=torch.float64), torch.randn(1, 1, 2, 3)
    got, expected = compiled(x, y), fn(x, y)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype and torch.equal(g, e), (g, e)
    assert compiled.backend.graph_count == 1


def test_array_divided_by_tensor_and_tensor_matmul_array():
    # `a / t`: ndarray defers to Tensor.__rtruediv__ (t.reciprocal() * a, through NumPy);
    # `t @ a`: torch.matmul refuses the array, so NumPy's matmul answers; tensors both
    def fn(t, m, a, ai):
        b = a.copy()
        b /= t  # rebinds b to a tensor, as eager
        return a / t, ai / t, b, t @ a, m @ a, t @ ai

    compiled = Compiled(fn, fullgraph=True)
    torch.manual_seed(0)
    t, m = torch.rand(5) + 0.5, torch.rand(3, 5)
    a, ai = np.random.default_rng(0).random(5), np.arange(5)
    got, expected = compiled(t, m, a, ai), fn(t, m, a, ai)
    for g, e in zip(got, expected, strict=True):
        assert type(g) is type(e) is torch.Tensor and g.dtype == e.dtype, (g, e)
        assert g.shape == e.shape and torch.allclose(g, e), (g, e)
    assert compiled.backend.graph_count == 1


def test_numpy_scalar_arguments_are_guarded_constants():
    # np.int64(8) passed in: a constant of the trace, guarded by its exact type and value
    def fn(x, n, s):
        return x + (n % s), np.array([s, s * 2])

    compiled = Compiled(fn, fullgraph=True, dynamic=True)
    x = torch.randn(6)
    calls = [np.int64(8), np.int64(8), np.int64(5), np.int32(5), np.float32(2.5)]
    for s in calls:
        got, expected = compiled(x, 4096, s), fn(x, 4096, s)
        assert got[0].dtype == expected[0].dtype and torch.allclose(got[0], expected[0])
        assert got[1].dtype == expected[1].dtype and np.array_equal(got[1], expected[1])
    assert compiled.backend.graph_count == 4  # one per distinct type and value
    assert not compiled.breaks


def test_numpy_type_questions_are_answered_at_trace_time():
    def fn(x, n):
        is_int = np.issubdtype(type(n), np.integer)
        wide = np.result_type(np.int8, np.float16)
        return is_int + x, np.dtype(np.float32), wide, np.can_cast(np.int64, np.float32)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    for n in (4096, 2.5):
        got, expected = compiled(x, n), fn(x, n)
        assert torch.equal(got[0], expected[0]) and got[1:] == expected[1:]
    assert compiled.backend.graph_count == 2 and not compiled.breaks


def test_nan_to_num_of_complex_arrays():
    def fn(a):
        return np.nan_to_num(a), np.nan_to_num(a, nan=1.0, posinf=2.0, neginf=-3.0)

    compiled = Compiled(fn, fullgraph=True)
    a = np.array([complex(np.nan, np.inf), complex(-np.inf, 1), 3 + 4j], dtype=np.complex64)
    _check(compiled, fn, a)
    assert compiled.backend.graph_count == 1


def test_tensor_of_numpy_scalars_with_a_dtype():
    # torch.LongTensor([a[0], a[2]]) / torch.tensor([...], dtype=): NumPy scalars of the
    # trace converted as eager converts them; np.float32 into int64 raises there: a break
    def fn(x):
        a = np.array([1, 2, 3, 4, 5, 6], dtype=np.int64)
        b = x.numpy()
        return (
            torch.LongTensor([a[0], a[2], a[4]]),
            torch.FloatTensor([[b[0], b[1]], [2.5, b[2]]]),
            torch.tensor([a[1], 7], dtype=torch.float64),
        )

    compiled = Compiled(fn, fullgraph=True)
    x = torch.tensor([1.7, -2.2, 3.0])
    for g, e in zip(compiled(x), fn(x), strict=True):
        assert g.dtype == e.dtype and torch.equal(g, e), (g, e)
    assert compiled.backend.graph_count == 1

    def raises(x):
        return torch.LongTensor([x.numpy()[0], 3])

    compiled = Compiled(raises)
    with pytest.raises(TypeError, match="cannot be interpreted as an integer"):
        compiled(x)
    assert any("cannot be passed to a tensor operation" in str(b) for b in compiled.breaks)


def test_numpy_dtype_arguments_are_guarded_constants():
    # equal dtypes made apart share one trace; another dtype retraces
    def fn(x, dt):
        return x.numpy().astype(dt) * 2, np.result_type(dt, np.int8)

    compiled = Compiled(fn)
    x = torch.tensor([1.5, -2.0])
    calls = [np.dtype(np.int32), np.ones(1, dtype=np.int32).dtype, np.dtype("int32"),
             np.dtype(np.int16), np.dtype(np.float16)]  # fmt: skip
    for dt in calls:
        got, expected = compiled(x, dt), fn(x, dt)
        assert got[0].dtype == expected[0].dtype and np.array_equal(got[0], expected[0])
        assert got[1] == expected[1]
    assert compiled.backend.graph_count == 3 and not compiled.breaks  # int32, int16, float16


def test_symbolic_int_operand_stays_symbolic():
    # an int argument made symbolic, as an operand of NumPy functions: a weak scalar of the
    # graph (NumPy's dtype rules for a Python number), one graph for every value
    def fn(x, n):
        return (
            np.where(x < 0.5, n, x),
            np.clip(x, n - 5, None),
            x.astype(np.float32) * n,
            np.maximum(np.arange(3), n),
        )

    compiled = Compiled(fn, dynamic=True)
    x = np.random.default_rng(0).standard_normal(8)
    for n in (3, 4, 5):
        got, expected = compiled(x, n), fn(x, n)
        for g, e in zip(got, expected, strict=True):
            assert g.dtype == e.dtype and np.allclose(g, e), (g, e)
    assert compiled.backend.graph_count == 1 and not compiled.breaks
