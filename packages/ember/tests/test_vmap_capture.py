"""torch.vmap inside a compiled function: one captured call over a traced body
(variables/vmap_capture.py), eager as the oracle on every backend.

The frame compiles to one graph (fullgraph holds); aot_eager and inductor trace the call into
batched aten ops, nothing runs as an eager graph fallback. What the capture refuses
(randomness, chunking, an output aliasing an argument as a view) is a graph break where
eager's vmap runs.
"""

from __future__ import annotations

import pytest
import torch

import ember
from conftest import CountingBackend

BACKENDS = ["eager", "aot_eager", "inductor"]


def _one_graph(counting):
    assert counting.graphs == 1
    assert not ember.counters["graph_fallbacks"]


weights = torch.randn(4)


def scores(rows, shift):
    # rows batched along dim 1, `shift` shared; `weights` is a global read by the body
    per_column = torch.vmap(lambda r, s: (r * weights).sum() + s.cos(), in_dims=(1, None))
    return per_column(rows, shift).exp()


@pytest.mark.parametrize("backend", BACKENDS)
def test_batched_body_with_a_shared_argument_and_a_global(backend):
    counting = CountingBackend(backend)
    compiled = ember.compile(scores, backend=counting, fullgraph=True)
    rows, shift = torch.randn(4, 6), torch.randn(())
    torch.testing.assert_close(compiled(rows, shift), scores(rows, shift))
    _one_graph(counting)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_through_the_vmapped_body(backend):
    w = torch.randn(3, 2, requires_grad=True)

    def loss(xs):
        return torch.func.vmap(lambda x: (x @ w).tanh(), out_dims=1)(xs).square().sum()

    counting = CountingBackend(backend)
    compiled = ember.compile(loss, backend=counting, fullgraph=True)
    xs = torch.randn(5, 3)
    expected, got = loss(xs), compiled(xs)
    torch.testing.assert_close(got, expected)
    g_expected = torch.autograd.grad(expected, w)[0]
    torch.testing.assert_close(torch.autograd.grad(got, w)[0], g_expected)
    _one_graph(counting)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_body_mixing_python_numbers(backend):
    def affine(t):
        return torch.vmap(lambda r: r.sum() * 0.5 + 2)(t) - 1

    counting = CountingBackend(backend)
    compiled = ember.compile(affine, backend=counting, fullgraph=True)
    t = torch.randn(5, 3)
    torch.testing.assert_close(compiled(t), affine(t))
    _one_graph(counting)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_vmap_is_an_outer_product(backend):
    def outer(a, b):
        return torch.vmap(lambda x: torch.vmap(lambda y: x * y + 1)(b))(a)

    counting = CountingBackend(backend)
    compiled = ember.compile(outer, backend=counting, fullgraph=True)
    a, b = torch.randn(3), torch.randn(5)
    torch.testing.assert_close(compiled(a, b), outer(a, b))
    _one_graph(counting)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_in_place_body_writes_the_argument_and_returns_it(backend):
    def inplace(t):
        u = t * 0.5
        v = torch.vmap(torch.Tensor.sin_)(u)
        return v is u, v + 1, u

    counting = CountingBackend(backend)
    compiled = ember.compile(inplace, backend=counting, fullgraph=True, dynamic=True)
    for n in (4, 6):
        t = torch.randn(n, 3)
        same, plus, written = compiled(t)
        e_same, e_plus, e_written = inplace(t)
        assert same is e_same is True
        torch.testing.assert_close(plus, e_plus)
        torch.testing.assert_close(written, e_written)
    _one_graph(counting)


@pytest.mark.parametrize("backend", BACKENDS)
def test_writing_the_callers_tensor(backend):
    def scale_rows(t):
        torch.vmap(lambda r: r.mul_(2.0))(t)
        return t.sum()

    compiled = ember.compile(scale_rows, backend=backend, fullgraph=True)
    t = torch.randn(3, 2)
    expected_t = t.clone()
    expected = scale_rows(expected_t)
    got = compiled(t)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(t, expected_t)  # the caller's tensor written, as eager


def test_different_randomness_is_refused_under_fullgraph_and_runs_eagerly_otherwise():
    def noisy(t):
        return torch.vmap(lambda r: r + torch.rand(()), randomness="same")(t)

    with pytest.raises(ember.exc.Unsupported, match="randomness"):
        ember.compile(noisy, backend="eager", fullgraph=True)(torch.zeros(3, 2))
    compiled = ember.compile(noisy, backend="eager")
    out = compiled(torch.zeros(3, 2))
    assert torch.equal(out[0], out[1])  # "same": one draw shared by the batch, as eager


def test_an_output_viewing_its_argument_is_a_break_not_a_copy():
    def flat(t):
        return torch.vmap(lambda r: r.view(-1))(t)

    compiled = ember.compile(flat, backend="eager")
    t = torch.randn(3, 2, 2)
    out = compiled(t)
    torch.testing.assert_close(out, flat(t))
    out.add_(1)  # eager's result views `t`: the write shows there
    torch.testing.assert_close(t.reshape(3, 4), out)


def test_what_eager_vmap_refuses_raises_eagers_error():
    def nonzero_rows(t):
        return torch.vmap(lambda r: r.nonzero())(t)  # no batching rule: a data-dependent size

    t = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    with pytest.raises(RuntimeError) as expected:
        nonzero_rows(t)
    with pytest.raises(type(expected.value)):
        ember.compile(nonzero_rows, backend="eager")(t)
