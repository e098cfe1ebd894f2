"""The SDPA backend flags switched inside traced code (`with sdpa_kernel(...)`,
`torch.backends.cuda.enable_*_sdp`): one graph, the flags inside the block are what the
code set, outside what they were, the entry state guarded, and a graph never leaves them
switched (issue 26; integration_tests/test_sdp_switches_inductor.py is the inductor twin)."""

from __future__ import annotations

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
