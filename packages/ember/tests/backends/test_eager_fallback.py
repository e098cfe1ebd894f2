"""Graphs the stages declare they cannot compile run eagerly, counted, never a crash; other
stage errors still surface as BackendCompilerFailed."""

from __future__ import annotations

import pytest
import torch

import ember
from ember.backends.eager_fallback import eager_on_limitation
from ember.exc import BackendCompilerFailed

BACKENDS = ["aot_eager", "inductor"]


def _inverse(a):
    # aten's linalg.inv checks its info tensor with .item(): refused by the aot tracer
    return torch.linalg.inv(a) * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_refused_op_runs_the_graph_eagerly(backend, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    a = torch.randn(4, 4, dtype=torch.float64) + 4 * torch.eye(4, dtype=torch.float64)
    a.requires_grad_(True)
    out = ember.compile(_inverse, backend=backend)(a)
    torch.testing.assert_close(out, _inverse(a))
    (grad,) = torch.autograd.grad(out.sum(), a)
    (expected,) = torch.autograd.grad(_inverse(a).sum(), a)
    torch.testing.assert_close(grad, expected)
    assert ember.counters["graph_fallbacks"]["aten.item.default"] == 1
    assert not ember.counters[backend]["forward_runs"]  # eager, not a compiled graph


@pytest.mark.parametrize("backend", BACKENDS)
def test_eager_errors_stay_eager_errors(backend):
    with pytest.raises(torch.linalg.LinAlgError):
        ember.compile(_inverse, backend=backend)(torch.zeros(3, 3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_sparse_tensors_run_the_graph_eagerly(backend):
    def f(s, d):
        return torch.sparse.mm(s, d) + (d * 2).to_sparse().to_dense().sum()

    s, d = torch.randn(3, 3).to_sparse(), torch.randn(3, 2)
    torch.testing.assert_close(ember.compile(f, backend=backend)(s, d), f(s, d))
    assert ember.counters["graph_fallbacks"]["torch.sparse_coo"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_compressed_sparse_inputs_run_the_graph_eagerly(backend):
    # CSR tensors have no strides: a stride read before the fallback raised in inductor
    def f(a, b, c):
        return torch.sparse.sampled_addmm(a, b, c, beta=0.6, alpha=0.2)

    a, b, c = torch.eye(3).to_sparse_csr(), torch.randn(3, 3), torch.randn(3, 3)
    got = ember.compile(f, backend=backend)(a, b, c)
    torch.testing.assert_close(got.to_dense(), f(a, b, c).to_dense())
    assert ember.counters["graph_fallbacks"]["torch.sparse_csr"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_dtypes_no_prim_takes_run_the_graph_eagerly(backend):
    def f(x):
        return x.chalf().real * 2  # complex32: eager's support is experimental, no prim takes it

    x = torch.randn(4)
    torch.testing.assert_close(ember.compile(f, backend=backend)(x), f(x))
    assert ember.counters["graph_fallbacks"]["torch.complex32"] == 1


def test_a_limitation_met_by_a_later_variant_runs_that_call_eagerly():
    from ember_aot_autograd import UnsupportedOpError

    calls = []

    def compile_fn(gm, example_inputs):
        def run(*args):
            calls.append(args)
            if len(calls) > 1:  # as aot_module tracing a new variant (grad mode) on a call
                raise UnsupportedOpError("aten.item.default", "reads tensor data")
            return gm(*args)

        return run

    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    run = eager_on_limitation("test", compile_fn)(gm, [torch.ones(2)])
    assert run(torch.ones(2)).tolist() == [2.0, 2.0]
    assert run(torch.ones(2)).tolist() == [2.0, 2.0]  # the refusal: run eagerly
    assert run(torch.ones(2)).tolist() == [2.0, 2.0]  # and from then on, not retried
    assert len(calls) == 2
    assert ember.counters["graph_fallbacks"]["aten.item.default"] == 1


def test_other_stage_errors_are_backend_failures():
    def broken(gm, example_inputs):
        raise RuntimeError("a bug in a stage")

    def f(x):
        return x + 1

    with pytest.raises(BackendCompilerFailed, match="a bug in a stage"):
        ember.compile(f, backend=eager_on_limitation("test", broken))(torch.ones(2))
