"""Calls eager's kernels refuse but the meta kernels accept (eager_checks.py): a graph break
where eager raises, never a graph that runs, nor a dead op dropped (fuzz 2026:128:
`t1 = t1 * (G_T - n)` with n=True raised in eager; unused, the trace dropped it)."""

from __future__ import annotations

import itertools
import math

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
    # CPU kernels compiled for fewer dtype kinds than the meta kernels accept
    "floor": lambda a, b: a.floor(),
    "round": lambda a, b: a.round(),
    "trunc": lambda a, b: a.trunc(),
    "frac": lambda a, b: a.frac(),
    "sign": lambda a, b: a.sign(),
    "relu": lambda a, b: a.relu(),
    "gelu": lambda a, b: torch.nn.functional.gelu(a),
    "clamp": lambda a, b: a.clamp(0, 1),
    "sort": lambda a, b: a.sort(),
    "max": lambda a, b: a.max(),
    "min_dim": lambda a, b: a.min(0),
    "argmax": lambda a, b: a.argmax(),
    "topk": lambda a, b: a.topk(1),
    "histc": lambda a, b: torch.histc(a),
    "remainder": lambda a, b: torch.remainder(a, b),
    "fmod": lambda a, b: torch.fmod(a, b),
    "lt": lambda a, b: a < b,
    "maximum": lambda a, b: torch.maximum(a, b),
    "hypot": lambda a, b: torch.hypot(a, b),
    "lshift": lambda a, b: torch.bitwise_left_shift(a, b),
    "searchsorted": lambda a, b: torch.searchsorted(a, b),
    "addcmul": lambda a, b: torch.addcmul(a, a, b),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    # argument dtypes eager checks
    "index_select": lambda a, b: torch.index_select(a, 0, b),
    "index_add": lambda a, b: a.index_add(0, b, a),
    "index_copy_source": lambda a, b: a.index_copy(0, torch.tensor([0, 1, 2]), b),
    "cross": lambda a, b: torch.linalg.cross(a, b),
    "index_put": lambda a, b: a.index_put((torch.tensor([0]),), b[:1]),
    "setitem": lambda a, b: a.clone().__setitem__(torch.tensor([0]), b[:1]),
    "bce": lambda a, b: torch.nn.functional.binary_cross_entropy(a, b),
    "heaviside": lambda a, b: torch.heaviside(a, b),
    # in-place results the written tensor's dtype cannot hold
    "add_": lambda a, b: a.clone().add_(b),
    "mul_": lambda a, b: a.clone().mul_(b),
    "div_": lambda a, b: a.clone().div_(b),
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
    if name in EXACT:
        assert not missed, missed


# ops whose checks catch every refusal over DTYPES x (DTYPES + SCALARS)
EXACT = {
    "sub", "rsub", "and", "or", "not", "gcd", "abs", "var", "std_mean", "softmax",
    "floor", "round", "trunc", "frac", "sign", "relu", "gelu", "clamp", "sort", "max",
    "min_dim", "argmax", "topk", "histc", "remainder", "fmod", "lt", "maximum", "hypot",
    "lshift", "searchsorted", "addcmul", "div_trunc", "div_floor", "index_select", "index_add", "index_copy_source",
    "cross", "index_put", "setitem", "bce", "heaviside", "add_", "mul_", "div_",
}  # fmt: skip


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


