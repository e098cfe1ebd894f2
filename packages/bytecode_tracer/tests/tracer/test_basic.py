"""Straight-line tensor code: one graph, the expected ops, eager's results."""

from __future__ import annotations

import math
import operator

import pytest
import torch
import torch.nn.functional as F

from conftest import Compiled, same

x = torch.randn(4, 5)
y = torch.randn(4, 5)


def check(fn, *args, graphs=1, ops=None, **kwargs):
    expected = fn(*args, **kwargs)
    compiled = Compiled(fn)
    got = compiled(*args, **kwargs)
    assert same(got, expected), (got, expected)
    assert compiled.backend.graph_count == graphs, compiled.backend.graphs
    if ops is not None:
        assert compiled.backend.ops(0) == ops
    again = compiled(*args, **kwargs)  # cache hit
    assert same(again, expected)
    assert compiled.backend.graph_count == graphs, "second call must not recompile"
    return compiled


@pytest.mark.parametrize(
    "op",
    [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow, operator.matmul,
     operator.floordiv, operator.mod, operator.lt, operator.ge, operator.eq],
)  # fmt: skip
def test_binary_operators(op):
    b = y.T if op is operator.matmul else y.abs() + 1
    check(lambda a, b: op(a, b), x, b, ops=[op.__name__])


@pytest.mark.parametrize(
    "fn", [torch.sin, torch.relu, torch.sigmoid, torch.tanh, torch.exp, torch.abs]
)
def test_torch_unary_functions(fn):
    check(lambda a: fn(a) + 1, x, ops=[fn.__name__, "add"])


@pytest.mark.parametrize("name", ["sum", "mean", "relu", "t", "contiguous", "float", "exp"])
def test_tensor_methods(name):
    check(lambda a: getattr(a, name)(), x, ops=[name])


def test_functional_calls():
    check(lambda a: F.gelu(F.softmax(a, dim=-1)), x, ops=["softmax", "gelu"])


def test_method_with_arguments_and_keywords():
    check(lambda a: a.sum(dim=1, keepdim=True).view(2, 2), x, ops=["sum", "view"])


def test_shape_and_metadata_are_constants():
    def fn(a):
        n, m = a.shape
        return a.reshape(m, n) * a.size(0) + a.ndim + a.dim() + (a.dtype == torch.float32)

    check(fn, x, ops=["reshape", "mul", "add", "add", "add"])


def test_python_arithmetic_is_folded():
    def fn(a):
        scale = math.sqrt(16) * 2 + len([1, 2, 3])
        return a * scale

    check(fn, x, ops=["mul"])


def test_indexing_and_slicing():
    check(lambda a: a[1:3, ::2] + a[0, 1:4] + a[..., None][:2, 1:4, 0], x)


def test_setitem_on_a_fresh_tensor():
    def fn(a):
        out = torch.zeros(4, 5)
        out[1] = a[1]
        return out

    check(fn, x)


def test_creation_functions():
    check(lambda a: a + torch.ones(4, 5) + torch.arange(5) + torch.full((4, 5), 2.0), x)


def test_returns_structures():
    compiled = check(lambda a, b: {"s": (a + b, [a * b, 3]), "n": None}, x, y)
    assert compiled.backend.op_count == 2


def test_returns_an_input_unchanged_and_constants():
    check(lambda a, b: (a, b + 1, "text", 7), x, y)


def test_unused_arguments_are_not_graph_inputs():
    compiled = check(lambda a, b, c: a + 1, x, y, torch.randn(3))
    placeholders = [n for n in compiled.backend.graphs[0].graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 1


def test_aliased_arguments_share_one_input():
    compiled = check(lambda a, b: a + b, x, x)
    placeholders = [n for n in compiled.backend.graphs[0].graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 1


def test_inplace_update_of_an_input_is_applied():
    def fn(a):
        a.add_(1)
        return a * 2

    a1, a2 = x.clone(), x.clone()
    expected = fn(a1)
    compiled = Compiled(fn)
    got = compiled(a2)
    assert torch.equal(a2, a1) and same(got, expected)


def test_frame_without_tensor_work_is_left_alone():
    compiled = Compiled(lambda n: n * 2 + 1)
    assert compiled(3) == 7
    assert compiled.backend.graph_count == 0


def test_grad_flows_through_the_graph():
    w = torch.randn(5, requires_grad=True)
    compiled = Compiled(lambda a, w: (a * w).sum())
    compiled(x, w).backward()
    assert torch.allclose(w.grad, x.sum(0))


def test_code_from_exec_and_stdin_is_compiled():
    namespace = {"torch": torch}
    exec(compile("def f(a):\n    return a.sin() + 1\n", "<stdin>", "exec"), namespace)
    check(namespace["f"], x, ops=["sin", "add"])


def test_device_flags_are_trace_time_constants():
    """x.is_cpu (F.interpolate's deterministic-algorithms check reads it) is a constant of the
    guarded device, as is_cuda: no graph break."""

    def fn(x):
        y = x + 1 if x.is_cpu else x - 1
        return y * 2 if not x.is_xpu and not x.is_cuda else y

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert torch.equal(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1 and compiled.backend.op_count == 2
