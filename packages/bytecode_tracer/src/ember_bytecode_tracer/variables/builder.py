"""Wrapping real Python values reached from the frame into trackers, with their guards.

Every value the trace reads through a source passes through `wrap_value`, which records
the guard that makes the trace valid for it: a tensor's metadata, a constant's value, an
object's identity or type, a container's length or keys.
"""

from __future__ import annotations

import abc
import builtins as py_builtins
import enum
import functools
import inspect
import types
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import (
    AttrSource,
    DictKeysSource,
    Guard,
    GuardKind,
    ItemSource,
    dict_item_source,
)
from ember_bytecode_tracer.variables import (  # noqa: F401  (register their rules)
    collections_types,
    iterator_tools,
    object_copy,
)
from ember_bytecode_tracer.variables.autograd_calls import autograd_call_tracker
from ember_bytecode_tracer.variables.autograd_function import (
    AutogradFunctionApplyVariable,
    autograd_function_of,
)
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builtins import RULES as TRACE_TIME_RULES
from ember_bytecode_tracer.variables.builtins import BuiltinVariable
from ember_bytecode_tracer.variables.collectives import collective_tracker
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.contexts import RealContextExit
from ember_bytecode_tracer.variables.dicts import ConstDictVariable
from ember_bytecode_tracer.variables.environ import EnvironVariable, is_environ
from ember_bytecode_tracer.variables.functions import (
    PartialVariable,
    UserFunctionVariable,
    UserMethodVariable,
)
from ember_bytecode_tracer.variables.lists import ListVariable, SizeVariable, TupleVariable
from ember_bytecode_tracer.variables.nn_module import NNModuleVariable
from ember_bytecode_tracer.variables.numpy_rules import numpy_tracker
from ember_bytecode_tracer.variables.object_identity import note_object
from ember_bytecode_tracer.variables.objects import (
    PythonModuleVariable,
    TypeVariable,
    UserDefinedObjectVariable,
)
from ember_bytecode_tracer.variables.optimizer import optimizer_tracker
from ember_bytecode_tracer.variables.rng_state import RngFunctionVariable, rng_function_of
from ember_bytecode_tracer.variables.signatures import SignatureVariable  # noqa: F401  (registers its rule)
from ember_bytecode_tracer.variables.sym_values import SymNodeVariable
from ember_bytecode_tracer.variables.tensor import TensorMethodDescriptorVariable, TensorVariable
from ember_bytecode_tracer.variables.torch_functions import TorchFunctionVariable, is_torch_callable

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.translator.core import InstructionTranslator


def guard(tx: InstructionTranslator, source: Source, kind: GuardKind, expected: Any = None) -> None:
    tx.output.add_guard(Guard(source, kind, expected, user_location=tx.location()))


def wrap_value(tx: InstructionTranslator, value: Any, source: Source | None) -> VariableTracker:
    """The tracker for `value`, found at `source` (None: made during the trace, no guard)."""
    cached = tx.output.wrapped.get(source) if source is not None else None
    if cached is not None:
        return cached
    tracker = _wrap(tx, value, source)
    if source is not None:
        tx.output.wrapped[source] = tracker
    return tracker


