"""Functionalization rules, keyed by op: how a mutating op becomes out-of-place ops + writes.

The generic rules cover every op whose schema marks what it writes (in-place, out=, ops with
a `<name>_functional` twin). Ops that mutate without saying so in their schema, or that need
another treatment, get a rule registered here by decorator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch._ops import OpOverload

from ember_aot_autograd.errors import UnsupportedOpError
from ember_aot_autograd.op_kinds import (
    bind_arguments,
    call_by_name,
    changes_metadata,
    functional_overload,
    is_inplace,
    is_out_variant,
    written_arguments,
)

if TYPE_CHECKING:
    from ember_aot_autograd.tracer import FunctionalTracer

aten = torch.ops.aten
Rule = Callable[["FunctionalTracer", OpOverload, tuple, dict], Any]
SPECIAL_RULES: dict[OpOverload, Rule] = {}


def special_rule(*ops: OpOverload) -> Callable[[Rule], Rule]:
    def register(rule: Rule) -> Rule:
        for op in ops:
            SPECIAL_RULES[op] = rule
        return rule

    return register


def _as_tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def functionalize_mutation(tracer: FunctionalTracer, func: OpOverload, args: tuple, kwargs: dict):
    """The generic rule for ops whose schema names the arguments they write."""
    if changes_metadata(func):
        raise UnsupportedOpError(
            func,
            "changes a tensor's sizes or strides in place",
            "use the out-of-place op (e.g. t() instead of t_()) in the traced code",
        )
    written = written_arguments(func)
    bound = bind_arguments(func, args, kwargs)
    functional = functional_overload(func)
    if is_inplace(func) or is_out_variant(func):
        # the eager op on fake tensors gives eager's checks (dtype casts, shapes) and result
        before = [tuple(bound[name].shape) for name in written if bound[name] is not None]
        result = func(*args, **kwargs)
        after = [tuple(bound[name].shape) for name in written if bound[name] is not None]
        if before != after:
            raise UnsupportedOpError(func, "resizes its out= tensor", "pass a correctly sized out")
        f_args, f_kwargs = call_by_name(functional, bound)
        new_values = _as_tuple(tracer.call(functional, *f_args, **f_kwargs))
        for name, value in zip(written, new_values, strict=True):
            tracer.write(bound[name], value)
        return result
    # `<name>_functional`: the usual outputs, then the new value of each written argument
    f_args, f_kwargs = call_by_name(functional, bound)
    outputs = _as_tuple(tracer.call(functional, *f_args, **f_kwargs))
    n_results = len(func._schema.returns)
    for name, value in zip(written, outputs[n_results:], strict=True):
        if bound[name] is not None:
            tracer.write(bound[name], value)
    results = outputs[:n_results]
    return results[0] if n_results == 1 else results


@special_rule(aten.native_batch_norm.default)
def _batch_norm(tracer: FunctionalTracer, func: OpOverload, args: tuple, kwargs: dict):
    # training batch norm updates running stats in place though its schema does not say so
    bound = bind_arguments(func, args, kwargs)
    if not bound["training"] or bound["running_mean"] is None:
        return tracer.record(func, args, kwargs)
    functional = aten._native_batch_norm_legit_functional.default
    f_args, f_kwargs = call_by_name(functional, bound)
    out, save_mean, save_rstd, new_mean, new_var = tracer.call(functional, *f_args, **f_kwargs)
    tracer.write(bound["running_mean"], new_mean)
    tracer.write(bound["running_var"], new_var)
    return out, save_mean, save_rstd


@special_rule(aten.lift_fresh.default)
def _lift_fresh(tracer: FunctionalTracer, func: OpOverload, args: tuple, kwargs: dict):
    # torch.tensor(...) inside the trace: the constant was already lifted to a graph attribute
    return args[0]
