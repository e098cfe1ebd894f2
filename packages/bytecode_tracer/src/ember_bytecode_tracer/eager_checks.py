"""Argument checks eager's kernels make that torch's meta kernels skip.

Example values are computed on fake tensors, i.e. by the meta kernels, and those accept a
few calls the real kernels refuse: `t - True` (a subtraction with a bool operand), bitwise
ops on floats, an integer tensor to a negative integer power, `abs` of a bool tensor... A
trace that accepted them would compile a graph that runs where eager raises (or, when the
result is unused, drop the op altogether; fuzz 2026:128). `EagerKernelChecks` runs the check
registered for each aten op while an example value is computed; a failing check raises, which
the tracer turns into a graph break, so the op runs eagerly at the break and raises eager's
own error. Checks are keyed by the aten op (all its overloads), one function per rule (an op
may have several). Most refusals are CPU kernels compiled for fewer dtypes than the meta
kernel accepts ("floor_vml_cpu" not implemented for 'Bool'): a table of the dtype kinds each
op's CPU kernel lacks (`_CPU_KIND_GAPS`, found by running ~300 op/dtype calls on 'cpu' and
'meta'); they are checked on CPU tensors only, where they were measured. A number a kernel stores
into a tensor's dtype (a fill, pad or clamp value) is converted with eager's overflow check
(`_STORED_NUMBERS`): a graph would wrap it.
(`refuse_as_eager` runs in the RandomOpDetector mode the tracer already has around an example
value's computation: one more mode would cost a Python hop per op.)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ember_symbolic import DataDependentError

aten = torch.ops.aten
Check = Callable[[tuple, dict], str | None]
# aten op -> checks(args, kwargs): each the reason eager's kernel refuses the call, or None
CHECKS: dict[Any, list[Check]] = {}


def check(*packets: Any) -> Callable:
    def register(fn: Check) -> Check:
        for packet in packets:
            CHECKS.setdefault(packet, []).append(fn)
        return fn

    return register


class EagerKernelCheckFailed(RuntimeError):
    """Eager's kernel refuses this call (the meta kernel would have accepted it)."""


def refuse_as_eager(func: Any, args: tuple, kwargs: dict) -> None:
    """Raises EagerKernelCheckFailed where eager's kernel refuses `func(*args, **kwargs)`."""
    for rule in CHECKS.get(func.overloadpacket, ()):
        reason = rule(args, kwargs)
        if reason is not None:
            raise EagerKernelCheckFailed(f"{func}: {reason}")
    for position, dtype_of in STORED_NUMBER_CHECKS.get(func.overloadpacket, ()):
        reason = _stored_number(func, position, dtype_of, args, kwargs)
        if reason is not None:
            raise EagerKernelCheckFailed(f"{func}: {reason}")


