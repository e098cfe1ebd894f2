"""One wrapper for every size (issue 13): a C++ graph with symbolic sizes gets one Python
wrapper whose sizes are expressions over the symbols read from its inputs, exec'd once,
serving every binding (cpp/emit/symbolic_wrapper.py), against eager."""

from __future__ import annotations

import pathlib

import pytest
import torch

import ember
import ember_symbolic as es
from ember.backends.inductor import inductor
from ember.stats import counters
from ember_codegen.wrapper.size_bindings import WRAPPER_STATS


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    counters.clear()
    WRAPPER_STATS.clear()
    ember.reset()
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "cache"))
    yield
    ember.reset()


def attention(x, w):
    """A matmul, a softmax (reductions), a view chain and an SDPA, and a full reduction."""
    h = (x @ w).softmax(-1)
    q = h.view(x.size(0), -1, 4, 8).transpose(1, 2)
    a = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    return a.transpose(1, 2).reshape(x.size(0), -1, 32).sum(-1), h.mean()


def test_one_wrapper_serves_ten_sizes(tmp_path):
    torch.manual_seed(0)
    w = torch.randn(32, 32)
    compiled = ember.compile(attention, dynamic=True)
    sizes = [(2, 3), (2, 5), (3, 7), (2, 11), (4, 2), (2, 17), (3, 19), (5, 23), (2, 29), (3, 31)]
    for b, t in sizes:
        x = torch.randn(b, t, 32)
        for got, want in zip(compiled(x, w), attention(x, w), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert counters["inductor"]["forward_graphs"] == 1
    assert not counters["inductor"]["static_specializations"]
    # one wrapper source exec'd for the one graph, none written per binding
    assert dict(WRAPPER_STATS) == {"symbolic": 1, "wrapper_execs": 1}
    assert len(list(pathlib.Path(tmp_path / "cache").rglob("*.so"))) == 1


def test_size_inputs_and_untrusted_inputs_are_read_per_call():
    """Straight through the backend (inputs checked by the wrapper, not the tracer): a size
    read from an int input and a view on it, and a mis-strided input relaid per call."""
    from test_dynamic_backends import symbolic_graph

    torch.manual_seed(0)
    w = torch.randn(16, 16)

    def fn(x, n, w):
        y = torch.relu(x @ w) * n
        return y.view(x.size(0) * x.size(1), 16).sum(0), y.flatten(0, 1)[: x.size(0)]

    dims = [{0: es.Dim(), 1: es.Dim()}, "int", None]
    example = [torch.randn(2, 3, 16), 3, w]
    compiled = inductor(symbolic_graph(fn, example, dims), example)
    for b, t, n in ((2, 3, 3), (3, 5, 2), (7, 2, 4), (4, 9, 5)):
        x = torch.randn(t, b, 16).transpose(0, 1)  # not contiguous: relaid by the wrapper
        for got, want in zip(compiled(x, n, w), fn(x, n, w), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert WRAPPER_STATS["wrapper_execs"] == WRAPPER_STATS["symbolic"] >= 1
    assert not WRAPPER_STATS["per_binding_fallback"]


def test_buffers_small_at_a_calls_sizes_are_allocated_anew_and_large_ones_pooled():
    """The storage pool's Python take and give (~2.6 us a buffer) cost more than a fresh
    small tensor: a symbolic buffer goes through the pool only where the call's sizes make
    it large (over SMALL_BUFFER_BYTES), as a static compile decides at compile time."""
    from test_dynamic_backends import symbolic_graph

    from ember_codegen.cpp.emit.wrapper import STORAGE_POOL

    torch.manual_seed(0)
    w = torch.randn(64, 64) / 8

    def fn(x, w):
        return (torch.relu(x @ w).exp() @ w,)

    example = [torch.randn(3, 64), w]
    compiled = inductor(symbolic_graph(fn, example, [{0: es.Dim()}, None]), example)
    for rows, pooled in ((5, False), (9, False), (300, True), (301, True), (7, False)):
        STORAGE_POOL.clear()
        x = torch.randn(rows, 64)
        torch.testing.assert_close(compiled(x, w)[0], fn(x, w)[0], rtol=1e-5, atol=1e-5)
        # 300 rows of 64 floats are 75 KiB: the dead intermediates go back to the pool
        assert (STORAGE_POOL.held_bytes > 0) is pooled, rows
    assert not WRAPPER_STATS["per_binding_fallback"]


def test_int_input_specialized_while_tracing_is_still_passed():
    # n changes between calls (symbolic), then `dim=n` specializes it (Eq(s0, 1)): the
    # graph still takes n, and the wrapper picks its tensors by position
    def fn(x, n):
        return x.sum(dim=n) * 2

    compiled = ember.compile(fn)
    x = torch.arange(12.0).reshape(3, 4)
    for n in (0, 1, 0, 1):
        torch.testing.assert_close(compiled(x, n), fn(x, n))
    assert counters["inductor"]["forward_graphs"] == 2, dict(counters["inductor"])
