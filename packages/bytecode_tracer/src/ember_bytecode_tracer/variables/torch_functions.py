"""torch.* and torch.nn.functional.* callables: each call becomes a graph node."""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from typing import Any

import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import GuardKind, TorchStateSource
from ember_bytecode_tracer.guards.sources import torch_state_query
from ember_bytecode_tracer.variables.base import CallableVariable, VariableTracker
from ember_bytecode_tracer.variables.builder import guard, guard_identity, in_rule_table, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.functions import (
    NestedUserFunctionVariable,
    PartialVariable,
    UserFunctionVariable,
    UserMethodVariable,
)
from ember_bytecode_tracer.variables.lists import BaseListVariable
from ember_bytecode_tracer.variables.nn_module import NNModuleVariable
from ember_bytecode_tracer.variables.numpy_arrays import NumpyArrayVariable, tensor_from_array
from ember_bytecode_tracer.variables.objects import TypeVariable, constructor
from ember_bytecode_tracer.variables.sym_values import SymNodeVariable
from ember_bytecode_tracer.variables.tensor import as_node_arg, wrap_graph_value
from ember_bytecode_tracer.variables.tensor_lists import tensor_of_tensors
from ember_bytecode_tracer.variables.validation_checks import deferred_all_true


def _compiling_predicates() -> list:
    names = [
        (torch.compiler, "is_compiling"),
        (torch.compiler, "is_dynamo_compiling"),
        (torch._utils, "is_compiling"),
    ]
    return [getattr(owner, name) for owner, name in names if hasattr(owner, name)]


def _fx_tracing_predicates() -> list:
    fn = getattr(torch.nn.modules.activation, "_is_make_fx_tracing", None)
    return [fn] if fn is not None else []


# Functions answered from trace-time state rather than put in the graph. Parameter names
# follow torch's own, so keyword calls (`torch.is_floating_point(input=y)`) bind as in eager.
CONSTANT_FOLDED = {
    torch.is_tensor: lambda obj: isinstance(obj, torch.Tensor),
    torch.is_grad_enabled: lambda: torch.is_grad_enabled(),
    torch.is_floating_point: lambda input: input.is_floating_point(),
    torch.is_complex: lambda input: input.is_complex(),
    torch.numel: lambda input: input.numel(),
    # What a trace answers about the tracing situation: not scripting, not jit-tracing,
    # not capturing a CUDA graph (those would make the model take other paths).
    torch.jit.is_scripting: lambda: False,
    torch.jit.is_tracing: lambda: False,
    torch.cuda.is_current_stream_capturing: lambda: False,
    torch.cuda.is_available: lambda: torch.cuda.is_available(),
    torch.accelerator.is_available: lambda: torch.accelerator.is_available(),
    # A trace is a compile: libraries ask this to avoid data-dependent shortcuts (HF attention
    # masks skip themselves when all ones) that would break graphs. Exporting is not us.
    **{fn: (lambda: True) for fn in _compiling_predicates()},
    torch.compiler.is_exporting: lambda: False,
    # torch's own answer for a graph tracer: nn.MultiheadAttention then takes its traceable
    # path (made contiguous like the fused kernel's), not aten's fused inference kernel,
    # whose undefined attention weights no graph output can hold
    **{fn: (lambda: True) for fn in _fx_tracing_predicates()},
}
# Queries of state the trace itself switches as it goes (grad mode is in CONSTANT_FOLDED;
# autocast blocks are entered at trace time too) and whose value at frame entry every
# frame guards (convert_frame._finalize): answered from trace time, with no further guard.
_TRACKED_STATE_NAMES = (
    "is_autocast_enabled", "get_autocast_dtype", "_is_any_autocast_enabled",
    "is_autocast_cache_enabled", "is_autocast_cpu_enabled", "get_autocast_cpu_dtype",
    "get_autocast_gpu_dtype", "get_autocast_ipu_dtype", "is_autocast_ipu_enabled",
)  # fmt: skip
# Functions of their arguments alone (no thread or process state): folded unguarded.
_PURE_NAMES = ("promote_types", "can_cast", "_get_tracing_state")
FOLDED_UNGUARDED = {
    getattr(owner, name)
    for owner in (torch, torch._C)
    for name in (*_TRACKED_STATE_NAMES, *_PURE_NAMES)
    if hasattr(owner, name)
}
# Functions with effects outside the graph, or that read data into Python.
UNSUPPORTED = {
    torch.manual_seed, torch.save, torch.load, torch.set_default_dtype,
    torch.use_deterministic_algorithms, torch.set_printoptions,
}  # fmt: skip
# The mode stacks: a pop or push would run at trace time (torch.overrides' mode handling,
# `_pop_mode_temporarily`, reached once its sets are traced) and leave the stack changed.
UNSUPPORTED |= {
    getattr(torch._C, name)
    for name in ("_pop_torch_function_stack", "_push_on_torch_function_stack",
                 "_pop_torch_dispatch_stack", "_push_on_torch_dispatch_stack")
    if hasattr(torch._C, name)
}  # fmt: skip
# The torch.func transforms' level stack: `grad_increment_nesting()` and its siblings,
# entered when the trace goes into torch.func.grad/vmap/jvp, would push a level at trace
# time that a break before the matching decrement leaves pushed for every later call
# (eager's next `requires_grad_()` then raised "inside of a function being transformed").
_FUNCTORCH = getattr(torch._C, "_functorch", None)
UNSUPPORTED |= {
    getattr(_FUNCTORCH, name)
    for name in dir(_FUNCTORCH)
    if name.endswith(("_increment_nesting", "_decrement_nesting", "dynamic_layer_stack"))
    or name.startswith("pop_dynamic_layer_stack")
}  # fmt: skip


