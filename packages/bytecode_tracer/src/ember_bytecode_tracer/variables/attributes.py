"""Attribute reads and writes, seeing writes made earlier in the same trace."""

from __future__ import annotations

import inspect
import threading
from typing import TYPE_CHECKING

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, TypeSource
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.constructed import ConstructedObjectVariable
from ember_bytecode_tracer.variables.functions import NestedUserFunctionVariable
from ember_bytecode_tracer.variables.lists import ListVariable, TupleVariable
from ember_bytecode_tracer.variables.nn_module import NNModuleVariable
from ember_bytecode_tracer.variables.object_identity import canonical_source, record_write
from ember_bytecode_tracer.variables.objects import (
    PythonModuleVariable,
    TypeVariable,
    UserDefinedObjectVariable,
)
from ember_bytecode_tracer.variables.tensor import TensorVariable
from ember_bytecode_tracer.variables.tensor_state import store_tensor_attribute
from ember_bytecode_tracer.variables.traced_objects import TracedObjectVariable

if TYPE_CHECKING:
    from ember_bytecode_tracer.variables.base import Translator, VariableTracker


def load_attribute(tx: Translator, obj: VariableTracker, name: str) -> VariableTracker:
    if (
        isinstance(obj, PythonModuleVariable)
        and obj.module.__dict__ is tx.output.f_globals
        and name in tx.output.side_effects.global_writes
    ):  # the frame's own module, reached as an object: its pending global writes
        return tx.output.side_effects.global_writes[name]
    if obj.source is not None:
        written = tx.output.side_effects.attributes.get((canonical_source(tx, obj), name))
        if written is not None:
            return written
    if name == "__class__" and isinstance(obj, _EXACT_CLASS):
        return TypeVariable(obj.python_type())
    return obj.var_getattr(tx, name)


# Trackers whose python_type() is the value's exact class (built in the trace, a constant,
# or guarded by type where read from the frame): `obj.__class__` is that class.
_EXACT_CLASS = (ListVariable, TupleVariable, ConstructedObjectVariable, ConstantVariable)


def store_attribute(
    tx: Translator, obj: VariableTracker, name: str, value: VariableTracker
) -> None:

    built_here = isinstance(obj, ConstructedObjectVariable) and obj.source is None
    built_here = built_here or getattr(obj, "owns_attributes", False)  # a list subclass's
    if isinstance(obj, TracedObjectVariable | NestedUserFunctionVariable) or built_here:
        obj.store_attribute(tx, name, value)  # built in the trace: nothing else sees it yet
        return
    if isinstance(obj, TensorVariable):
        store_tensor_attribute(tx, obj, name, value)  # tensor_state.py
        return
    if isinstance(obj, ConstructedObjectVariable) and obj.source is not None:
        _store_on_passed_in(tx, obj, name, value)
        return
    if not isinstance(obj, UserDefinedObjectVariable | NNModuleVariable) or obj.source is None:
        raise Unsupported(f"setting attribute {name!r} on {obj}")
    if isinstance(obj, UserDefinedObjectVariable):
        hook = _setattr_hook(obj)
        if hook is not None:  # a Python __setattr__ (aliases, validation): run it
            fn_source = AttrSource(TypeSource(obj.source), "__setattr__")
            tx.inline_call(hook, fn_source, [obj, ConstantVariable(name), value], {})
            return
        if obj.descriptor_set(tx, name, value):  # a data descriptor of the type: inlined
            return
    record_attribute_write(tx, obj, name, value)


def _store_on_passed_in(tx, obj: ConstructedObjectVariable, name: str, value) -> None:
    """`nt.name = value` on a namedtuple (subclass) instance read from the frame: an entry
    of its instance dict, replayed after the graph (the type is guarded, so its __setattr__
    is object's whenever the trace's is)."""
    own_setattr = inspect.getattr_static(obj.cls, "__setattr__") is object.__setattr__
    if not (own_setattr and obj.instance_dict_write(name)):
        raise Unsupported(f"setting attribute {name!r} on a {obj.cls.__qualname__}")
    record_attribute_write(tx, obj, name, value)


_THREAD_LOCAL_SETATTR = inspect.getattr_static(threading.local, "__setattr__")


def _setattr_hook(obj: UserDefinedObjectVariable):
    """The Python __setattr__ of the object's class; None for object's own."""

    hook = inspect.getattr_static(type(obj.value), "__setattr__")
    if hook is object.__setattr__ or hook is _THREAD_LOCAL_SETATTR:
        # threading.local's writes the calling thread's own dict: replayed in that thread
        return None
    if not inspect.isfunction(hook):
        raise Unsupported(f"setting an attribute of a {type(obj.value).__name__} (C __setattr__)")
    return hook


def record_attribute_write(
    tx: Translator, obj: VariableTracker, name: str, value: VariableTracker
) -> None:
    """object.__setattr__ on a real object: seen by later reads, replayed after the graph."""
    if isinstance(obj, NNModuleVariable) and name in ("training",):
        raise Unsupported("changing a module's training flag inside a traced region")
    if isinstance(obj, NNModuleVariable):
        module = obj.module
        if name in module._parameters or name in module._buffers or name in module._modules:
            raise Unsupported(f"reassigning parameter, buffer or submodule {name!r}")
    record_write(tx, obj, name, value)
