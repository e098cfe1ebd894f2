"""A compiled backward generated with its forward while deterministic algorithms were off
refuses to run once they are on (its kernels were not chosen for that): the caller gets a
RuntimeError saying so, as torch.compile's does, never a silently nondeterministic backward.
Any other combination runs and matches eager."""

import pytest
import torch

from conftest import CountingCompiler
from ember_aot_autograd import aot_function


def _f(a, b):
    return (a * b).sin()


@pytest.mark.parametrize("forward_mode", [False, True])
@pytest.mark.parametrize("backward_mode", [False, True])
def test_backward_under_another_deterministic_setting(forward_mode, backward_mode):
    before = torch.are_deterministic_algorithms_enabled()
    a, b = torch.randn(5, requires_grad=True), torch.randn(5)
    try:
        torch.use_deterministic_algorithms(forward_mode)
        compiled = aot_function(_f, CountingCompiler(), CountingCompiler())
        out = compiled(a, b)
        torch.use_deterministic_algorithms(backward_mode)
        if backward_mode and not forward_mode:
            with pytest.raises(RuntimeError, match="deterministic algorithms were off"):
                out.sum().backward()
        else:
            out.sum().backward()
            torch.testing.assert_close(a.grad, b * torch.cos(a * b))
    finally:
        torch.use_deterministic_algorithms(before)
