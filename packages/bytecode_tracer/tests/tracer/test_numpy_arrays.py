"""NumPy code traced as tensor operations (variables/numpy_arrays.py, numpy_rules.py): arrays
in, arrays out, one graph under fullgraph=True, values and dtypes equal to plain NumPy's."""

# ruff: noqa: E731
from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import Compiled


def check_same(got, expected) -> None:
    assert type(got) is type(expected), (type(got), type(expected))
    if isinstance(expected, tuple | list):
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            check_same(g, e)
    elif isinstance(expected, np.ndarray | np.generic):
        assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    elif isinstance(expected, torch.Tensor):
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected)
    else:
        assert got == expected


f32 = lambda: np.arange(6, dtype=np.float32).reshape(2, 3) / 7 + 0.25
f64 = lambda: np.linspace(-1.0, 2.0, 12).reshape(3, 4)
i32 = lambda: np.arange(12, dtype=np.int32).reshape(3, 4) - 5
i64 = lambda: np.arange(8).reshape(2, 4)

CASES = {
    "ufuncs": (lambda a: np.sin(a) + np.cos(a) * np.exp(a) - np.sqrt(np.abs(a)), f32),
    "tanh_log_power": (lambda a: np.tanh(a) + np.log(a + 2) + np.power(a, 2), f64),
    "int_true_divide_is_float64": (lambda a: a / 2, i32),
    "int_plus_float_scalar": (lambda a: a + 1.5, i32),
    "float32_times_python_float_stays": (lambda a: a * 2.5 - 1, f32),
    "int_sin_is_float64": (lambda a: np.sin(a), i64),
    "comparisons": (lambda a: ((a > 0) & (a <= 3), a == 2, a != 1), i32),
    "maximum_minimum": (lambda a: np.maximum(a, 0.5) + np.minimum(a, a.T.T), f32),
    "floor_divide_mod": (lambda a: (a // 3, a % 3, -a), i32),
    "where_scalar_branch": (lambda a: np.where(a > 0.5, a, 0.0), f32),
    "where_mixed_dtypes": (lambda a: np.where(a > 0, a, a.astype(np.float32)), i32),
    "clip": (lambda a: np.clip(a, -1, 4), i32),
    "clip_one_sided": (lambda a: np.clip(a, None, 0.5), f32),
    "clip_method_float_bounds": (lambda a: a.clip(0.3, 0.6), f32),
    "sum_all_is_scalar": (lambda a: np.sum(a), f32),
    "sum_int32_is_int64": (lambda a: (a.sum(), a.sum(axis=1)), i32),
    "sum_axis_keepdims": (lambda a: np.sum(a, axis=0, keepdims=True), f64),
    "mean_of_ints_is_float64": (lambda a: (np.mean(a), a.mean(axis=0)), i32),
    "max_min_argmax": (lambda a: (a.max(), np.min(a, axis=1), np.argmax(a), a.argmax(axis=0)), f64),
    "prod_cumsum": (lambda a: (np.prod(a, axis=1), np.cumsum(a), a.cumsum(axis=1)), i32),
    "std_var": (lambda a: (a.std(), np.var(a, axis=0, ddof=1)), f64),
    "any_all": (lambda a: (np.any(a > 3), (a > -9).all(axis=0)), i32),
    "matmul_and_operator": (lambda a: (np.matmul(a, a.T), a @ a.T, np.dot(a, a.T)), f32),
    "dot_vectors_scalar": (lambda a: np.dot(a[0], a[1]), f64),
    "einsum": (lambda a: np.einsum("ij,kj->ik", a, a), f32),
    "concatenate_stack": (lambda a: (np.concatenate([a, a * 2], axis=1), np.stack([a, a])), f32),
    "concatenate_promotes": (lambda a: np.concatenate([a, a.astype(np.float64)]), i32),
    "reshape_transpose": (
        lambda a: (a.reshape(3, 2), np.reshape(a, (-1,)), a.transpose(1, 0), np.transpose(a), a.T),
        f32,
    ),
    "shape_ndim_dtype_size": (
        lambda a: (a.shape, a.ndim, a.size, a.dtype == np.float32, a * a.shape[0]),
        f32,
    ),
    "astype_copy_flatten": (
        lambda a: (a.astype(np.int64), a.astype(np.float32), a.copy(), a.flatten()),
        f32,
    ),
    "zeros_ones_default_float64": (lambda a: a + np.zeros((2, 3)) + np.ones(3), f32),
    "zeros_like_ones_like": (lambda a: (np.zeros_like(a), np.ones_like(a, dtype=np.int64)), f32),
    "arange_linspace": (
        lambda a: (
            np.arange(4),
            np.arange(0.0, 1.0, 0.25),
            np.linspace(0, 1, 5),
            a[0] * np.arange(3),
        ),
        f32,
    ),
    "arange_dtype": (lambda a: a + np.arange(3, dtype=np.float32), f32),
    "exp_power": (lambda a: np.exp(a) + np.power(2.0, a), f32),
    "indexing_and_slicing": (lambda a: (a[0], a[1, 2], a[:, 1:], a[..., None], a[::-1]), f64),
    "index_with_int_array": (lambda a: a[np.array([2, 0])], f64),
    "scalar_arithmetic": (lambda a: np.sum(a) * 2 + a.max(), f32),
    "float32_dtype_call": (lambda a: np.float32(a.sum()) + np.float32(1.5), f64),
    "len_and_iteration": (lambda a: [row * i for i, row in enumerate(a)] + [len(a)], f32),
    "asarray_same_array_array_copies": (lambda a: (np.asarray(a) is a, np.array(a) is a), f32),
    "constant_folding_prod_of_shape": (lambda a: a.reshape(int(np.prod(a.shape)), 1), f32),
}


@pytest.mark.parametrize("name", list(CASES))
def test_numpy_matches_numpy_in_one_graph(name):
    fn, make = CASES[name]
    compiled = Compiled(fn, fullgraph=True)
    check_same(compiled(make()), fn(make()))
    assert compiled.backend.graph_count == 1
    check_same(compiled(make() * 2), fn(make() * 2))  # the same guards, no recompile
    assert compiled.backend.graph_count == 1


def test_input_array_returned_as_is_keeps_identity():
    def fn(a, b):
        return a, b + 1

    a, b = f32(), f32()
    got = Compiled(fn, fullgraph=True)(a, b)
    assert got[0] is a
    check_same(got[1], b + 1)


def test_in_place_operator_writes_the_callers_array():
    def fn(a):
        a += 1
        a[0, 0] = -5
        return a * 2

    a, b = f64(), f64()
    compiled = Compiled(fn, fullgraph=True)
    check_same(compiled(a), fn(b))
    np.testing.assert_array_equal(a, b)


def test_new_dtype_or_shape_recompiles():
    fn = lambda a: np.sum(a, axis=0) - np.mean(a)
    compiled = Compiled(fn, fullgraph=True)
    for make in (f32, f64, i32, lambda: np.ones((5, 2), dtype=np.float32)):
        check_same(compiled(make()), fn(make()))
    assert compiled.backend.graph_count == 4


def test_strided_view_argument_is_guarded_by_strides():
    fn = lambda a: a * 2
    compiled = Compiled(fn, fullgraph=True)
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    check_same(compiled(base[:, :3]), fn(base[:, :3]))
    check_same(compiled(base[:2, :3].copy()), fn(base[:2, :3].copy()))
    check_same(compiled(base[::2, ::2]), fn(base[::2, ::2]))
    assert compiled.backend.graph_count == 3


def test_tensor_numpy_and_from_numpy_connect_the_worlds():
    def fn(x, a):
        b = x.numpy() * 2 + a  # tensor -> array
        y = torch.from_numpy(b) + 1  # array -> tensor
        return y, b

    x, a = torch.randn(2, 3), f32()
    compiled = Compiled(fn, fullgraph=True)
    got, expected = compiled(x, a), fn(x, a)
    check_same(got, expected)
    assert compiled.backend.graph_count == 1


def test_numpy_of_a_tensor_requiring_grad_raises_as_eager():
    fn = lambda x: x.numpy() + 1
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError):
        fn(x)
    with pytest.raises(RuntimeError):
        Compiled(fn)(x)


def test_function_outside_the_table_is_a_break_naming_it():
    def fn(a):
        return np.fft.fft(a) + 1

    with pytest.raises(Exception, match="fft"):
        Compiled(fn, fullgraph=True)(f64())
    check_same(Compiled(fn)(f64()), fn(f64()))  # without fullgraph: eager's result


def test_data_dependent_values_break():
    def fn(a):
        if a.sum() > 0:
            return a + 1
        return a - 1

    compiled = Compiled(fn)
    check_same(compiled(f32()), fn(f32()))
    check_same(compiled(-f32()), fn(-f32()))


def test_against_torch_compile_on_the_same_snippet():
    fn = CASES["where_scalar_branch"][0]
    ours = Compiled(fn, fullgraph=True)(f32())
    theirs = torch.compile(fn, backend="eager", fullgraph=True)(f32())
    check_same(ours, theirs)


def noisy(x):
    y = x * 2
    noise = np.random.rand(3)
    return y + torch.from_numpy(noise)


def test_numpy_random_method_is_a_call_into_c():
    """np.random.rand is a method of a Cython function: its __code__ holds no bytecode.
    It runs as a call (a break), drawing from NumPy's generator once, as in eager."""
    compiled = Compiled(noisy)
    x = torch.randn(3, dtype=torch.float64)
    np.random.seed(5)
    expected, after = noisy(x), np.random.uniform()
    np.random.seed(5)
    got = compiled(x)
    torch.testing.assert_close(got, expected)
    assert np.random.uniform() == after  # the generator advanced as much as in eager
    assert any("implemented in C" in b.reason for b in compiled.breaks), compiled.breaks
    assert compiled.backend.graph_count >= 1


def drawn(x):
    a = np.random.uniform(low=-1, high=1, size=(2, 3))
    y = x * torch.from_numpy(a)
    b = np.random.randint(0, 5, size=(3,))
    return y + torch.from_numpy(b), a


@pytest.mark.parametrize("fullgraph", [False, True])
def test_numpy_random_draws_run_before_the_graph_as_eager_draws(fullgraph):
    """np.random.uniform(..., size=...) of the global generator: called by the compiled frame,
    in order, with the same arguments; the arrays enter the graph as inputs (no break, no
    recompile per draw), equal to eager's draws from the same seed, the generator left
    where eager leaves it."""
    compiled = Compiled(drawn, fullgraph=fullgraph)
    x = torch.randn(2, 3, dtype=torch.float64)
    for seed in (3, 4, 5):
        np.random.seed(seed)
        expected, after = drawn(x), np.random.random()
        np.random.seed(seed)
        got = compiled(x)
        check_same(got, expected)
        assert np.random.random() == after
    assert compiled.backend.graph_count == 1 and not compiled.breaks
    first, second = compiled(x), compiled(x)
    assert not np.array_equal(first[1], second[1])  # new draws on each call


def scalar_draw(x):
    return x * np.random.uniform()


def test_numpy_random_scalar_draw_is_a_break():
    """Without size= the draw is a Python float: a value no guard could hold; a break."""
    compiled = Compiled(scalar_draw)
    np.random.seed(1)
    x = torch.ones(2)
    expected = scalar_draw(x)
    np.random.seed(1)
    torch.testing.assert_close(compiled(x), expected)
    assert compiled.breaks
