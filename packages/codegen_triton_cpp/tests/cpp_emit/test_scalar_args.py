"""Scalars read on the host (`t.item()`, ember_inductor_ir's scalar_reads) through the C++
target: the wrapper reads each input element once per call, kernels take a float read as a
`double` argument and an int read as an `int64_t` size argument, and `torch._check` on a
read is a host check raising RuntimeError."""

from __future__ import annotations

import operator

import pytest
import torch

from ember_codegen import compile_graph
from ember_codegen.scalar_args import scalar_text
from ember_inductor_ir import DynamicShapeUnsupported, lower, schedule
from ember_primops import prims

es = pytest.importorskip("ember_symbolic")
aten = torch.ops.aten
CPU = {"dtype": torch.float32, "device": torch.device("cpu")}


def _node(graph, target, args, val, kwargs=None):
    node = graph.call_function(target, args, kwargs or {})
    node.meta["val"] = val
    return node


def _inputs(graph, *examples):
    nodes = []
    for k, example in enumerate(examples):
        node = graph.placeholder(f"in{k}")
        node.meta["val"] = example
        nodes.append(node)
    return nodes


def _affine_graph():
    """x * w.item() + n.item(), with torch._check(n.item() >= 1)."""
    env = es.ShapeEnv(allow_scalar_outputs=True)
    graph = torch.fx.Graph()
    x, w, n = _inputs(graph, torch.empty(5), torch.empty(()), torch.empty((), dtype=torch.int64))
    scale, shift = env.unbacked_value(float), env.create_unbacked_symint()
    w_read = _node(graph, aten._local_scalar_dense.default, (w,), scale)
    n_read = _node(graph, aten._local_scalar_dense.default, (n,), shift)
    ok = _node(graph, operator.ge, (n_read, 1), shift >= 1)
    _node(graph, aten._assert_scalar.default, (ok, "n >= 1"), None)
    (shift >= 1).node.expect_true()
    w_t = _node(graph, prims.scalar_tensor, (w_read,), torch.empty(()), CPU)
    n_t = _node(graph, prims.scalar_tensor, (n_read,), torch.empty(()), CPU)
    scaled = _node(graph, prims.mul, (x, w_t), torch.empty(5))
    out = _node(graph, prims.add, (scaled, n_t), torch.empty(5))
    graph.output((out,))
    return torch.fx.GraphModule({}, graph)


def test_float_and_int_reads_are_kernel_arguments(builder):
    x, w, n = torch.randn(5), torch.tensor(1.5), torch.tensor(3)
    sched = schedule(lower(_affine_graph(), [x, w, n], target="cpp"))
    compiled = compile_graph(sched, builder=builder)
    assert "const double u0" in compiled.cpp_source and "const int64_t u1" in compiled.cpp_source
    for w, n in ((1.5, 3), (-0.25, 7)):
        (got,) = compiled([x, torch.tensor(w), torch.tensor(n)])
        torch.testing.assert_close(got, x * w + n)
    with pytest.raises(RuntimeError, match="n >= 1"):
        compiled([x, torch.tensor(2.0), torch.tensor(0)])


def test_an_int_read_as_a_size(builder):
    env = es.ShapeEnv(allow_scalar_outputs=True)
    graph = torch.fx.Graph()
    (n,) = _inputs(graph, torch.empty((), dtype=torch.int64))
    size = env.create_unbacked_symint(min=0)
    with es.fake_mode(env):
        example = torch.empty(size, dtype=torch.int64)
    read = _node(graph, aten._local_scalar_dense.default, (n,), size)
    out = _node(graph, prims.iota, (read,), example,
                {"start": 0, "step": 2, "dtype": torch.int64, "device": torch.device("cpu")})  # fmt: skip
    graph.output((out,))
    sched = schedule(lower(torch.fx.GraphModule({}, graph), [torch.tensor(4)], target="cpp"))
    compiled = compile_graph(sched, builder=builder)
    for k in (4, 0, 11):
        (got,) = compiled([torch.tensor(k)])
        torch.testing.assert_close(got, torch.arange(0, 2 * k, 2))


def test_only_sums_and_products_print_as_scalar_expressions():
    import sympy

    u, v = sympy.Symbol("u0", real=True), sympy.Symbol("u1", integer=True)
    assert scalar_text(u - 2 * v) == "(u0 - 2*u1)"
    # a whole power is the product it stands for (k * k * k of a read is sympy's k**3.0)
    assert scalar_text(u**3.0 + v**2) == "(u0*u0*u0 + u1*u1)"
    with pytest.raises(DynamicShapeUnsupported):
        scalar_text(u**2.5)
    with pytest.raises(DynamicShapeUnsupported):
        scalar_text(u**-2)
    with pytest.raises(DynamicShapeUnsupported):
        scalar_text(v / 3)  # an integer division in C++


def test_no_wrapper_per_binding_for_host_reads():
    """A wrapper written per binding would have no host checks (and key on float values):
    refused, so the graph runs eagerly rather than unchecked."""
    from ember_codegen.wrapper.dynamic_wrapper import DynamicWrapper, SizeBinder

    x, w, n = torch.randn(5), torch.tensor(1.5), torch.tensor(3)
    sched = schedule(lower(_affine_graph(), [x, w, n], target="cpp"))
    with pytest.raises(DynamicShapeUnsupported, match="host"):
        DynamicWrapper(sched, lambda: None, {}, SizeBinder(sched, []))
