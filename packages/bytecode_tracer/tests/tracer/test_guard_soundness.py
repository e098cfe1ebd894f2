"""Guard soundness: each kind of source a trace reads through, rebound or mutated between
calls; every call is compared with eager. Guards must follow what an object is, never its
name."""

from __future__ import annotations

import torch

from conftest import Compiled, same

my_torch_op = torch.sin


def _uses_torch_named_global(x):
    return my_torch_op(x) + 1


def test_global_whose_name_contains_torch_keeps_its_identity_guard():
    global my_torch_op
    compiled = Compiled(_uses_torch_named_global)
    x = torch.randn(3)
    try:
        assert same(compiled(x), _uses_torch_named_global(x))
        my_torch_op = torch.cos
        assert same(compiled(x), _uses_torch_named_global(x))
    finally:
        my_torch_op = torch.sin
    assert compiled.backend.graph_count == 2