# (dead call, arguments eager runs, arguments eager refuses, the break reason's words): each
# call's result is unused, so a trace that accepted the refused call would drop it
REFUSALS = {
    "histc_of_integers": (lambda x, y: torch.histc(x), (torch.randn(4),),
                          (torch.arange(4),), "not implemented for integer"),
    "cross_of_mixed_dtypes": (lambda x, y: torch.linalg.cross(x, y),
                              (torch.randn(2, 3), torch.randn(2, 3)),
                              (torch.randn(2, 3), torch.randn(2, 3).double()), "share a dtype"),
    "index_select_float_index": (lambda x, y: torch.index_select(x, 0, y),
                                 (torch.randn(4), torch.tensor([0, 2])),
                                 (torch.randn(4), torch.tensor([0.0, 2.0])), "index must be"),
    "sort_of_complex": (lambda x, y: torch.sort(x), (torch.randn(4),),
                        (torch.randn(4, dtype=torch.complex64),), "complex"),
    "max_of_complex": (lambda x, y: x.max(), (torch.randn(4),),
                       (torch.randn(4, dtype=torch.complex64),), "complex"),
    "remainder_of_complex": (lambda x, y: torch.remainder(x, 2), (torch.randn(4),),
                             (torch.randn(4, dtype=torch.complex64),), "complex"),
    "floor_of_complex": (lambda x, y: torch.floor(x), (torch.randn(4),),
                         (torch.randn(4, dtype=torch.complex64),), "complex"),
    "gelu_of_integers": (lambda x, y: torch.nn.functional.gelu(x), (torch.randn(4),),
                         (torch.arange(4),), "integer"),
    "setitem_of_another_dtype": (lambda x, y: x.clone().__setitem__(torch.tensor([0]), y),
                                 (torch.randn(4), torch.tensor(2.0)),
                                 (torch.randn(4), torch.tensor(2)), "must have the destination"),
    "complex_into_float": (lambda x, y: x.clone().add_(y), (torch.randn(4), torch.randn(4)),
                           (torch.randn(4), torch.randn(4, dtype=torch.complex64)),
                           "cannot be written"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_dead_call_eager_refuses_raises_as_in_eager(name):
    call, good, bad, reason = REFUSALS[name]

    def fn(*args):
        _unused = call(*args, *([None] * (2 - len(args))))
        return args[0] + 1

    compiled = Compiled(fn)
    assert same(compiled(*good), fn(*good))
    assert not compiled.breaks
    with pytest.raises(Exception) as eager:
        fn(*bad)
    with pytest.raises(Exception) as got:
        compiled(*bad)
    assert type(got.value) is type(eager.value)
    assert any(reason in b.reason for b in compiled.breaks), [b.reason for b in compiled.breaks]


# ---- numbers stored into a tensor's dtype: eager converts them with an overflow check --------
# (a fill value of 300 for int8 raises in eager; a graph would wrap it to 44 without a word)
STORED = {
    "full": lambda t, v: torch.full((2,), v, dtype=t.dtype),
    "scalar_tensor": lambda t, v: torch.scalar_tensor(v, dtype=t.dtype),
    "full_like": lambda t, v: torch.full_like(t, v),
    "new_full": lambda t, v: t.new_full((2,), v),
    "fill_": lambda t, v: t.clone().fill_(v),
    "masked_fill": lambda t, v: t.masked_fill(t == 0, v),
    "index_fill": lambda t, v: t.index_fill(0, torch.tensor([1]), v),
    "pad": lambda t, v: torch.nn.functional.pad(t, (1, 0), value=v),
    "where": lambda t, v: torch.where(t == 0, t, v),
    "clamp_max": lambda t, v: t.clamp(max=v),
    "clamp_min_": lambda t, v: t.clone().clamp_min_(v),
}
STORED_DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16,
                 torch.bfloat16, torch.float32, torch.bool]  # fmt: skip
NUMBERS = [300, -1, -256, 127, 2**31, 2**63 - 1, 1e6, 70000, 127.5, 1e39, float("inf"),
           float("nan"), True]  # fmt: skip


def _overflow_raised(fn) -> bool:
    try:
        fn()
    except RuntimeError as exc:
        return "overflow" in str(exc)
    return False


def _outside_dtype(value, dtype) -> bool:
    """A number a graph could not store in `dtype` unchanged: beyond an integer dtype's range
    (or not finite), beyond a floating dtype's finite range. Eager's own conversion of such a
    number changed across torch releases (2.13 refuses a clamp bound of 300 for int8, 2.15
    saturates it; 2.15 truncates a fill of 127.5 where 2.13 refuses it)."""
    if dtype is torch.bool or isinstance(value, bool):
        return False
    if dtype.is_floating_point:
        return math.isfinite(value) and abs(value) > torch.finfo(dtype).max
    info = torch.iinfo(dtype)
    return not math.isfinite(value) or not info.min <= value <= info.max


@pytest.mark.parametrize("name", sorted(STORED))
def test_checked_fake_run_refuses_stored_numbers_exactly_as_eager(name):
    """Where eager refuses a number for overflow, the checked run refuses it too; where eager
    takes it, the checked run takes it unless the number is outside the dtype (then the op
    runs eagerly at a break, whatever eager then does with it: never a wrapped value)."""
    op, mode = STORED[name], FakeTensorMode()
    for dtype, value in itertools.product(STORED_DTYPES, NUMBERS):
        t = torch.zeros(3, dtype=dtype)

        def checked(t=t, value=value):
            with mode, EagerKernelChecks():
                op(mode.from_tensor(t), value)

        if _overflow_raised(lambda t=t, value=value: op(t, value)):
            assert _raises(checked), (name, dtype, value)
        elif not _raises(lambda t=t, value=value: op(t, value)):
            assert not _raises(checked) or _outside_dtype(value, dtype), (name, dtype, value)


@pytest.mark.parametrize("name", sorted(STORED))
def test_number_that_overflows_the_dtype_raises_as_in_eager(name):
    op = STORED[name]
    compiled = Compiled(lambda t, v: op(t, v) + 1)
    t = torch.arange(3, dtype=torch.int8)
    assert same(compiled(t, 100), op(t, 100) + 1)  # in range: compiled
    assert not compiled.breaks
    try:
        expected = op(t, 300) + 1
    except RuntimeError:  # torch 2.13 refuses every one of them; 2.15 an in-place clamp bound
        with pytest.raises(RuntimeError):
            compiled(t, 300)
    else:  # 2.15 saturates an out-of-place clamp bound: the op runs as eager runs it
        assert same(compiled(t, 300), expected)
    assert any("without overflow" in b.reason for b in compiled.breaks)