def _wrap(tx: InstructionTranslator, value: Any, source: Source | None) -> VariableTracker:
    if isinstance(value, torch.Tensor):
        if source is None:
            raise Unsupported("a tensor created outside the trace without a source")
        if type(value) not in (
            torch.Tensor,
            nn.Parameter,
            nn.Buffer if hasattr(nn, "Buffer") else torch.Tensor,
        ):
            raise Unsupported(f"tensor subclass {type(value).__name__}")
        node, fake = tx.output.tensor_input(source, value)
        # Symbolic dims are checked by the shape guards, not exactly (dynamic.py).
        guard(tx, source, GuardKind.TENSOR_MATCH, tx.output.dynamic.tensor_spec(value, fake))
        tracker = TensorVariable(node, fake, source=source)
        tracker.tensor_type = type(value)
        return tracker
    if isinstance(value, torch.Size):
        if source is not None:
            guard(tx, source, GuardKind.EQUALS_MATCH, value)
        return SizeVariable(tuple(value), source=source)
    if (
        source is not None
        and type(value) is int
        and tx.output.dynamic.int_is_dynamic(source, value)
    ):
        return wrap_symbolic_int(tx, value, source)
    if is_constant_value(value):
        if source is not None:
            guard(tx, source, GuardKind.EQUALS_MATCH, value)
        return ConstantVariable(value, source=source)
    if isinstance(value, types.CodeType):
        if source is not None:
            guard(tx, source, GuardKind.ID_MATCH, value)
        return ConstantVariable(value, source=source)
    if isinstance(value, enum.Enum):
        # Enum members are singletons: identity is the right guard, the value is constant.
        if source is not None:
            guard(tx, source, GuardKind.ID_MATCH, value)
        return ConstantVariable(value, source=source)
    if isinstance(value, nn.Module):
        # Modules are guarded by class, not identity: every attribute a trace reads from
        # them is guarded on its own (parameters by tensor metadata, flags by value,
        # submodules by class), so the twelve layers of a BERT encoder share one trace.
        if source is not None:
            guard(tx, source, GuardKind.TYPE_MATCH, type(value))
            note_object(tx, value, source)
        return NNModuleVariable(value, source=source)
    if isinstance(value, tuple) and hasattr(type(value), "_fields") and source is not None:
        from ember_bytecode_tracer.variables.constructed import ConstructedObjectVariable

        guard(tx, source, GuardKind.TYPE_MATCH, type(value))
        items = [wrap_value(tx, item, ItemSource(source, i)) for i, item in enumerate(value)]
        tracker = ConstructedObjectVariable(type(value), items, {})
        tracker.source = source
        return tracker
    if type(value) in (list, tuple, dict):
        if type(value) is tuple or source is None:
            return _wrap_container(tx, value, source)
        seen = tx.output.containers_by_id.get(id(value))
        if seen is not None and seen[0] is value:
            # The same list or dict reached another way: the same tracker, guarded to stay so.
            guard(tx, source, GuardKind.TENSOR_ALIASING, seen[1].source)
            return seen[1]
        tracker = _wrap_container(tx, value, source)
        tx.output.containers_by_id[id(value)] = (value, tracker)
        return tracker
    return _wrap_other(tx, value, source)


def wrap_symbolic_int(tx: InstructionTranslator, value: int, source: Source) -> VariableTracker:
    """An int argument the dynamic policy made symbolic: a SymInt graph input, guarded by
    type here and by the shape guards (ranges, branches) of the trace."""
    symint = tx.output.dynamic.symint(source, value)
    if not isinstance(symint, torch.SymInt):  # specialized (0 or 1): the env guards it
        guard(tx, source, GuardKind.EQUALS_MATCH, value)
        return ConstantVariable(value, source=source)
    guard(tx, source, GuardKind.TYPE_MATCH, int)
    node = tx.output.sym_input(source, value, symint)
    return SymNodeVariable(symint, node=node, source=source)


def _wrap_container(tx: InstructionTranslator, value: Any, source: Source | None):
    if type(value) in (list, tuple):
        if source is not None:
            guard(tx, source, GuardKind.LEN_MATCH, (type(value), len(value)))
        items = [
            wrap_value(tx, item, ItemSource(source, i) if source is not None else None)
            for i, item in enumerate(value)
        ]
        cls = ListVariable if type(value) is list else TupleVariable
        return cls(items, source=source)
    if type(value) is dict:
        if not all(is_constant_value(k) or _is_class_key(k) for k in value):
            raise Unsupported("dict with non-constant keys")
        if source is not None and all(is_constant_value(k) for k in value):
            guard(tx, source, GuardKind.DICT_KEYS, (type(value), tuple(value.keys())))
        elif source is not None:  # classes as keys: each key's identity, by position
            guard(tx, source, GuardKind.LEN_MATCH, (type(value), len(value)))
            for i, k in enumerate(value):
                kind = GuardKind.EQUALS_MATCH if is_constant_value(k) else GuardKind.ID_MATCH
                guard(tx, ItemSource(DictKeysSource(source), i), kind, k)
        # keys without a literal (dtypes, devices) reach their values by position: the
        # DICT_KEYS guard above pins every key's position
        items = {
            k: wrap_value(tx, v, dict_item_source(source, k, i) if source is not None else None)
            for i, (k, v) in enumerate(value.items())
        }
        return ConstDictVariable(items, source=source)
    return _wrap_other(tx, value, source)


