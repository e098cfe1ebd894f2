"""Calls eager's kernels refuse but the meta kernels accept (eager_checks.py): a graph break
where eager raises, never a graph that runs, nor a dead op dropped (fuzz 2026:128:
`t1 = t1 * (G_T - n)` with n=True raised in eager; unused, the trace dropped it)."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from conftest import Compiled, same
from ember_bytecode_tracer.eager_checks import EagerKernelChecks

DTYPES = [torch.bool, torch.int64, torch.uint8, torch.float32, torch.complex64]
SCALARS = [True, 2, -1, 0.5]
OPS = {
    "sub": lambda a, b: a - b,
    "rsub": lambda a, b: b - a,
    "sub_": lambda a, b: a.clone().sub_(b),
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor_": lambda a, b: a.clone().__ixor__(b),
    "not": lambda a, b: ~a,
    "gcd": lambda a, b: torch.gcd(a, b),
    "pow": lambda a, b: a**b,
    "abs": lambda a, b: a.abs(),
    "softmax": lambda a, b: a.softmax(0),
    "log_softmax": lambda a, b: torch.log_softmax(a, 0),
    "var": lambda a, b: a.var(),
    "std_mean": lambda a, b: torch.std_mean(a),
    "add": lambda a, b: a + b,  # no check: both agree it runs (or both refuse)
}


def _raises(fn) -> bool:
    try:
        fn()
    except Exception:
        return True
    return False


@pytest.mark.parametrize("name", sorted(OPS))
def test_checked_fake_run_refuses_exactly_what_eager_refuses(name):
    op = OPS[name]
    mode = FakeTensorMode()
    missed = []
    for da, b in itertools.product(DTYPES, [torch.ones(3, dtype=d) for d in DTYPES] + SCALARS):
        a = torch.ones(3, dtype=da)

        def checked(a=a, b=b):
            with mode, EagerKernelChecks():
                fb = mode.from_tensor(b) if isinstance(b, torch.Tensor) else b
                op(mode.from_tensor(a), fb)

        eager = _raises(lambda a=a, b=b: op(a, b))
        fake = _raises(checked)
        assert not (fake and not eager), (name, da, b)  # never refuses what eager runs
        if eager and not fake:
            missed.append((da, b))
    # what is left: complex softmax and in-place casts to an integer of a complex result
    # (CPU kernels), pow of bools; none of them in the checked families below
    if name in ("sub", "rsub", "and", "or", "not", "gcd", "abs", "var", "std_mean"):
        assert not missed, missed


def _dead_subtraction(x, n):
    t = x * 2
    t = t * (x - n)  # unused: eager still runs it, and raises for n=True
    return x + 1


def _used_subtraction(x, n):
    return (x - n).sum()


def _reversed_subtraction(x, n):
    return n - x


@pytest.mark.parametrize("fn", [_dead_subtraction, _used_subtraction, _reversed_subtraction])
def test_subtracting_a_bool_raises_as_in_eager(fn):
    compiled = Compiled(fn)
    x = torch.randn(3)
    for n in (2, 3):  # an int: one graph, no break
        assert same(compiled(x, n), fn(x, n))
    assert not compiled.breaks
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool") as eager:
        fn(x, True)
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool") as got:
        compiled(x, True)
    assert type(got.value) is type(eager.value)
    assert any("subtraction with a bool operand" in b.reason for b in compiled.breaks)


def test_bitwise_op_on_floats_raises_as_in_eager():
    def fn(x, y):
        _z = x & y  # refused for floats by eager's kernel only
        return x + 1

    compiled = Compiled(fn)
    a, b = torch.ones(3, dtype=torch.int64), torch.ones(3, dtype=torch.int64)
    assert same(compiled(a, b), fn(a, b))
    with pytest.raises(NotImplementedError):
        fn(a.float(), b.float())
    with pytest.raises(NotImplementedError):
        compiled(a.float(), b.float())


MATRIX_PRODUCTS = {
    "mm": lambda a, b: torch.mm(a, b),
    "mv": lambda a, b: torch.mv(a, b[:, 0]),
    "matmul_vector": lambda a, b: a @ b[:, 0],
    "addmm": lambda a, b: torch.addmm(torch.zeros(3, 2, dtype=a.dtype), a, b),
    "addbmm": lambda a, b: torch.addbmm(torch.zeros(3, 2, dtype=a.dtype), a[None], b[None]),
}


@pytest.mark.parametrize("name", sorted(MATRIX_PRODUCTS))
def test_matrix_product_of_mixed_dtypes_raises_as_in_eager(name):
    product = MATRIX_PRODUCTS[name]

    def fn(x, w):
        _unused = product(x, w)  # fuzz 3001:2431: dead, yet eager raises for mixed dtypes
        return x + 1

    compiled = Compiled(fn)
    x, w = torch.randn(3, 4), torch.randn(4, 2)
    assert same(compiled(x, w), fn(x, w))
    with pytest.raises(RuntimeError):
        fn(x, w.double())
    with pytest.raises(RuntimeError):
        compiled(x, w.double())
    assert any("must share a dtype" in b.reason for b in compiled.breaks)
