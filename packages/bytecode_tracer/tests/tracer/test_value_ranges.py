"""Branches decided by a random draw's range (variables/value_ranges.py): HF's LayerDrop
`if torch.rand([]) < self.layerdrop` with layerdrop 0 never skips, whatever the draw."""

from __future__ import annotations

import pytest
import torch

from conftest import Compiled

x = torch.randn(4, 3)


def layerdrop(t, p):
    out = t
    for _ in range(2):
        if torch.rand([]) < p:  # skip the layer
            continue
        out = out * 2 + 1
    return out


@pytest.mark.parametrize("p", [0.0, -1.0, 1.5])
def test_a_draw_compared_with_a_constant_outside_its_range_is_one_graph(p):
    compiled = Compiled(layerdrop, fullgraph=True)
    torch.testing.assert_close(compiled(x, p), layerdrop(x, p))
    assert compiled.backend.graph_count == 1


def test_the_constant_is_guarded():
    compiled = Compiled(layerdrop)
    torch.testing.assert_close(compiled(x, 0.0), layerdrop(x, 0.0))
    for _ in range(3):
        torch.manual_seed(5)
        got = compiled(x, 0.6)
        torch.manual_seed(5)
        torch.testing.assert_close(got, layerdrop(x, 0.6))


def test_a_constant_inside_the_range_is_still_a_graph_break():
    def fn(t, p):
        return t + 1 if torch.rand([]) < p else t - 1

    compiled = Compiled(fn)
    torch.manual_seed(3)
    got = compiled(x, 0.5)
    torch.manual_seed(3)
    torch.testing.assert_close(got, fn(x, 0.5))
    assert any("tensor's value" in b.reason for b in compiled.breaks)


def test_a_draw_updated_in_place_is_not_bounded():
    def fn(t):
        r = torch.rand([])
        r.add_(2.0)  # now in [2, 3]: `r < 1.5` is False
        return t + 1 if r < 1.5 else t - 1

    compiled = Compiled(fn)
    torch.testing.assert_close(compiled(x), x - 1)
    assert compiled.breaks


def test_reversed_operands_and_comparison_methods():
    def fn(t):
        if 0.0 > torch.rand([]):  # noqa: SIM300  (never)
            return t - 1
        if torch.le(torch.rand_like(t[0, 0]), 2):  # always
            return t + 1
        return t

    compiled = Compiled(fn, fullgraph=True)
    torch.testing.assert_close(compiled(x), x + 1)
    assert compiled.backend.graph_count == 1


def test_several_elements_still_raise_as_in_eager():
    def fn(t):
        return t + 1 if torch.rand(3) < 0.0 else t - 1

    with pytest.raises(RuntimeError, match="ambiguous"):
        fn(x)
    with pytest.raises(RuntimeError, match="ambiguous"):
        Compiled(fn)(x)
