"""In-place ops writing memory they also read through another view (`x.add_(x[0])`, fuzz
1:205) or writing an expanded tensor: eager raises, so the trace refuses them (the umbrella
then runs the graph eagerly); writes that only look alike (the same view, disjoint column
blocks) still compile and match eager."""

import pytest
import torch

from conftest import CountingCompiler
from ember_aot_autograd import UnsupportedOpError, aot_function
from ember_aot_autograd.overlap import overlaps_itself, shares_memory


def _add_own_row(x):
    x.add_(x[0])
    return x * 1


def _shift_copy(x):
    x[1:].copy_(x[:-1])
    return x * 1


def _write_expanded(x):
    x[:1].expand(4).add_(1)
    return x * 1


@pytest.mark.parametrize("fn", [_add_own_row, _shift_copy, _write_expanded])
def test_overlapping_writes_are_refused_where_eager_raises(fn):
    shape = (3, 4) if fn is _add_own_row else (4,)
    with pytest.raises(RuntimeError, match="single memory location"):
        fn(torch.ones(shape))
    with pytest.raises(UnsupportedOpError):
        aot_function(fn, CountingCompiler())(torch.ones(shape))


def _add_itself(x):
    x.add_(x)
    return x * 1


def _disjoint_blocks(x):
    x[:, :2].mul_(x[:, 2:])
    return x + 1


@pytest.mark.parametrize("fn", [_add_itself, _disjoint_blocks])
def test_writes_without_shared_elements_compile_and_match_eager(fn):
    x, xe = torch.arange(8.0).reshape(2, 4), torch.arange(8.0).reshape(2, 4)
    fw = CountingCompiler()
    torch.testing.assert_close(aot_function(fn, fw)(x), fn(xe))
    torch.testing.assert_close(x, xe)
    assert fw.calls == 1


def test_overlap_checks():
    x = torch.arange(12.0).reshape(3, 4)
    assert shares_memory(x, x[0]) and shares_memory(x[1:], x[:-1])
    assert not shares_memory(x, x) and not shares_memory(x, torch.zeros(3, 4))
    assert not shares_memory(x[:, ::2], x[:, 1::2])  # interleaved, no element in common
    assert not shares_memory(x[0], x[2])
    assert overlaps_itself(x[0].expand(3, 4))
    assert not overlaps_itself(x.t()) and not overlaps_itself(x[:, 1])
