"""Global state switched inside traced code for a while: the SDPA backend flags (`with
sdpa_kernel(...)`, `torch.backends.cuda.enable_*_sdp`) and the default dtype (a context
manager around `torch.set_default_dtype`). One graph; inside the block the state is what
the code set, after it what it was; the entry state is guarded, and a graph never leaves it
switched (issue 26; integration_tests/test_state_switches_inductor.py is the inductor twin)."""

from __future__ import annotations

import contextlib

import torch
from torch.nn.attention import SDPBackend, _cur_sdpa_kernel_backends, sdpa_kernel

from conftest import Compiled, same


def attend(q):
    with sdpa_kernel([SDPBackend.MATH]):
        out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
        inside = (torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.math_sdp_enabled())
    return out + 1, inside, torch.backends.cuda.flash_sdp_enabled()


def test_sdpa_kernel_block_is_one_graph_and_restores_the_flags():
    before = _cur_sdpa_kernel_backends()
    compiled = Compiled(attend, fullgraph=True)
    q = torch.randn(2, 3, 4, 8)
    got, expected = compiled(q), attend(q)
    assert same(got[0], expected[0]) and got[1:] == expected[1:]
    assert _cur_sdpa_kernel_backends() == before  # after the trace and after the run
    assert compiled.backend.graph_count == 1 and not compiled.breaks
    assert compiled(q)[1:] == expected[1:] and compiled.backend.graph_count == 1


def test_the_entry_state_of_the_flags_is_guarded():
    compiled = Compiled(attend, fullgraph=True)
    q = torch.randn(2, 3, 4, 8)
    compiled(q)
    torch.backends.cuda.enable_flash_sdp(False)
    try:  # sdpa_kernel read the flags to restore them: another entry state, another trace
        got, expected = compiled(q), attend(q)
        assert got[1:] == expected[1:] and got[2] is False
        assert torch.backends.cuda.flash_sdp_enabled() is False
    finally:
        torch.backends.cuda.enable_flash_sdp(True)
    assert compiled.backend.graph_count == 2


def test_a_graph_leaving_a_flag_switched_is_refused():
    def fn(x):
        torch.backends.cuda.enable_math_sdp(False)
        return x + 1

    try:
        compiled = Compiled(fn)
        x = torch.randn(3)
        assert same(compiled(x), x + 1)
        assert torch.backends.cuda.math_sdp_enabled() is False  # eager's effect, kept
        assert compiled.backend.graph_count == 0
    finally:
        torch.backends.cuda.enable_math_sdp(True)


@contextlib.contextmanager
def default_dtype(dtype):
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(dtype)
        yield
    finally:
        torch.set_default_dtype(previous)


def make_tensors(y):
    with default_dtype(torch.float64):
        inside = torch.tensor([1.5, 2.0 - 1.0j]), torch.ones(3) + y, torch.get_default_dtype()
    return inside, torch.zeros(2), torch.get_default_dtype()


def test_default_dtype_switched_in_a_context_manager():
    compiled = Compiled(make_tensors, fullgraph=True)
    y = torch.randn(3, dtype=torch.float64)
    for _ in range(2):
        got, expected = compiled(y), make_tensors(y)
        assert got[0][2] == expected[0][2] == torch.float64 and got[2] == torch.float32
        for g, e in zip((*got[0][:2], got[1]), (*expected[0][:2], expected[1]), strict=True):
            assert g.dtype == e.dtype and same(g, e)
        assert torch.get_default_dtype() == torch.float32
    assert compiled.backend.graph_count == 1 and not compiled.breaks
    torch.set_default_dtype(torch.float64)
    try:  # another entry default: the read of it is guarded, another trace
        got, expected = compiled(y), make_tensors(y)
        assert got[1].dtype == expected[1].dtype == torch.float64
        assert torch.get_default_dtype() == torch.float64
    finally:
        torch.set_default_dtype(torch.float32)
    assert compiled.backend.graph_count == 2
