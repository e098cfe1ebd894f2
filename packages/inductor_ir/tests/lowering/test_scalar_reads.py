"""Host scalar reads (`aten._local_scalar_dense`, from `t.item()`) and the assertions on them
(`aten._assert_scalar`): what the lowering records for the wrapper, and what it declares
out of reach (ScalarReadUnsupported) instead of lowering it wrong."""

from __future__ import annotations

import dataclasses
import operator

import pytest
import sympy
import torch

from ember_inductor_ir import REFERENCE, ScalarReadUnsupported, lower, schedule
from ember_inductor_ir.layout import FixedLayout, canonical_size
from ember_inductor_ir.lowering.scalar_reads import _element_index
from ember_primops import prims

es = pytest.importorskip("ember_symbolic")
aten = torch.ops.aten
FLOATS = dataclasses.replace(REFERENCE, float_scalar_args=True)


def _node(graph, target, args, val, kwargs=None):
    node = graph.call_function(target, args, kwargs or {})
    node.meta["val"] = val
    return node


def _scaled(env, read_of_a_sum=False, dtype=torch.float32):
    """out = x * w.item() (or x * x.sum().item()) as aot writes it."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(3)
    w = graph.placeholder("w")
    w.meta["val"] = torch.empty((), dtype=dtype)
    source = w
    if read_of_a_sum:
        source = _node(graph, prims.sum, (x, [0]), torch.empty(()))
    value = env.unbacked_value(float) if dtype.is_floating_point else env.create_unbacked_symint()
    read = _node(graph, aten._local_scalar_dense.default, (source,), value)
    cpu = {"dtype": torch.float32, "device": torch.device("cpu")}
    scalar = _node(graph, prims.scalar_tensor, (read,), torch.empty(()), cpu)
    out = _node(graph, prims.mul, (x, scalar), torch.empty(3))
    graph.output((out,))
    return torch.fx.GraphModule({}, graph), read.meta["val"].node.expr


def test_a_float_read_of_an_input_is_bound_by_the_wrapper():
    env = es.ShapeEnv(allow_scalar_outputs=True)
    gm, symbol = _scaled(env)
    lowering = lower(gm, [torch.randn(3), torch.tensor(2.0)], target=FLOATS)
    read = lowering.scalar_reads[symbol]
    assert (read.position, read.index, read.is_float) == (1, (), True)
    sched = schedule(lowering)
    assert sched.scalar_reads == {symbol: read} and sched.shape_env is env


def test_an_int_read_is_a_size_argument_on_any_target():
    env = es.ShapeEnv(allow_scalar_outputs=True)
    gm, symbol = _scaled(env, dtype=torch.int64)
    lowering = lower(gm, [torch.randn(3), torch.tensor(2)], target=REFERENCE)
    assert not lowering.scalar_reads[symbol].is_float


def test_a_float_read_needs_a_target_with_float_scalar_arguments():
    gm, _ = _scaled(es.ShapeEnv(allow_scalar_outputs=True))
    with pytest.raises(ScalarReadUnsupported, match="float scalar"):
        lower(gm, [torch.randn(3), torch.tensor(2.0)], target=REFERENCE)


def test_a_read_of_a_computed_value_is_declared():
    gm, _ = _scaled(es.ShapeEnv(allow_scalar_outputs=True), read_of_a_sum=True)
    with pytest.raises(ScalarReadUnsupported, match="computed"):
        lower(gm, [torch.randn(3), torch.tensor(2.0)], target=FLOATS)


def test_an_element_of_a_strided_input_is_read_by_its_logical_index():
    transposed = FixedLayout(torch.device("cpu"), torch.float32, [3, 4], [1, 3])
    assert _element_index(7, transposed) == (1, 2)  # 1 * 1 + 2 * 3
    row_major = FixedLayout(torch.device("cpu"), torch.float32, [2, 1, 5], [5, 5, 1])
    assert _element_index(9, row_major) == (1, 0, 4)


def test_an_assertion_keeps_its_condition_though_the_env_assumes_it():
    env = es.ShapeEnv(allow_scalar_outputs=True)
    graph = torch.fx.Graph()
    n = graph.placeholder("n")
    n.meta["val"] = torch.empty((), dtype=torch.int64)
    value = env.create_unbacked_symint()
    read = _node(graph, aten._local_scalar_dense.default, (n,), value)
    cond = _node(graph, operator.ge, (read, 2), value >= 2)
    _node(graph, aten._assert_scalar.default, (cond, "k >= 2"), None)
    (value >= 2).node.expect_true()  # as the tracer assumed it
    graph.output(())
    lowering = lower(torch.fx.GraphModule({}, graph), [torch.tensor(3)], target=REFERENCE)
    (check,) = lowering.scalar_asserts
    symbol = value.node.expr
    assert check.condition == sympy.Ge(symbol, 2) and check.message == "k >= 2"


def test_a_slice_length_the_env_bounds_loses_its_clamp():
    env = es.ShapeEnv(allow_scalar_outputs=True)
    u = env.create_unbacked_symint(min=0).node.expr
    assert canonical_size(sympy.Max(0, u), env) == u
    free = env.create_unbacked_symint().node.expr  # unknown sign: the clamp stays
    assert canonical_size(sympy.Max(0, free), env) == sympy.Max(0, free)


def test_a_float_input_that_is_a_read_symbol_is_bound_from_the_argument():
    """A backward graph takes the forward's float read as a scalar input."""
    env = es.ShapeEnv(allow_scalar_outputs=True)
    value = env.unbacked_value(float)
    graph = torch.fx.Graph()
    g = graph.placeholder("g")
    g.meta["val"] = torch.empty(3)
    s = graph.placeholder("s")
    s.meta["val"] = value
    cpu = {"dtype": torch.float32, "device": torch.device("cpu")}
    scalar = _node(graph, prims.scalar_tensor, (s,), torch.empty(()), cpu)
    graph.output((_node(graph, prims.mul, (g, scalar), torch.empty(3)),))
    gm = torch.fx.GraphModule({}, graph)
    lowering = lower(gm, [torch.randn(3), value], target=FLOATS)
    read = lowering.scalar_reads[value.node.expr]
    assert (read.position, read.index, read.is_float) == (1, None, True)
    with pytest.raises(ScalarReadUnsupported):
        lower(gm, [torch.randn(3), value], target=REFERENCE)