def _is_class_key(key: Any) -> bool:
    """A class or a typing special form as a dict key (a table of handlers by type): the
    dict is guarded by length and each key by identity at its position."""
    return type(key) in (type, abc.ABCMeta) or type(key).__module__ == "typing"


def _wrap_other(tx: InstructionTranslator, value: Any, source: Source | None):
    array_or_function = numpy_tracker(tx, value, source)  # ndarrays, NumPy calls with a rule
    if array_or_function is not None:
        return array_or_function
    function_class = autograd_function_of(value)
    if function_class is not None:  # MyFunction.apply of a torch.autograd.Function
        if source is not None:
            owner = AttrSource(source, "__self__")
            guard(tx, owner, GuardKind.ID_MATCH, function_class)
            for name in ("forward", "backward"):
                guard(
                    tx, AttrSource(owner, name), GuardKind.ID_MATCH, getattr(function_class, name)
                )
        return AutogradFunctionApplyVariable(function_class)
    if isinstance(value, RealContextExit) and source is not None:
        # A with-block's __exit__ rebuilt at a graph break: the resume function's trace
        # exits the same context (the grad mode it restores is guarded as a constant).
        guard(tx, source, GuardKind.TYPE_MATCH, RealContextExit)
        wrap_value(tx, value.previous, AttrSource(source, "previous"))
        return value.tracker()
    if isinstance(value, types.ModuleType):
        if source is not None:
            guard(tx, source, GuardKind.ID_MATCH, value)
        return PythonModuleVariable(value, source=source)
    if _is_tensor_method_descriptor(value):
        # torch.Tensor.add / Tensor.__getitem__ as a value (e.g. an op handed around): a call
        # with the tensor first is the method call.
        if source is not None and not _is_torch_namespace_source(tx, source):
            guard(tx, source, GuardKind.ID_MATCH, value)
        return TensorMethodDescriptorVariable(value.__name__)
    if rng_function_of(value) is not None:
        if source is not None and not _is_torch_namespace_source(tx, source):
            guard(tx, source, GuardKind.ID_MATCH, value)
        return RngFunctionVariable(rng_function_of(value))
    if is_torch_callable(value) or _is_folded_predicate(value):
        if source is not None and not _is_torch_namespace_source(tx, source):
            guard(tx, source, GuardKind.ID_MATCH, value)
        return TorchFunctionVariable(value)
    special = (
        autograd_call_tracker(value)
        or collective_tracker(value)
        or optimizer_tracker(value, source)
    )
    if special is not None:  # engine calls (a break), optimizers, clip_grad_norm_
        if source is not None and not _is_torch_namespace_source(tx, source):
            kind = GuardKind.TYPE_MATCH if source is special.source else GuardKind.ID_MATCH
            guard(tx, source, kind, type(value) if kind is GuardKind.TYPE_MATCH else value)
        return special
    if inspect.isfunction(value) and value in TRACE_TIME_RULES:
        # Library functions answered at trace time by a rule (inspect.signature).
        if source is not None:
            guard(tx, source, GuardKind.ID_MATCH, value)
        return BuiltinVariable(value)
    if inspect.isfunction(value):
        if source is not None:
            guard(tx, source, GuardKind.ID_MATCH, value)
        return UserFunctionVariable(value, source=source)
    if inspect.ismethod(value):
        owner_source = AttrSource(source, "__self__") if source is not None else None
        owner = wrap_value(tx, value.__self__, owner_source)
        fn_source = AttrSource(source, "__func__") if source is not None else None
        if source is not None:
            guard(tx, fn_source, GuardKind.ID_MATCH, value.__func__)
        return UserMethodVariable(value.__func__, owner, fn_source=fn_source)
    if isinstance(value, functools.partial):
        if source is None:
            raise Unsupported("functools.partial without a source")
        func = wrap_value(tx, value.func, AttrSource(source, "func"))
        args = [
            wrap_value(tx, a, ItemSource(AttrSource(source, "args"), i))
            for i, a in enumerate(value.args)
        ]
        guard(tx, AttrSource(source, "args"), GuardKind.LEN_MATCH, (tuple, len(value.args)))
        guard(
            tx, AttrSource(source, "keywords"), GuardKind.DICT_KEYS, (dict, tuple(value.keywords))
        )
        kwargs = {
            k: wrap_value(tx, v, ItemSource(AttrSource(source, "keywords"), k))
            for k, v in value.keywords.items()
        }
        return PartialVariable(func, args, kwargs)
    if isinstance(value, types.BuiltinFunctionType) and _has_trace_time_rule(value):
        # C functions with a rule in the builtins table (functools.reduce, chain.from_iterable).
        if source is not None:
            guard(tx, source, GuardKind.ID_MATCH, value)
        return BuiltinVariable(value)
    if isinstance(value, types.BuiltinFunctionType) and getattr(value, "__module__", None) in (
        "builtins",
        "math",
        "_operator",
        "operator",
    ):
        if source is not None:
            guard(tx, source, GuardKind.ID_MATCH, value)
        return BuiltinVariable(value)
    if isinstance(value, type):
        if source is not None:
            guard(tx, source, GuardKind.ID_MATCH, value)
        return TypeVariable(value, source=source)
    if source is None:
        raise Unsupported(f"a {type(value).__name__} without a source")
    guard(tx, source, GuardKind.TYPE_MATCH, type(value))
    if is_environ(value):
        return EnvironVariable(value, source=source)
    note_object(tx, value, source)
    return UserDefinedObjectVariable(value, source=source)


