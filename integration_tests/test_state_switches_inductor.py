"""SDPA backend flags and the default dtype switched in compiled code, under the default
backend (issue 26): the inductor twin of
packages/bytecode_tracer/tests/tracer/test_state_switches.py."""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch.nn.attention import SDPBackend, _cur_sdpa_kernel_backends, sdpa_kernel

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")


def test_sdpa_kernel_block_under_inductor():
    def fn(q, k):
        with sdpa_kernel([SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION]):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, k, is_causal=True)
            flash_inside = torch.backends.cuda.flash_sdp_enabled()
        return out.sin(), flash_inside

    before = _cur_sdpa_kernel_backends()
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 4, 6, 8)
    compiled = ember.compile(fn, backend="inductor", fullgraph=True)
    got, expected = compiled(q, k), fn(q, k)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] is expected[1] is False
    assert _cur_sdpa_kernel_backends() == before
    assert ember.counters["inductor"]["forward_runs"] >= 1, dict(ember.counters["inductor"])
    assert ember.counters["inductor"]["forward_graphs"] == 1


@contextlib.contextmanager
def _default_dtype(dtype):
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(dtype)
        yield
    finally:
        torch.set_default_dtype(previous)


def test_default_dtype_block_under_inductor():
    def fn(y):
        with _default_dtype(torch.float64):
            made = torch.arange(4.0) * y
        return made, torch.ones(4) + y.float()

    y = torch.randn(4, dtype=torch.float64)
    compiled = ember.compile(fn, backend="inductor", fullgraph=True)
    got, expected = compiled(y), fn(y)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e)
    assert torch.get_default_dtype() == torch.float32
    assert ember.counters["inductor"]["forward_graphs"] == 1
