"""Inlined user functions, closures, comprehensions and Python containers."""

from __future__ import annotations

import functools

import torch

from conftest import Compiled, same

x = torch.randn(3, 4)


def run(fn, *args, graphs=1, **kwargs):
    expected = fn(*args, **kwargs)
    compiled = Compiled(fn)
    got = compiled(*args, **kwargs)
    assert same(got, expected)
    assert compiled.backend.graph_count == graphs, [g.code for g in compiled.backend.graphs]
    return compiled


def helper(t, scale=2.0, *, shift=1):
    return t * scale + shift


def variadic(*ts, **named):
    total = sum(ts[1:], ts[0])
    for key in sorted(named):
        total = total + named[key]
    return total


def test_inline_with_defaults_and_keywords():
    compiled = run(lambda a: helper(a) + helper(a, 3.0, shift=2), x)
    assert compiled.backend.op_count == 5


def test_inline_varargs_and_kwargs():
    run(lambda a: variadic(a, a * 2, b=a, a=a + 1), x)


def test_call_with_star_args():
    def fn(a):
        args = (a, 3.0)
        kwargs = {"shift": 5}
        return helper(*args, **kwargs)

    run(fn, x)


def test_closures_and_nested_functions():
    def fn(a):
        k = 3

        def inner(t):
            return t * k

        square = lambda t: t * t  # noqa: E731
        return inner(a) + square(a)

    run(fn, x)


def test_closure_over_outer_function_value():
    factor = torch.tensor(2.0)

    def fn(a):
        return a * factor

    run(fn, x)


def test_functools_partial():
    shifted = functools.partial(helper, shift=10)
    run(lambda a: shifted(a), x)


def test_recursion_inlines_to_a_depth():
    def power(t, n):
        return t if n == 1 else t * power(t, n - 1)

    compiled = run(lambda a: power(a, 5), x)
    assert compiled.backend.op_count == 4


def test_list_comprehension_and_generator_free_builtins():
    def fn(a):
        parts = [a * i for i in range(3)]
        pairs = {f"k{i}": p for i, p in enumerate(parts)}
        return torch.stack(parts).sum(0) + pairs["k2"] + len(pairs)

    run(fn, x)


def test_unpacking_and_slicing_lists():
    def fn(a):
        first, *rest = [a, a + 1, a + 2]
        head = rest[:1]
        return first + head[0] + rest[-1]

    run(fn, x)


def test_dict_methods():
    def fn(a, d):
        total = a
        for key, value in d.items():
            total = total + value * len(key)
        return total + d.get("missing", 0) + ("x" in d)

    run(fn, x, {"x": 1.0, "yy": 2.0})


def test_tuple_of_tensors_argument():
    run(lambda ts: ts[0] + ts[1], (x, x * 2))


def test_string_formatting_at_trace_time():
    def fn(a, name):
        label = f"{name}-{a.shape[0]}"
        return a * len(label)

    run(fn, x, "abc")


def test_isinstance_and_type_checks():
    def fn(a, b):
        if isinstance(b, torch.Tensor):
            return a + b
        if isinstance(b, int | float):
            return a * b
        return a

    run(fn, x, x)
    run(fn, x, 3)
    run(fn, x, "s", graphs=0)  # returns its input: nothing to compile


def test_getattr_hasattr_on_objects():
    class Box:
        scale = 3.0

        def __init__(self):
            self.bias = torch.ones(4)

    box = Box()

    def fn(a, b):
        extra = getattr(b, "missing", 0.5)
        return a * b.scale + b.bias + extra + hasattr(b, "bias")

    run(fn, x, box)


def test_method_of_user_object_inlines():
    class Scaler:
        def __init__(self, k):
            self.k = k

        def apply(self, t):
            return t * self.k

    s = Scaler(4)
    run(lambda a: s.apply(a) + 1, x)


def test_shape_arithmetic_with_tuple_literals():
    def fn(a):
        shape = (-1,) + a.shape[1:] + (1,)  # noqa: RUF005 - the concatenation is under test
        return a.reshape(shape) * len(shape)

    run(fn, x)
