"""Common subexpressions computed once (cse.py), never where eager's results would differ."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from conftest import CountingCompiler, check_against_eager
from ember_aot_autograd import aot_function, trace_joint, trace_to_aten
from ember_aot_autograd.cse import eliminate_common_subexpressions

aten = torch.ops.aten


def _count(gm: torch.fx.GraphModule, target) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and n.target == target)


def _layers(x: torch.Tensor, mask: torch.Tensor, ws: list[torch.Tensor]) -> torch.Tensor:
    """The shape of a decoder stack: every layer turns the same mask into the same bias."""
    for w in ws:
        bias = torch.where(mask, 0.0, float("-inf"))
        x = torch.softmax(x @ w + bias, dim=-1)
    return x


def _layer_inputs(requires_grad: bool = False) -> list[torch.Tensor]:
    torch.manual_seed(0)
    mask = torch.ones(8, 8, dtype=torch.bool).tril()
    ws = [torch.randn(8, 8, requires_grad=requires_grad) for _ in range(3)]
    return [torch.randn(8, 8), mask, *ws]


def test_a_repeated_computation_becomes_one_node():
    gm = trace_to_aten(lambda x, m, *ws: _layers(x, m, list(ws)), _layer_inputs())
    assert _count(gm, aten.where.self) == 1
    assert _count(gm, aten.mm.default) == 3  # different weights: kept apart


def test_the_joint_graph_computes_the_bias_once_and_matches_eager():
    inputs = _layer_inputs(requires_grad=True)
    joint = trace_joint(lambda x, m, *ws: _layers(x, m, list(ws)), inputs)
    assert _count(joint.gm, aten.where.self) <= 2  # the bias, and its use in the backward
    check_against_eager(lambda x, m, *ws: _layers(x, m, list(ws)), _layer_inputs(True))


def test_two_outputs_the_caller_sees_stay_distinct_tensors():
    def f(x):
        a, b = x + 1, x + 1
        return a.view(-1), b, (x * 2).sum() + (x * 2).sum()

    compiled = aot_function(f, CountingCompiler())
    x = torch.randn(3, 4)
    a, b, s = compiled(x)
    assert a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr()
    b.add_(1)
    torch.testing.assert_close(a, (x + 1).view(-1))  # writing one does not change the other
    torch.testing.assert_close(s, 4 * x.sum())
    gm = trace_to_aten(f, [x])
    assert _count(gm, aten.add.Tensor) == 3  # both `x + 1` (returned), and the sum of sums
    assert _count(gm, aten.mul.Tensor) == 1 and _count(gm, aten.sum.default) == 1


def test_random_ops_are_never_merged():
    f = lambda x: torch.rand_like(x) - torch.rand_like(x)  # noqa: E731
    out = aot_function(f, CountingCompiler())(torch.zeros(1000))
    assert out.abs().max() > 0


def test_constants_are_compared_with_their_type_and_sign():
    def f(x):
        return x * 0.0, x * -0.0, x + 1, x + 1.0

    x = torch.arange(3)  # integer: `x + 1` stays int64, `x + 1.0` is float
    outs = aot_function(f, CountingCompiler())(x)
    for got, want in zip(outs, f(x), strict=True):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want)
        assert torch.equal(torch.signbit(got.float()), torch.signbit(want.float()))


def test_ops_that_write_an_input_are_never_merged():
    graph = torch.fx.Graph()
    x, mean, var = (graph.placeholder(n) for n in ("x", "mean", "var"))
    args = (x, None, None, mean, var, True, 0.1, 1e-5)
    first = graph.call_function(aten.native_batch_norm.default, args)
    second = graph.call_function(aten.native_batch_norm.default, args)
    graph.output((first, second))
    writes = lambda node: node.target is aten.native_batch_norm.default  # noqa: E731
    assert eliminate_common_subexpressions(graph, writes=writes) == 0


def test_batch_norm_twice_updates_running_statistics_twice():
    def f(x, mean, var):
        return F.batch_norm(x, mean, var, training=True) + F.batch_norm(x, mean, var, training=True)

    x = torch.randn(4, 3)
    mean, var = torch.zeros(3), torch.ones(3)
    want_mean, want_var = mean.clone(), var.clone()
    want = f(x, want_mean, want_var)
    got = aot_function(f, CountingCompiler())(x, mean, var)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(mean, want_mean)
    torch.testing.assert_close(var, want_var)
