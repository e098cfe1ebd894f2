"""Argument checks eager's kernels make that torch's meta kernels skip.

Example values are computed on fake tensors, i.e. by the meta kernels, and those accept a
few calls the real kernels refuse: `t - True` (a subtraction with a bool operand), bitwise
ops on floats, an integer tensor to a negative integer power, `abs` of a bool tensor... A
trace that accepted them would compile a graph that runs where eager raises (or, when the
result is unused, drop the op altogether; fuzz 2026:128). `EagerKernelChecks` runs the check
registered for each aten op while an example value is computed; a failing check raises, which
the tracer turns into a graph break, so the op runs eagerly at the break and raises eager's
own error. Checks are keyed by the aten op (all its overloads), one function per rule.
(`refuse_as_eager` runs in the RandomOpDetector mode the tracer already has around an example
value's computation: one more mode would cost a Python hop per op.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

aten = torch.ops.aten
# aten op -> check(args, kwargs): the reason eager's kernel refuses the call, or None
CHECKS: dict[Any, Callable[[tuple, dict], str | None]] = {}


def check(*packets: Any) -> Callable:
    def register(fn: Callable[[tuple, dict], str | None]) -> Callable:
        for packet in packets:
            CHECKS[packet] = fn
        return fn

    return register


class EagerKernelCheckFailed(RuntimeError):
    """Eager's kernel refuses this call (the meta kernel would have accepted it)."""


def refuse_as_eager(func: Any, args: tuple, kwargs: dict) -> None:
    """Raises EagerKernelCheckFailed where eager's kernel refuses `func(*args, **kwargs)`."""
    rule = CHECKS.get(func.overloadpacket)
    if rule is not None:
        reason = rule(args, kwargs)
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
