"""Backends on torch-level graphs with symbolic sizes (as the tracer makes them with
ember-symbolic-shapes): aot_eager compiles once for every size; inductor is correct for
every size, compiling symbolically or one static specialization per size (bounded)."""

from __future__ import annotations

import pytest
import torch
import torch.fx

import ember_symbolic as es
from ember.backends.aot_eager import aot_eager
from ember.backends.inductor import PrimCompiler, inductor
from ember.backends.inductor_settings import inductor_settings
from ember.backends.size_specialization import SizeSpecializer, has_symbolic_sizes
from ember.stats import counters


def symbolic_graph(fn, args, dims):
    """`fn` traced by torch.fx with example values of symbolic sizes: `dims[i]` is
    {dim: Dim} for a tensor argument, "int" for a SymInt one."""
    env = es.ShapeEnv()
    mode = es.fake_mode(env)
    gm = torch.fx.symbolic_trace(fn)
    fakes = []
    for i, (arg, dim) in enumerate(zip(args, dims, strict=True)):
        if isinstance(arg, torch.Tensor):
            fake = es.fake_tensor(mode, arg, f"a{i}", dims=dim or {}, default=es.DimDynamic.STATIC)
            fakes.append(fake.requires_grad_(arg.requires_grad))
        else:
            fakes.append(env.create_symint(arg, f"a{i}", dynamic=es.DimDynamic.DYNAMIC))

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node):
            value = super().run_node(node)
            if node.op != "output":
                node.meta["example_value"] = value
            return value

    with mode:
        Recorder(gm).run(*fakes)
    return gm


def mlp(x, w):
    y = torch.relu(x @ w.t())
    return y.view(x.size(0), -1).sum(1) * 2 + x.sum(1)


def _check_sizes(compiled, sizes, w):
    for n in sizes:
        x = torch.randn(n, 16)
        w.grad = None
        out = compiled(x, w)
        out.sum().backward()
        grad, w.grad = w.grad, None
        ref = mlp(x, w)
        ref.sum().backward()
        torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(grad, w.grad, rtol=1e-4, atol=1e-4)


@pytest.fixture(autouse=True)
def _fresh_counters():
    counters.clear()


def test_aot_eager_compiles_once_for_every_batch_size():
    w = torch.randn(8, 16, requires_grad=True)
    x = torch.randn(5, 16)
    compiled = aot_eager(symbolic_graph(mlp, [x, w], [{0: es.Dim()}, None]), [x, w])
    _check_sizes(compiled, range(2, 14), w)
    stats = counters["aot_eager"]
    assert (stats["forward_graphs"], stats["backward_graphs"]) == (1, 1)
    assert stats["forward_runs"] == 12
    assert not counters["aten_fallbacks"]  # sym_size is a size read, not a fallback


def test_inductor_is_correct_for_every_batch_size():
    w = torch.randn(8, 16, requires_grad=True)
    x = torch.randn(5, 16)
    compiled = inductor(symbolic_graph(mlp, [x, w], [{0: es.Dim()}, None]), [x, w])
    _check_sizes(compiled, [5, 2, 9, 13, 5], w)
    assert counters["inductor"]["forward_graphs"] >= 1


def _symbolic_prim_graph(fn, args, dims):
    """The forward prim graph aot_eager makes of `fn` (symbolic sizes)."""
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm

    from ember_aot_autograd import aot_module
    from ember_primops import decomposition_table

    with torch.no_grad():
        aot_module(symbolic_graph(fn, args, dims), args, keep, None, decomposition_table())
    return graphs[0]


def test_size_specializer_compiles_once_per_size_up_to_its_limit():
    def fn(x, n):
        return (x.view(x.size(0), -1) * n).softmax(-1)

    gm = _symbolic_prim_graph(fn, [torch.randn(3, 4, 2), 5], [{0: es.Dim()}, "int"])
    assert has_symbolic_sizes(gm)
    static = PrimCompiler("forward", inductor_settings()).static
    run = SizeSpecializer(gm, "forward", static, limit=2, reason="test")
    calls = [(3, 5), (4, 2), (3, 5), (6, 3), (7, 2)]
    for b, n in calls:
        x = torch.randn(b, 4, 2)
        (out,) = run(x, n)
        torch.testing.assert_close(out, fn(x, n))
    stats = counters["inductor"]
    assert stats["static_specializations"] == 2
    assert stats["specialization_overflow_runs"] == 2  # (6, 3) and (7, 2): FX graph