# A C setter of process state (`torch._C._set_default_dtype`, `_set_cudnn_enabled`): a
# graph node answering None is dropped as unused, and running it at trace time would change
# the state the rest of the trace sees. It runs as Python, after a break. The setters the
# tracer models (grad mode, saved-tensor hooks, autocast) are rules of their own.
_SETTER_NAME = re.compile(r"^_?set_")
_MODELED_SETTERS = {torch._C._set_grad_enabled}


def _sets_process_state(fn: Any) -> bool:
    return (
        isinstance(fn, types.BuiltinFunctionType)
        and fn not in _MODELED_SETTERS
        and bool(_SETTER_NAME.search(getattr(fn, "__name__", "")))
    )


# A query whose answer may be None (`_saved_tensors_hooks_get_disabled_error_message`).
_GETTER_NAME = re.compile(r"(^|_)(get|is|are)_")


def _reads_global_state(fn: Any, args, kwargs, value: Any) -> bool:
    """A call answered with a Python value from constant arguments alone: what it answers
    comes from thread or process state (the profiler, deterministic mode, cuDNN flags, the
    default dtype...), which the graph built from its value depends on."""
    if isinstance(value, torch.Tensor) or fn in FOLDED_UNGUARDED:
        return False
    if value is None and not _GETTER_NAME.search(getattr(fn, "__name__", "")):
        return False  # a setter (torch._C._set_cudnn_enabled): its node runs in the graph
    return all(a.is_python_constant() for a in (*args, *kwargs.values()))


def query_path(fn: Any) -> str | None:
    """The dotted path under torch reaching `fn` (what a guard calls again), if any."""
    module = getattr(fn, "__module__", None) or ""
    owner = getattr(getattr(fn, "__self__", None), "__name__", None)
    for prefix in dict.fromkeys(p for p in (module, owner) if isinstance(p, str)):
        if prefix == "torch" or prefix.startswith("torch."):
            path = f"{prefix}.{fn.__name__}".removeprefix("torch.")
            if torch_state_query(path) is fn:
                return path
    return None


# `has_torch_function(args)` on constants (`torch._assert(cond, msg)` with a Python bool): an
# argument's override is a fact of the constants; the rest of the answer is whether a
# torch-function mode is on, which is what gets guarded.
_TORCH_FUNCTION_CHECKS = {
    getattr(torch._C, name)
    for name in ("_has_torch_function", "_has_torch_function_unary", "_has_torch_function_variadic")
    if hasattr(torch._C, name)
}
_MODE_QUERY = torch._C._is_torch_function_mode_enabled


