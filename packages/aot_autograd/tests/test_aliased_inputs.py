"""Inputs sharing storage where one is written: the write is seen through the others, as in
eager. The input covering the others owns the storage (its new value is written back);
where none covers the others, or one requires grad, the write is a declared limitation
(InputMutationError, an UnsupportedOpError)."""

import pytest
import torch

from conftest import CountingCompiler
from ember_aot_autograd import (
    InputMutationError,
    UnsupportedOpError,
    aot_function,
    trace_to_aten,
)


def _base():
    return torch.arange(12.0).reshape(3, 4)


def _write_view_read_base(x, t):  # the tracer fuzzer's case (1:110)
    t.add_(x @ torch.ones(4))
    return x.sum(1), t * 2


def _write_view_first(t, x):  # the view comes first: the later, covering input owns
    t.mul_(3)
    return x + 1


def _write_both(x, t):
    x.mul_(2)
    t.add_(1)
    return x + t[:, None]


def _write_base_read_view(x, t):
    x.add_(1)
    return t * 2


def _write_view_then_base(x, t):
    t.add_(x.sum())
    x[1].mul_(-1)
    return x * 1, t + 0


def _returns_the_view(x, t):
    t.sub_(5)
    return t


CASES = {
    "write_view_read_base": (_write_view_read_base, lambda b: (b, b[:, 0])),
    "write_view_first": (_write_view_first, lambda b: (b[1], b)),
    "write_both": (_write_both, lambda b: (b, b[:, 1])),
    "write_base_read_view": (_write_base_read_view, lambda b: (b, b[1:, 2:])),
    "transposed_owner": (_write_view_then_base, lambda b: (b.t(), b[0])),
    "returns_the_view": (_returns_the_view, lambda b: (b, b[2])),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_writes_through_aliased_inputs_match_eager(case):
    fn, make = CASES[case]
    eager_base, base = _base(), _base()
    expected = fn(*make(eager_base))
    fw = CountingCompiler()
    got = aot_function(fn, fw)(*make(base))
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(base, eager_base)  # the write reached the shared storage
    assert fw.calls == 1
    assert len(trace_to_aten(fn, list(make(_base()))).meta["ember_aot"].mutated_inputs) == 1


def test_inputs_none_of_which_covers_the_other_are_refused():
    def f(a, b):
        a.add_(1)
        return b * 2

    base = torch.arange(6.0)
    with pytest.raises(InputMutationError, match="does not contain") as info:
        trace_to_aten(f, [base[0:4], base[2:6]])
    assert isinstance(info.value, UnsupportedOpError)  # a declared limitation


def test_an_alias_of_another_dtype_is_refused():
    def f(x, bits):
        x.add_(1)
        return bits + 1

    base = torch.zeros(4)
    with pytest.raises(InputMutationError):
        trace_to_aten(f, [base, base.view(torch.int32)])


def test_aliased_inputs_requiring_grad_are_refused_when_written():
    def f(x, t):
        t.mul_(2)
        return x.sum()

    w = torch.randn(3, 4, requires_grad=True)
    x = w * 1
    compiled = aot_function(f, CountingCompiler(), CountingCompiler())
    with pytest.raises(InputMutationError, match="requires grad"):
        compiled(x, x[:, 0])


def test_aliased_inputs_only_read_are_not_refused():
    def f(x, t):
        return x.sum() + t.sum()

    w = torch.randn(3, 4, requires_grad=True)
    x = w * 1
    out = aot_function(f, CountingCompiler(), CountingCompiler())(x, x[:, 0])
    torch.testing.assert_close(out, f(x, x[:, 0]))