def _is_tensor_method_descriptor(value: Any) -> bool:
    """A C-implemented method of torch.Tensor, reached unbound (method/wrapper descriptors)."""
    if not isinstance(value, types.MethodDescriptorType | types.WrapperDescriptorType):
        return False
    owner = getattr(value, "__objclass__", None)
    return owner in (torch._C.TensorBase, torch.Tensor) and (
        getattr(torch.Tensor, value.__name__, None) is value
    )


def _has_trace_time_rule(value: Any) -> bool:
    try:
        return value in TRACE_TIME_RULES
    except TypeError:  # unhashable
        return False


def _is_folded_predicate(value: Any) -> bool:
    from ember_bytecode_tracer.variables.torch_functions import CONSTANT_FOLDED

    try:
        return value in CONSTANT_FOLDED
    except TypeError:  # unhashable
        return False


def _is_torch_namespace_source(tx: InstructionTranslator, source: Source) -> bool:
    # torch.relu reached as an attribute of a torch module (`torch`, `torch.nn.functional`):
    # the module itself is ID-guarded and its functions are taken to be constant, as
    # PyTorch's namespace does not change at run time. Decided by what the base object is,
    # never by a name: `my_torch_op = torch.sin` is a global like any other, ID-guarded.
    if not isinstance(source, AttrSource):
        return False
    base = tx.output.wrapped.get(source.base)
    if not isinstance(base, PythonModuleVariable):
        return False
    name = base.module.__name__
    return name == "torch" or name.startswith("torch.")


def wrap_builtin(tx: InstructionTranslator, value: Any, name: str) -> VariableTracker:
    """A name found in builtins (not shadowed by the globals at trace time)."""
    if isinstance(value, type):
        return TypeVariable(value)
    if value is getattr(py_builtins, name, None):
        return BuiltinVariable(value)
    raise Unsupported(f"builtins.{name} has been replaced")