def guard_state_query(tx, fn: Any, args, kwargs, value: Any) -> None:
    """Guard that `fn(*args)` still answers `value` when the graph is reused; a query a guard
    cannot repeat (no path under torch, several or non-literal arguments) ends the graph."""
    if fn in _TORCH_FUNCTION_CHECKS:
        guard_state_query(tx, _MODE_QUERY, [], {}, _MODE_QUERY())
        return
    name = getattr(fn, "__name__", fn)
    path = query_path(fn)
    literals = [a.as_python_constant() for a in args]
    if path is None or kwargs or len(literals) > 1 or not all(isinstance(a, str) for a in literals):
        raise Unsupported(f"torch.{name}() answers from global state a guard cannot re-read")
    source = TorchStateSource(path, literals[0] if literals else None)
    # The first read is what the frame's entry state must match; later reads of the same
    # state follow from it and from what the trace itself set in between (a guard on a
    # value the trace changed would never hold at entry).
    if source not in tx.output.state_queries:
        tx.output.state_queries.add(source)
        guard(tx, source, GuardKind.EQUALS_MATCH, value)


def is_torch_callable(value: Any) -> bool:
    """A function from the torch namespace that should go into graphs as a call."""
    if isinstance(value, type):
        return False
    if isinstance(value, types.BuiltinFunctionType | types.BuiltinMethodType):
        module = getattr(value, "__module__", None) or ""
        self_module = getattr(getattr(value, "__self__", None), "__name__", "") or ""
        return module.startswith("torch") or self_module.startswith("torch")
    if isinstance(value, types.FunctionType):
        return value.__module__ in ("torch.nn.functional", "torch.functional") or (
            value.__module__ or ""
        ).startswith("torch._tensor")
    return type(value).__name__ in ("OpOverloadPacket", "OpOverload", "_VariableFunctionsClass")


def _folding_value(arg: VariableTracker) -> Any:
    return getattr(arg, "example", None) if hasattr(arg, "example") else arg.as_python_constant()


def _passes_python_callable(args, kwargs) -> bool:
    callables = (NNModuleVariable, UserFunctionVariable, UserMethodVariable,
                 NestedUserFunctionVariable, PartialVariable)  # fmt: skip
    return any(isinstance(a, callables) for a in (*args, *kwargs.values()))


# Functions whose call another module answers, by function (scalar_tensor_args.py: a 0-d
# tensor where the op takes a Scalar): (tx, args, kwargs) -> tracker, or None to decline.
CallRule = Callable[[Any, list, dict], "VariableTracker | None"]
CALL_RULES: dict[Any, CallRule] = {}


class TorchFunctionVariable(CallableVariable):
    def call_function(self, tx, args, kwargs):
        fn = self.fn
        rule = CALL_RULES.get(fn) if in_rule_table(fn, CALL_RULES) else None
        if rule is not None and (answered := rule(tx, list(args), dict(kwargs))) is not None:
            return answered
        if rule is not None and not is_torch_callable(fn) and isinstance(fn, types.FunctionType):
            return tx.inline_call(fn, None, list(args), kwargs)  # a declined Python-level rule
        if fn in UNSUPPORTED or _sets_process_state(fn):
            raise Unsupported(f"torch.{getattr(fn, '__name__', fn)}() changes global state")
        if fn in CONSTANT_FOLDED:
            values = [_folding_value(a) for a in args]
            kw_values = {k: _folding_value(v) for k, v in kwargs.items()}
            try:
                result = CONSTANT_FOLDED[fn](*values, **kw_values)
            except TypeError as exc:  # a bad call: let Python raise it as eager would
                raise Unsupported(f"torch.{fn.__name__}(): {exc}") from exc
            return ConstantVariable(result)
        if fn in (torch.from_numpy, torch.as_tensor, torch.tensor):
            tensor = tensor_from_array(tx, fn, args, kwargs)
            if tensor is not None:
                return tensor
            tensor = tensor_of_tensors(tx, args, kwargs) if fn is torch.tensor else None
            if tensor is not None:
                return tensor
            fn, kwargs = _symbool_tensor(fn, args, kwargs)
        if fn is torch._is_all_true:  # an argument check that raises: run after the graph
            deferred = deferred_all_true(tx, args, kwargs)
            if deferred is not None:
                return deferred
        if isinstance(fn, types.FunctionType) and _passes_python_callable(args, kwargs):
            # a Python-level torch function handed a module or a function of the user's (a
            # loss's distance_function): inlined, so the callable is traced where it is
            # called instead of landing in the graph as an object FX cannot print
            return tx.inline_call(fn, None, list(args), kwargs)
        node_args = tuple(as_node_arg(tx, a) for a in args)
        node_kwargs = {k: as_node_arg(tx, v) for k, v in kwargs.items()}
        node, value = tx.output.create_node("call_function", fn, node_args, node_kwargs)
        if _reads_global_state(fn, args, kwargs, value):
            guard_state_query(tx, fn, args, kwargs, value)
        return wrap_graph_value(tx, node, value)

    def var_getattr(self, tx, name):
        # `torch.ops.aten.relu.default`: an overload of an op packet (fixed once the packet
        # is: the packet is guarded by identity) goes into the graph as the call target.
        if isinstance(self.fn, torch._ops.OpOverloadPacket) and name in _overload_names(self.fn):
            return TorchFunctionVariable(getattr(self.fn, name))
        return super().var_getattr(tx, name)


