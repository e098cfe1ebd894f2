"""Functionalization rules, keyed by op: how a mutating op becomes out-of-place ops + writes.

The generic rules cover every op whose schema marks what it writes (in-place, out=, ops with
a `<name>_functional` twin). Ops that mutate without saying so in their schema, or that need
another treatment, get a rule registered here by decorator.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch._ops import OpOverload
from torch.utils._python_dispatch import _disable_current_modes

from ember_aot_autograd.errors import UnsupportedOpError
from ember_aot_autograd.op_kinds import (
    bind_arguments,
    call_by_name,
    changes_metadata,
    functional_overload,
    is_inplace,
    is_out_variant,
    returns_views,
    written_arguments,
)
from ember_aot_autograd.overlap import overlaps_itself, shares_memory

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
        return _view_in_place(tracer, func, args, kwargs)
    written = written_arguments(func)
    bound = bind_arguments(func, args, kwargs)
    functional = functional_overload(func)
    if is_inplace(func) or is_out_variant(func):
        # the eager op on fake tensors gives eager's checks (dtype casts, shapes) and result
        targets = _flat(bound[name] for name in written)
        before = [tuple(t.shape) for t in targets]
        result = func(*args, **kwargs)
        if before != [tuple(t.shape) for t in targets]:
            raise UnsupportedOpError(func, "resizes its out= tensor", "pass a correctly sized out")
        _check_overlap(func, bound, written)
        f_args, f_kwargs = call_by_name(functional, bound)
        new_values = tracer.call(functional, *f_args, **f_kwargs)
        if len(functional._schema.returns) == 1:  # one Tensor or one Tensor[] (foreach ops)
            new_values = (new_values,)
        if len(new_values) != len(written):  # one result per written argument, lists alike
            raise UnsupportedOpError(func, "its functional twin returns other results")
        for target, value in zip(targets, _flat(new_values), strict=True):
            _check_cast(func, value, target)
            tracer.write(target, value)
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


def _flat(values) -> list:
    """The tensors among `values`, a Tensor[] argument (foreach ops) contributing each of its
    elements in order; absent (None) arguments contribute nothing."""
    out = []
    for value in values:
        out.extend(value if isinstance(value, list | tuple) else (value,))
    return [v for v in out if v is not None]


def _check_overlap(func: OpOverload, bound: dict, written: Sequence[str]) -> None:
    """Eager refuses (or computes in its own visiting order) a write into memory the op
    also reads through another view, or into a self-overlapping tensor; the functional
    form would not match it. Refused, so the graph runs eagerly (overlap.py)."""
    targets = [t for t in _flat(bound[name] for name in written) if isinstance(t, torch.Tensor)]
    reads = [
        t
        for name, value in bound.items()
        if name not in written
        for t in (value if isinstance(value, list | tuple) else (value,))
        if isinstance(t, torch.Tensor)
    ]
    for target in targets:
        if overlaps_itself(target):
            raise UnsupportedOpError(func, "writes a tensor whose elements overlap (expanded)")
        if any(shares_memory(target, t) for t in reads):
            raise UnsupportedOpError(func, "writes memory it also reads through another view")


def _check_cast(func: OpOverload, value: Any, target: Any) -> None:
    """Eager refuses to write a result into a tensor whose dtype cannot hold it (an int
    tensor's mul_(0.5)); meta kernels do not check, and the functional op plus its copy
    would cast silently. Refused, so the graph runs eagerly and raises eager's error."""
    if (
        is_inplace(func)
        and isinstance(value, torch.Tensor)
        and isinstance(target, torch.Tensor)
        and not torch.can_cast(value.dtype, target.dtype)
    ):
        raise UnsupportedOpError(
            func, f"result type {value.dtype} can't be cast to the written {target.dtype}"
        )


def _view_in_place(tracer: FunctionalTracer, func: OpOverload, args: tuple, kwargs: dict):
    """``t.squeeze_(0)`` (aten's matmul and quantile do it to their own temporaries): the
    out-of-place view, then ``t`` reads as that view. Only the Python object ``t`` changes,
    not its storage, so this is exact unless ``t`` is a graph input, whose new sizes the
    caller would see (not replayed: refused)."""
    target = args[0]
    view_op = _view_twin(func)
    entry = tracer.table.get(target)
    is_input = entry is not None and entry.storage.input_index is not None and not entry.chain
    if view_op is None or is_input:
        raise UnsupportedOpError(
            func,
            "changes a tensor's sizes or strides in place"
            + (" (a graph input)" if is_input else " and has no out-of-place view twin"),
            "use the out-of-place op (e.g. t() instead of t_()) in the traced code",
        )
    viewed = tracer.call(view_op, *args, **kwargs)
    holders = [n for n in tracer.graph.nodes if n.meta.get("val") is target]
    if holders:  # the nodes' metadata keeps the sizes they had
        with _disable_current_modes(), tracer.fake_mode:
            before = target.as_strided(target.shape, target.stride(), target.storage_offset())
        for node in holders:
            node.meta["val"] = before
    func(*args, **kwargs)  # the fake tensor takes the new sizes and strides, as in eager
    view_entry = tracer.table.get(viewed)
    tracer.table.entries[id(target)] = dataclasses.replace(view_entry, tensor=target)
    return target


def _view_twin(func: OpOverload) -> OpOverload | None:
    """squeeze_.dim -> squeeze.dim: the view op computing the same metadata change."""
    try:
        twin = functional_overload(func)
    except UnsupportedOpError:
        return None
    return twin if returns_views(twin) else None


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


@special_rule(aten._local_scalar_dense.default)
def _read_scalar(tracer: FunctionalTracer, func: OpOverload, args: tuple, kwargs: dict):
    """`t.item()`: the fake kernel gives an unbacked symbol (the env allows scalar outputs);
    the read is a node of its own, and later ops using the symbol read it from that node.
    Without such an env it is refused as any data-dependent read (`record`'s clear error)."""
    if not getattr(tracer.fake_mode.shape_env, "allow_scalar_outputs", False):
        return tracer.record(func, args, kwargs)
    value = func(*args, **kwargs)
    node = tracer.graph.call_function(func, (tracer.read(args[0]),))
    if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
        tracer.symbols.bind_symint(value, node)
    else:
        node.meta["val"] = value
    return value


@special_rule(aten._assert_scalar.default)
def _assert_scalar(tracer: FunctionalTracer, func: OpOverload, args: tuple, kwargs: dict):
    """A run-time assertion on a symbolic condition (a torch._check on an item() value): kept
    as a node of the graph (impure: dead-code elimination keeps it), never run on fakes; the
    trace assumes it from here on (the node checks it), as the tracer did."""
    cond, *rest = args
    if isinstance(cond, torch.SymBool):
        cond.node.expect_true()
        try:
            cond = tracer.symbols.node_of(cond)
        except NotImplementedError as error:  # a symbol no node of this graph computes
            raise UnsupportedOpError(func, f"asserts on a value it cannot read: {error}") from error
    node = tracer.graph.call_function(func, (cond, *rest), kwargs)
    node.meta["val"] = None


@special_rule(aten.lift_fresh.default)
def _lift_fresh(tracer: FunctionalTracer, func: OpOverload, args: tuple, kwargs: dict):
    # torch.tensor(...) inside the trace: the constant was already lifted to a graph attribute
    return args[0]