class EagerKernelChecks(TorchDispatchMode):
    """Checks each aten op as eager's kernel would (the tracer runs `refuse_as_eager` from
    the one mode it already has around an example value: each mode is a Python hop per op)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        refuse_as_eager(func, args, kwargs)
        return func(*args, **kwargs)


def _dtype(value: Any) -> torch.dtype | None:
    if isinstance(value, torch.Tensor):
        return value.dtype
    if isinstance(value, bool | torch.SymBool):
        return torch.bool
    if isinstance(value, int | torch.SymInt):
        return torch.int64
    if isinstance(value, float | torch.SymFloat):
        return torch.float64
    if isinstance(value, complex):
        return torch.complex128
    return None


def _operand_dtypes(args: tuple) -> list[torch.dtype]:
    return [d for d in (_dtype(a) for a in args[:2]) if d is not None]


@check(aten.sub, aten.sub_, aten.rsub, aten.subtract, aten.subtract_)
def _subtraction_of_bools(args: tuple, kwargs: dict) -> str | None:
    if torch.bool in _operand_dtypes(args):
        return "subtraction with a bool operand (eager refuses it; use ~ or logical_not)"
    return None


@check(
    aten.bitwise_and, aten.bitwise_and_, aten.bitwise_or, aten.bitwise_or_,
    aten.bitwise_xor, aten.bitwise_xor_, aten.bitwise_not, aten.bitwise_not_,
    aten.__and__, aten.__iand__, aten.__or__, aten.__ior__, aten.__xor__, aten.__ixor__,
)  # fmt: skip
def _integral_operands(args: tuple, kwargs: dict) -> str | None:
    if any(d.is_floating_point or d.is_complex for d in _operand_dtypes(args)):
        return "not implemented for floating point or complex operands"
    return None


@check(aten.gcd, aten.gcd_, aten.lcm, aten.lcm_)
def _integer_operands(args: tuple, kwargs: dict) -> str | None:
    dtypes = _operand_dtypes(args)
    if any(d.is_floating_point or d.is_complex for d in dtypes):
        return "not implemented for floating point or complex operands"
    if dtypes and all(d is torch.bool for d in dtypes):  # promoted to bool
        return "not implemented for bool operands"
    return None


@check(aten.pow, aten.pow_)
def _integer_to_negative_power(args: tuple, kwargs: dict) -> str | None:
    if len(args) < 2 or not isinstance(args[0], torch.Tensor):
        return None
    base, exponent = args[0], args[1]
    integral = not (base.dtype.is_floating_point or base.dtype.is_complex)
    if integral and type(exponent) is int and exponent < 0:
        return "integers to negative integer powers are not allowed"
    return None


@check(aten.abs, aten.abs_)
def _abs_of_bools(args: tuple, kwargs: dict) -> str | None:
    if _dtype(args[0]) is torch.bool:
        return "abs is not implemented for bool tensors"
    return None


@check(aten._softmax, aten._log_softmax)
def _softmax_of_integers(args: tuple, kwargs: dict) -> str | None:
    d = _dtype(args[0])
    if d is not None and not (d.is_floating_point or d.is_complex):
        return "softmax of an integer tensor is not implemented"
    return None


@check(aten.var, aten.std, aten.var_mean, aten.std_mean)
def _spread_of_integers(args: tuple, kwargs: dict) -> str | None:
    d = _dtype(args[0])
    if d is not None and not (d.is_floating_point or d.is_complex):
        return "std and var only support floating point and complex dtypes"
    return None


@check(aten.mm, aten.mv, aten.addmm, aten.addmm_, aten.addmv, aten.addmv_, aten.addbmm)
def _matrix_product_dtypes(args: tuple, kwargs: dict) -> str | None:
    # mm/mv/addmm's meta kernels promote; eager's refuse operands of different dtypes
    # (fuzz 3001:2431: float32 @ float64 with an unused result ran instead of raising)
    dtypes = {a.dtype for a in args if isinstance(a, torch.Tensor)}
    if len(dtypes) > 1:
        return f"matrix product operands must share a dtype, got {sorted(map(str, dtypes))}"
    return None


# ---- dtype kinds CPU kernels are not compiled for ------------------------------------------

BOOL, INTEGER, FLOATING, COMPLEX = "bool", "integer", "floating", "complex"
_RANK = {BOOL: 0, INTEGER: 1, FLOATING: 2, COMPLEX: 3}


def _kind(dtype: torch.dtype) -> str:
    if dtype is torch.bool:
        return BOOL
    if dtype.is_complex:
        return COMPLEX
    return FLOATING if dtype.is_floating_point else INTEGER


def _promoted_kind(values: Any) -> str | None:
    """The kind of the dtype operands promote to: the highest kind among them (a 0-dim tensor
    or a Python number changes the dtype within a kind, never the kind)."""
    kinds = [_kind(d) for d in (_dtype(v) for v in values) if d is not None]
    return max(kinds, key=_RANK.__getitem__) if kinds else None


def _on_cpu(args: tuple) -> bool:
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    return bool(tensors) and all(t.device.type == "cpu" for t in tensors)


def _cpu_kind_gap(kinds: frozenset[str], operands: slice) -> Check:
    def rule(args: tuple, kwargs: dict) -> str | None:
        if not _on_cpu(args):
            return None
        kind = _promoted_kind(args[operands])
        if kind in kinds:
            return f"eager's CPU kernel is not implemented for {kind} tensors"
        return None

    return rule


FIRST, FIRST_TWO, FIRST_THREE = slice(0, 1), slice(0, 2), slice(0, 3)
B, Z, F, C = BOOL, INTEGER, FLOATING, COMPLEX  # Z: the integers
# (ops, dtype kinds their CPU kernels lack, operands whose promoted kind decides); an entry
# lists only kinds where CPU eager raised and the meta kernel did not (torch 2.13)
_CPU_KIND_GAPS: list[tuple[tuple[Any, ...], tuple[str, ...], slice]] = [
    ((aten.floor, aten.floor_, aten.ceil, aten.ceil_, aten.trunc, aten.trunc_, aten.round,
      aten.round_), (B, C), FIRST),
    ((aten.frac, aten.frac_), (Z, C), FIRST),
    ((aten.sign, aten.sign_, aten.signbit, aten.erf, aten.erf_, aten.erfinv, aten.erfinv_,
      aten.logit, aten.logit_, aten.lgamma, aten.lgamma_, aten.digamma, aten.digamma_, aten.i0,
      aten.i0_, aten.elu, aten.elu_, aten.leaky_relu, aten.leaky_relu_, aten.hardtanh,
      aten.hardtanh_, aten.softshrink, aten.clamp, aten.clamp_, aten.clamp_min,
      aten.clamp_min_, aten.clamp_max, aten.clamp_max_, aten.amax, aten.amin, aten.max,
      aten.min, aten.aminmax, aten.cummax, aten.cummin, aten.mode, aten.sort, aten.nansum,
      aten._softmax, aten._log_softmax), (C,), FIRST),
    ((aten.relu, aten.relu_, aten.threshold, aten.threshold_, aten.argmax, aten.argmin,
      aten.median, aten.nanmedian, aten.topk, aten.kthvalue, aten.avg_pool2d,
      aten.upsample_nearest1d), (B, C), FIRST),
    ((aten.gelu, aten.gelu_, aten.softplus, aten.mish, aten.mish_, aten.hardsigmoid,
      aten.hardsigmoid_, aten.hardswish, aten.hardswish_, aten.hardshrink, aten.glu,
      aten._prelu_kernel, aten.histc, aten._adaptive_avg_pool2d),
     (B, Z, C), FIRST),
    ((aten.silu, aten.silu_, aten.logcumsumexp, aten.lerp, aten.lerp_, aten.multi_margin_loss),
     (B, Z), FIRST),
    ((aten.log_sigmoid_forward, aten.binary_cross_entropy), (Z, C), FIRST),
    ((aten.trace, aten.reflection_pad1d), (B,), FIRST),
    ((aten.addcmul, aten.addcmul_), (B,), FIRST_THREE),
    ((aten.searchsorted, aten.bucketize), (B, C), FIRST_TWO),
    ((aten.nll_loss_forward,), (Z,), FIRST),
    ((aten.fmod, aten.fmod_, aten.remainder, aten.remainder_), (B, C), FIRST_TWO),
    ((aten.atan2, aten.atan2_, aten.xlogy, aten.xlogy_, aten.copysign, aten.copysign_,
      aten.maximum, aten.minimum, aten.fmax, aten.fmin, aten.lt, aten.lt_, aten.le, aten.le_,
      aten.gt, aten.gt_, aten.ge, aten.ge_, aten.special_zeta, aten.mse_loss), (C,), FIRST_TWO),
    ((aten.hypot, aten.hypot_, aten.nextafter, aten.nextafter_), (B, Z, C), FIRST_TWO),
    ((aten.smooth_l1_loss, aten.huber_loss), (Z, C), FIRST_TWO),
    ((aten.logaddexp, aten.logaddexp2), (Z,), FIRST_TWO),
    ((aten.igamma, aten.igamma_, aten.igammac), (B, Z), FIRST_TWO),
    ((aten.bitwise_left_shift, aten.bitwise_left_shift_, aten.bitwise_right_shift,
      aten.bitwise_right_shift_, aten.__lshift__, aten.__ilshift__, aten.__rshift__,
      aten.__irshift__), (B, F, C), FIRST_TWO),
    ((aten.mm, aten.bmm, aten.dot, aten.addmm, aten.baddbmm), (B,), FIRST_THREE),
]  # fmt: skip

for _ops, _kinds, _operands in _CPU_KIND_GAPS:
    check(*_ops)(_cpu_kind_gap(frozenset(_kinds), _operands))


@check(aten.pow, aten.pow_)
def _power_of_bool_tensors(args: tuple, kwargs: dict) -> str | None:
    # a bool tensor to a bool tensor's power; to a Python bool it runs
    both = all(isinstance(a, torch.Tensor) and a.dtype is torch.bool for a in args[:2])
    if len(args) >= 2 and both and _on_cpu(args):
        return "eager's CPU kernel is not implemented for bool tensors"
    return None


_ROUNDING_DIVISION_GAPS = {"trunc": (BOOL, COMPLEX), "floor": (BOOL,)}


@check(aten.div, aten.div_)
def _rounding_division(args: tuple, kwargs: dict) -> str | None:
    mode = kwargs.get("rounding_mode")
    kind = _promoted_kind(args[:2])
    if kind in _ROUNDING_DIVISION_GAPS.get(mode, ()) and _on_cpu(args):
        return f"eager's CPU kernel divides with rounding_mode={mode!r} no {kind} tensors"
    return None


# ---- argument dtypes eager checks and the meta kernels do not --------------------------------

_LONG_INDEX = (torch.int64,)
_INT_INDEX = (torch.int32, torch.int64)


def _index_dtype(allowed: tuple[torch.dtype, ...]) -> Check:
    def rule(args: tuple, kwargs: dict) -> str | None:
        index = args[2] if len(args) > 2 else kwargs.get("index")
        if isinstance(index, torch.Tensor) and index.dtype not in allowed:
            return f"index must be of dtype {' or '.join(map(str, allowed))}, got {index.dtype}"
        return None

    return rule


check(aten.index_select, aten.index_add, aten.index_add_)(_index_dtype(_INT_INDEX))
check(aten.index_copy, aten.index_copy_, aten.index_fill, aten.index_fill_)(
    _index_dtype(_LONG_INDEX)
)


@check(aten.index_add, aten.index_add_, aten.index_copy, aten.index_copy_)
def _source_dtype(args: tuple, kwargs: dict) -> str | None:
    source = args[3] if len(args) > 3 else kwargs.get("source")
    if isinstance(source, torch.Tensor) and source.dtype != args[0].dtype:
        return f"source ({source.dtype}) must have self's dtype ({args[0].dtype})"
    return None


@check(aten.linalg_cross, aten.heaviside, aten.heaviside_, aten.polar, aten.complex,
       aten._cdist_forward)  # fmt: skip
def _operands_of_one_dtype(args: tuple, kwargs: dict) -> str | None:
    dtypes = {a.dtype for a in args[:2] if isinstance(a, torch.Tensor)}
    if len(dtypes) > 1:
        return f"operands must share a dtype, got {sorted(map(str, dtypes))}"
    return None


@check(aten.index_put, aten.index_put_, aten._index_put_impl, aten._index_put_impl_)
def _put_values_dtype(args: tuple, kwargs: dict) -> str | None:
    # `x[i] = v` too: eager casts Python numbers to x's dtype, never a tensor v
    values = args[2] if len(args) > 2 else kwargs.get("values")
    if isinstance(values, torch.Tensor) and values.dtype != args[0].dtype:
        return f"values ({values.dtype}) must have the destination's dtype ({args[0].dtype})"
    return None


@check(aten.binary_cross_entropy)
def _target_dtype(args: tuple, kwargs: dict) -> str | None:
    if _on_cpu(args) and isinstance(args[1], torch.Tensor) and args[1].dtype != args[0].dtype:
        return f"target ({args[1].dtype}) must have the input's dtype ({args[0].dtype})"
    return None


@check(aten.linalg_cross)
def _cross_of_bools(args: tuple, kwargs: dict) -> str | None:
    if _on_cpu(args) and _promoted_kind(args[:2]) is BOOL:
        return "eager's CPU kernel is not implemented for bool tensors"
    return None


@check(aten.heaviside, aten.heaviside_)
def _heaviside_of_complex(args: tuple, kwargs: dict) -> str | None:
    if _promoted_kind(args[:2]) is COMPLEX:
        return "heaviside is not implemented for complex tensors"
    return None


def _inplace_result_fits(floor: str) -> Check:
    """An in-place op whose result kind (the operands' promoted kind, at least `floor`) is
    above the written tensor's: eager cannot cast the result back (an int tensor += 0.5j)."""

    def rule(args: tuple, kwargs: dict) -> str | None:
        if len(args) < 2 or not isinstance(args[0], torch.Tensor):
            return None
        low = BOOL if kwargs.get("rounding_mode") is not None else floor
        result = max(_promoted_kind(args[:2]) or BOOL, low, key=_RANK.__getitem__)
        if _RANK[result] > _RANK[_kind(args[0].dtype)]:
            return f"a {result} result cannot be written into a {args[0].dtype} tensor"
        return None

    return rule


check(aten.add_, aten.sub_, aten.mul_)(_inplace_result_fits(BOOL))
check(aten.div_)(_inplace_result_fits(FLOATING))


# ---- a Python number stored into a tensor's dtype ----------------------------------------------


def _number_overflows(value: Any, dtype: torch.dtype) -> bool:
    """Whether eager's checked conversion of the number `value` to `dtype` refuses it (a fill
    value of 300 for int8): out of the dtype's finite range; an infinity or NaN fits a
    floating dtype only; a negative int fits an unsigned dtype as a two's complement wrap
    down to -max. A symbolic int is decided on its example value, with its guard, where the
    dtype cannot hold every int64; one only the graph's run knows (data-dependent) and a
    symbolic float are not checked."""
    if dtype is torch.bool or dtype.is_complex or isinstance(value, bool | torch.SymBool):
        return False
    if not isinstance(value, int | float | torch.SymInt | torch.SymFloat):
        return False
    floating = isinstance(value, float | torch.SymFloat)
    if floating and isinstance(value, float) and not math.isfinite(value):
        return not dtype.is_floating_point  # an infinity or NaN: floating dtypes only
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
        lo, hi = info.min, info.max
    else:
        info = torch.iinfo(dtype)
        unsigned_wrap = info.min == 0 and not floating
        lo, hi = (-info.max if unsigned_wrap else info.min), info.max
        if floating:  # compared as doubles: 2.0**63 fits int64 there
            lo, hi = float(lo), float(hi)
    if isinstance(value, torch.SymFloat):
        return False
    if isinstance(value, torch.SymInt) and lo <= -(2**63) and hi >= 2**63 - 1:
        return False  # every int64 fits: no guard needed
    try:
        return not (bool(value >= lo) and bool(value <= hi))
    except DataDependentError:
        return False


def _stored_number(
    func: Any, position: int, dtype_of: Callable[[tuple, dict], torch.dtype | None],
    args: tuple, kwargs: dict,
) -> str | None:  # fmt: skip
    """Why eager's `func` would not store the number at `position` as a graph would: eager
    refuses it (asked of eager itself on a one-element tensor: the rules changed across
    releases, e.g. torch 2.15 converts a pad value through a double), or it lies outside the
    dtype, where eager converts it its own way (2.15 saturates a clamp bound, truncates a
    fill of 127.5) and a graph would wrap it: either way the op runs eagerly at a break."""
    value = args[position] if len(args) > position else None
    dtype = dtype_of(args, kwargs)
    if dtype is None:
        return None
    probe = _PROBES.get(func.overloadpacket)
    if probe is not None and type(value) in (int, float):
        refused = _eager_refuses(func, probe, value, dtype)
        if refused is not None:
            return refused
    if _number_overflows(value, dtype):
        return f"value {value!r} cannot be converted to {dtype} without overflow"
    return None


@functools.lru_cache(maxsize=4096)
def _eager_refuses_cached(
    func: Any, probe: Callable, kind: type, value: Any, dtype: Any
) -> str | None:
    try:
        with torch.utils._python_dispatch._disable_current_modes():  # a real run, not fake
            probe(func, value, dtype)
    except (RuntimeError, OverflowError) as exc:
        lines = str(exc).strip().splitlines()
        return lines[0] if lines else type(exc).__name__
    return None


def _eager_refuses(func: Any, probe: Callable, value: Any, dtype: torch.dtype) -> str | None:
    return _eager_refuses_cached(func, probe, type(value), value, dtype)


def _one(dtype: torch.dtype) -> torch.Tensor:
    return torch.zeros(1, dtype=dtype)


# how to ask eager about a number on a one-element CPU tensor, per op (clamp is not asked:
# a bound inside the dtype is stored as is, one outside it always runs eagerly)
_PROBES: dict[Any, Callable[[Any, Any, torch.dtype], Any]] = {
    aten.full: lambda f, v, d: f([1], v, dtype=d),
    aten.scalar_tensor: lambda f, v, d: f(v, dtype=d),
    aten.full_like: lambda f, v, d: f(_one(d), v),
    aten.new_full: lambda f, v, d: f(_one(d), [1], v),
    aten.fill: lambda f, v, d: f(_one(d), v),
    aten.fill_: lambda f, v, d: f(_one(d), v),
    aten.masked_fill: lambda f, v, d: f(_one(d), torch.ones(1, dtype=torch.bool), v),
    aten.masked_fill_: lambda f, v, d: f(_one(d), torch.ones(1, dtype=torch.bool), v),
    aten.index_fill: lambda f, v, d: f(_one(d), 0, torch.zeros(1, dtype=torch.long), v),
    aten.index_fill_: lambda f, v, d: f(_one(d), 0, torch.zeros(1, dtype=torch.long), v),
    aten.constant_pad_nd: lambda f, v, d: f(_one(d), [1, 0], v),  # a padded element: converted,
}


def _given_dtype(args: tuple, kwargs: dict) -> torch.dtype | None:
    return kwargs.get("dtype")


def _given_dtype_not_half(args: tuple, kwargs: dict) -> torch.dtype | None:
    # scalar_tensor rounds to an infinity in float16 and bfloat16 (eager checks the others)
    dtype = kwargs.get("dtype")
    return None if dtype in (torch.float16, torch.bfloat16) else dtype


def _dtype_or_self(args: tuple, kwargs: dict) -> torch.dtype | None:
    return kwargs.get("dtype") or _dtype(args[0])


def _bound_dtype(position: int) -> Callable[[tuple, dict], torch.dtype | None]:
    """clamp's bound converts to the result's dtype: the tensor's, or the promoted one
    (clamp(int_tensor, max=2.5) is a float tensor)."""

    def dtype_of(args: tuple, kwargs: dict) -> torch.dtype | None:
        value = args[position] if len(args) > position else None
        if not isinstance(args[0], torch.Tensor) or isinstance(value, bool | torch.SymBool):
            return None
        if not isinstance(value, int | float | torch.SymInt | torch.SymFloat):
            return None
        kind = 0.0 if isinstance(value, float | torch.SymFloat) else 0  # what promotes
        return torch.result_type(args[0], kind)

    return dtype_of


# (ops, the position of the number, where the dtype it is converted to comes from): eager's
# kernels convert these numbers with a check; binary ops (t + 300) wrap without one
_STORED_NUMBERS: list[tuple[tuple[Any, ...], int, Callable]] = [
    ((aten.full,), 1, _given_dtype),
    ((aten.scalar_tensor,), 0, _given_dtype_not_half),
    ((aten.full_like,), 1, _dtype_or_self),
    ((aten.new_full,), 2, _dtype_or_self),
    ((aten.fill, aten.fill_), 1, _dtype_or_self),
    ((aten.masked_fill, aten.masked_fill_), 2, _dtype_or_self),
    ((aten.index_fill, aten.index_fill_), 3, _dtype_or_self),
    ((aten.constant_pad_nd,), 2, _dtype_or_self),
    ((aten.clamp, aten.clamp_), 1, _bound_dtype(1)),
    ((aten.clamp, aten.clamp_), 2, _bound_dtype(2)),
    ((aten.clamp_min, aten.clamp_min_, aten.clamp_max, aten.clamp_max_), 1, _bound_dtype(1)),
]  # fmt: skip

# aten op -> (position, dtype_of) of each number it stores (refuse_as_eager asks these with
# the op itself: the probe calls the same overload)
STORED_NUMBER_CHECKS: dict[Any, list[tuple[int, Callable]]] = {}
for _ops, _position, _dtype_of in _STORED_NUMBERS:
    for _op in _ops:
        STORED_NUMBER_CHECKS.setdefault(_op, []).append((_position, _dtype_of))