def _symbool_tensor(fn: Any, args, kwargs) -> tuple[Any, dict]:
    """`torch.tensor(n)` of a symbolic bool, int or float (an item()): eager sees a Python
    scalar (a 0-d tensor of bool, int64 or the default float dtype); torch.tensor cannot
    read a symbolic one on example values, torch.scalar_tensor can: the same tensor, the
    dtype named (the Python type's unless the call names one)."""
    if len(args) != 1 or not set(kwargs) <= {"dtype", "device", "requires_grad"}:
        return fn, kwargs
    if isinstance(args[0], SymNodeVariable):
        kind = args[0].python_type()
        dtype = torch.get_default_dtype() if kind is float else _SCALAR_DTYPES[kind]
        return torch.scalar_tensor, {"dtype": ConstantVariable(dtype), **kwargs}
    return fn, kwargs


_SCALAR_DTYPES = {bool: torch.bool, int: torch.int64}


def _overload_names(packet: torch._ops.OpOverloadPacket) -> list[str]:
    return packet.overloads()


# ---- calling a legacy tensor type --------------------------------------------------------
@constructor("legacy_tensor_type")
def _construct_legacy_tensor(tx, kind: TypeVariable, args, kwargs) -> VariableTracker | None:
    """`torch.LongTensor([1, 2])`: a CPU dense legacy type given its data as constants or
    NumPy scalars of the trace (`[a[0], a[2]]`) is `torch.tensor(data, dtype=<the type's
    dtype>)` (the same values, rounding and errors). Other forms (sizes: uninitialized
    memory, a storage, another tensor) are not modeled."""
    cls = kind.cls
    if type(cls).__name__ != "tensortype" or cls.is_cuda or cls.is_sparse:
        return None
    if kwargs or len(args) != 1 or not isinstance(args[0], BaseListVariable):
        return None
    if not all(_legacy_item(item) for item in args[0].items):
        return None
    dtype = {"dtype": ConstantVariable(cls.dtype)}
    return TorchFunctionVariable(torch.tensor).call_function(tx, [args[0]], dtype)


def _legacy_item(item: VariableTracker) -> bool:
    if isinstance(item, BaseListVariable):
        return all(_legacy_item(i) for i in item.items)
    return item.is_python_constant() or (isinstance(item, NumpyArrayVariable) and item.scalar)


# ---- wrapping real values (variables/builder.py) ----------------------------------------
def _is_folded_predicate(value: Any) -> bool:
    return in_rule_table(value, CONSTANT_FOLDED)


def _goes_into_graphs(tx, value: Any, source) -> bool:
    # a Python-level torch function with a rule of its own (`torch.set_default_dtype`, a
    # state switch) goes into the graph as itself, as Dynamo's graphs have it
    ruled = isinstance(value, types.FunctionType) and in_rule_table(value, CALL_RULES)
    return is_torch_callable(value) or _is_folded_predicate(value) or ruled


@wrap_rule("torch_function", when=_goes_into_graphs)
def _wrap_torch_function(tx, value: Any, source) -> VariableTracker:
    guard_identity(tx, value, source)
    return TorchFunctionVariable(value)
