"""A 0-d tensor handed to an op where it takes a Scalar (an optimizer's tensor learning
rate or weight in `addcmul_`, `_foreach_lerp_`, `_foreach_pow`): one graph that reads the
tensor on every call, matching eager (issue 26; the inductor twin is
integration_tests/test_scalar_tensor_args_inductor.py)."""

from __future__ import annotations

import torch

from conftest import Compiled, same


def _inputs(seed: int):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(3, 2, generator=gen), torch.randn(3, 2, generator=gen)


def test_pointwise_ops_with_a_tensor_value():
    def fn(acc, a, b, value):
        out = torch.addcmul(acc, a, b, value=value) + torch.addcdiv(
            acc, a, b.abs() + 1, value=value
        )
        acc.addcmul_(a, b, value=value).addcdiv_(a, b.abs() + 1, value=value)
        return out

    compiled = Compiled(fn, fullgraph=True)
    for seed, weight in ((0, 0.3), (1, -2.5)):  # another value: the same graph reads it
        a, b = _inputs(seed)
        acc_eager, acc_compiled = torch.ones(3, 2), torch.ones(3, 2)
        expected = fn(acc_eager, a, b, torch.tensor(weight))
        assert same(compiled(acc_compiled, a, b, torch.tensor(weight)), expected)
        assert same(acc_compiled, acc_eager)
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_foreach_lerp_and_pow_with_a_tensor_scalar():
    def fn(starts, ends, weight, base):
        out = torch._foreach_lerp_(starts, ends, weight)
        return out is starts, torch._foreach_pow(base, ends)

    compiled = Compiled(fn, fullgraph=True)
    for weight in (0.5, 0.125):
        ends = [torch.rand(2, 2), torch.rand(4)]
        eager_starts = [torch.full((2, 2), 4.0), torch.full((4,), 3.0)]
        compiled_starts = [t.clone() for t in eager_starts]
        expected = fn(eager_starts, ends, torch.tensor(weight), torch.tensor(0.8))
        got = compiled(compiled_starts, ends, torch.tensor(weight), torch.tensor(0.8))
        assert got[0] is expected[0] is True
        assert type(got[1]) is type(expected[1]) and same(list(got[1]), list(expected[1]))
        assert same(compiled_starts, eager_starts)
    assert compiled.backend.graph_count == 1 and not compiled.breaks


def test_a_scalar_tensor_of_another_dtype_is_not_rewritten():
    # float64 0-d tensor against float32 ones: as a Scalar it does not promote them, as a
    # tensor it would not either here, but the rewrite declines rather than reason about it
    def fn(acc, a, b, value):
        return torch.addcmul(acc, a, b, value=value)

    a, b = _inputs(2)
    value = torch.tensor(0.3, dtype=torch.float64)
    compiled = Compiled(fn)
    got = compiled(torch.ones(3, 2), a, b, value)
    expected = fn(torch.ones(3, 2), a, b, value)
    assert got.dtype == expected.dtype and same(got, expected)
