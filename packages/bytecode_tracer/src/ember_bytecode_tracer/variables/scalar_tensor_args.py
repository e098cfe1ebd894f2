"""A 0-d tensor passed where an op takes a Scalar (`x.addcmul_(a, b, value=lr_tensor)`,
`torch._foreach_lerp_(params, targets, weight_tensor)`, `torch._foreach_pow(base, exps)`):
eager reads the tensor's value into a number on each call, which on example values is a
data-dependent read. Written instead with the tensor overloads of the same arithmetic, the
value stays in the graph and each call reads the tensor it is given.

Taken only where the two are the same computation: the 0-d tensor has the dtype of the
tensors it meets (a Scalar does not promote them, a 0-d tensor of another dtype could) and
needs no gradient (eager's number carries none); otherwise the call is left as it was.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ember_bytecode_tracer.variables.lists import BaseListVariable
from ember_bytecode_tracer.variables.tensor import METHOD_RULES, TensorVariable
from ember_bytecode_tracer.variables.torch_functions import CALL_RULES

if TYPE_CHECKING:
    from ember_bytecode_tracer.variables.base import Translator, VariableTracker


def _scalar_like(value: Any, dtype: torch.dtype) -> bool:
    """A 0-d tensor standing for a Scalar, of `dtype`, without autograd history."""
    if not isinstance(value, TensorVariable):
        return False
    example = value.example
    return example.dim() == 0 and example.dtype == dtype and not example.requires_grad


def _tensors(value: Any) -> list[TensorVariable] | None:
    if not isinstance(value, BaseListVariable):
        return None
    items = list(value.items)
    if not items or not all(isinstance(v, TensorVariable) for v in items):
        return None
    return items


# ---- the same arithmetic with the tensor kept a tensor (inlined as user code) -----------
def _addcmul(self, tensor1, tensor2, value):
    return self + value * tensor1 * tensor2


def _addcmul_inplace(self, tensor1, tensor2, value):
    return self.add_(value * tensor1 * tensor2)


def _addcdiv(self, tensor1, tensor2, value):
    return self + value * (tensor1 / tensor2)


def _addcdiv_inplace(self, tensor1, tensor2, value):
    return self.add_(value * (tensor1 / tensor2))


def _foreach_lerp_inplace(starts, ends, weight):
    for start, end in zip(starts, ends, strict=True):
        start.lerp_(end, weight)
    return starts  # eager hands back the list it was given


def _foreach_pow_of_scalar(base, exponents):
    return tuple(torch.pow(base, exponent) for exponent in exponents)


def _pointwise_rule(polyfill):
    """`self.addcmul(t1, t2, value=v)` / `torch.addcmul(self, t1, t2, value=v)` with `v` a
    0-d tensor of self's dtype."""

    def rule(tx: Translator, args: list, kwargs: dict) -> VariableTracker | None:
        value = kwargs.get("value")
        if len(args) != 3 or set(kwargs) != {"value"} or not isinstance(args[0], TensorVariable):
            return None
        if not _scalar_like(value, args[0].example.dtype):
            return None
        return tx.inline_call(polyfill, None, [*args, value], {})

    return rule


def _method_rule(polyfill):
    rule = _pointwise_rule(polyfill)
    return lambda tx, tensor, args, kwargs: rule(tx, [tensor, *args], kwargs)


def _foreach_lerp_rule(tx: Translator, args: list, kwargs: dict) -> VariableTracker | None:
    if len(args) != 3 or kwargs:
        return None
    starts, ends = _tensors(args[0]), _tensors(args[1])
    if starts is None or ends is None or len(starts) != len(ends):
        return None
    if not _scalar_like(args[2], starts[0].example.dtype):
        return None
    return tx.inline_call(_foreach_lerp_inplace, None, list(args), {})


def _foreach_pow_rule(tx: Translator, args: list, kwargs: dict) -> VariableTracker | None:
    if len(args) != 2 or kwargs:
        return None
    exponents = _tensors(args[1])
    if exponents is None or not isinstance(args[0], TensorVariable):
        return None
    dtypes = {e.example.dtype for e in exponents}
    if len(dtypes) != 1 or not _scalar_like(args[0], dtypes.pop()):
        return None
    return tx.inline_call(_foreach_pow_of_scalar, None, list(args), {})


CALL_RULES[torch.addcmul] = _pointwise_rule(_addcmul)
CALL_RULES[torch.addcdiv] = _pointwise_rule(_addcdiv)
CALL_RULES[torch._foreach_lerp_] = _foreach_lerp_rule
CALL_RULES[torch._foreach_pow] = _foreach_pow_rule
METHOD_RULES["addcmul"] = _method_rule(_addcmul)
METHOD_RULES["addcmul_"] = _method_rule(_addcmul_inplace)
METHOD_RULES["addcdiv"] = _method_rule(_addcdiv)
METHOD_RULES["addcdiv_"] = _method_rule(_addcdiv_inplace)
