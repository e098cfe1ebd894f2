"""Python modules, classes and other user objects reached from the frame."""

from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING, Any, NoReturn

import torch

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import (
    AttrSource,
    GenericAttrSource,
    Guard,
    GuardKind,
    ItemSource,
    TypeSource,
)
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.functions import UserMethodVariable
from ember_bytecode_tracer.variables.logging_calls import LoggingCallVariable, is_logging_call

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source


class PythonModuleVariable(VariableTracker):
    """A module object such as `torch`, `math` or a user's helper module."""

    def __init__(self, module: Any, *, source: Source | None) -> None:
        super().__init__(source=source)
        self.module = module

    def python_type(self) -> type:
        return type(self.module)

    def as_python_constant(self) -> Any:
        return self.module

    def var_getattr(self, tx, name):
        from ember_bytecode_tracer.variables.builder import wrap_value

        if not hasattr(self.module, name):
            raise Unsupported(f"module {self.module.__name__} has no attribute {name!r}")
        value = getattr(self.module, name)
        if self.source is None:
            return wrap_value(tx, value, None)
        return wrap_value(tx, value, AttrSource(self.source, name))

    def __repr__(self) -> str:
        return f"PythonModuleVariable({self.module.__name__})"


class TypeVariable(VariableTracker):
    """A class. Calling it constructs an object only for a few known value types."""

    def __init__(self, cls: type, *, source: Source | None = None) -> None:
        super().__init__(source=source)
        self.cls = cls

    def python_type(self) -> type:
        return type(self.cls)

    def as_python_constant(self) -> Any:
        return self.cls

    def var_getattr(self, tx, name):
        from ember_bytecode_tracer.variables.builder import wrap_value

        attribute = inspect.getattr_static(self.cls, name, None)
        if isinstance(attribute, staticmethod):
            attribute = attribute.__func__
        source = AttrSource(self.source, name) if self.source is not None else None
        return wrap_value(tx, getattr(self.cls, name), source)

    def call_function(self, tx, args, kwargs):
        from ember_bytecode_tracer.variables.builtins import RULES, BuiltinVariable

        if self.cls in RULES:
            return BuiltinVariable(self.cls).call_function(tx, args, kwargs)
        if self.cls in (int, float, bool, str, complex):
            return BuiltinVariable(self.cls).call_function(tx, args, kwargs)
        from ember_bytecode_tracer.variables.constructed import (
            ConstructedObjectVariable,
            is_constructible,
        )
        from ember_bytecode_tracer.variables.contexts import make_context

        if self.cls in (staticmethod, classmethod) and len(args) == 1 and not kwargs:
            from ember_bytecode_tracer.variables.class_definition import MethodWrapperVariable

            return MethodWrapperVariable(self.cls, args[0])
        context = make_context(tx, self.cls, args, kwargs)
        if context is not None:
            return context
        from ember_bytecode_tracer.variables.keyed_output import (
            KeyedOutputVariable,
            is_keyed_output_class,
        )

        if is_keyed_output_class(self.cls):
            return KeyedOutputVariable(self.cls, args, kwargs)
        if is_constructible(self.cls):
            return ConstructedObjectVariable(self.cls, args, kwargs)
        if _is_stateless_torch_module(self.cls):
            return _build_stateless_module(self.cls, args, kwargs)
        if self.cls in (torch.finfo, torch.iinfo, torch.device, torch.Size):
            from ember_bytecode_tracer.variables.builtins import constant_fold

            return constant_fold(self.cls, args, kwargs)
        from ember_bytecode_tracer.variables.exceptions import build_exception, is_builtin_exception
        from ember_bytecode_tracer.variables.traced_objects import (
            TracedObjectVariable,
            traceable_class_refusal,
        )

        if is_builtin_exception(self.cls):
            return build_exception(self.cls, args, kwargs)

        refusal = traceable_class_refusal(self.cls)
        if refusal is None:
            return TracedObjectVariable.construct(tx, self.cls, self.source, args, kwargs)
        raise Unsupported(
            f"constructing a {self.cls.__qualname__} inside a traced region ({refusal})"
        )

    def __repr__(self) -> str:
        return f"TypeVariable({self.cls.__qualname__})"


def _is_stateless_torch_module(cls: type) -> bool:
    """torch.nn's own parameter-free modules (losses, activations): safe to build at trace
    time, as their constructors only store the constant arguments."""
    return (
        isinstance(cls, type)
        and issubclass(cls, torch.nn.Module)
        and cls.__module__.startswith("torch.nn.modules.")
        and cls.__module__.rsplit(".", 1)[-1] in ("loss", "activation", "dropout", "flatten")
    )


def _build_stateless_module(cls: type, args, kwargs) -> VariableTracker:
    from ember_bytecode_tracer.variables.nn_module import NNModuleVariable

    try:
        a = [x.as_python_constant() for x in args]
        k = {n: x.as_python_constant() for n, x in kwargs.items()}
    except Unsupported:
        raise Unsupported(
            f"constructing {cls.__name__} from values unknown at trace time"
        ) from None
    module = cls(*a, **k)
    if any(True for _ in module.parameters()) or any(True for _ in module.buffers()):
        raise Unsupported(f"constructing {cls.__name__}, which has parameters, inside a trace")
    return NNModuleVariable(module, source=None)


def _python_getattribute(cls: type) -> bool:
    return inspect.isfunction(inspect.getattr_static(cls, "__getattribute__"))


def _plain_instance_dict(cls: type) -> bool:
    """Whether `object.__getattribute__(obj, '__dict__')` is the dict object's own lookup
    reads: the class's `__dict__` is the slot descriptor every class with a dict gets."""
    for klass in cls.__mro__:
        if "__dict__" in vars(klass):
            return type(vars(klass)["__dict__"]) is types.GetSetDescriptorType
    return False


class UserDefinedObjectVariable(VariableTracker):
    """Any other object: attribute reads are guarded on the way; methods inline."""

    def __init__(self, value: Any, *, source: Source | None) -> None:
        super().__init__(source=source)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def var_getattr(self, tx, name):
        hook = inspect.getattr_static(type(self.value), "__getattribute__")
        if inspect.isfunction(hook) and self.source is not None:
            # A Python __getattribute__ (transformers' configs map attribute aliases): run
            # it; its super().__getattribute__ comes back to generic_getattr.
            fn_source = AttrSource(TypeSource(self.source), "__getattribute__")
            return tx.inline_call(hook, fn_source, [self, ConstantVariable(name)], {})
        return self.generic_getattr(tx, name)

    def generic_getattr(self, tx, name):
        """object.__getattribute__: instance dict, then the class (descriptors first)."""
        from ember_bytecode_tracer.variables.builder import wrap_value
        from ember_bytecode_tracer.variables.dicts import ConstDictVariable

        if self.source is None:
            raise Unsupported(f"attribute {name} of an object without a source")
        value = self.value
        try:  # the dict object's lookup reads, never what a Python hook calls `__dict__`
            instance_dict = object.__getattribute__(value, "__dict__")
        except AttributeError:
            instance_dict = {}
        if name in instance_dict:
            source = self._instance_entry_source(name)
            seen = tx.output.containers_by_id.get(id(instance_dict))
            if isinstance(source, ItemSource) and seen is not None and seen[0] is instance_dict:
                # the dict is already a tracker (read as `obj.__dict__` by the hook, or
                # reached through another object): its entry, guarded once
                tracker = wrap_value(tx, instance_dict, source.base)
                if isinstance(tracker, ConstDictVariable) and name in tracker.items:
                    return tracker.items[name]
            return wrap_value(tx, instance_dict[name], source)
        try:
            attribute = inspect.getattr_static(value, name)
        except AttributeError:
            self._raise_missing(tx, name)
        if isinstance(attribute, property):
            return tx.inline_call(attribute.fget, None, [self], {})
        if is_logging_call(value, name):
            return LoggingCallVariable(self, name)
        if inspect.isfunction(attribute):
            fn_source = AttrSource(TypeSource(self.source), name)
            return UserMethodVariable(attribute, self, fn_source=fn_source)
        if hasattr(type(value), "__getattr__"):
            raise Unsupported(f"{type(value).__name__} customizes attribute access")
        if _python_getattribute(type(value)):
            # Reached through the hook's super(): the guard reads what was read here,
            # object's own lookup, without running the hook on every guard call.
            found = object.__getattribute__(value, name)
            return wrap_value(tx, found, GenericAttrSource(self.source, name))
        elif type(type(value).__getattribute__) is not type(object.__getattribute__):
            raise Unsupported(f"{type(value).__name__} customizes attribute access")
        else:
            found = getattr(value, name)
        return wrap_value(tx, found, AttrSource(self.source, name))

    def traces_getattribute(self) -> bool:
        """Whether attribute reads run the class's Python __getattribute__ (inlined)."""
        return self.source is not None and _python_getattribute(type(self.value))

    def _raise_missing(self, tx, name: str) -> NoReturn:
        """object.__getattribute__ finds nothing. Under a Python __getattribute__ hook
        (transformers' configs: `getattr(config, "sliding_window", None)`) that is an
        AttributeError, guarded by what object.__getattribute__ looked at: `name` is not in
        the instance dict, not on the class or its bases, and the class has no __getattr__
        to fall back to. The guard `not hasattr(obj, name)` would run the hook on every
        guard call (~1.5 us each)."""

        cls = type(self.value)
        if (
            not self.traces_getattribute()
            or hasattr(cls, name)
            or hasattr(cls, "__getattr__")
            or not _plain_instance_dict(cls)
        ):
            raise Unsupported(f"{cls.__name__} has no attribute {name!r}")
        where = tx.location()
        kind = TypeSource(self.source)
        for source in (
            ItemSource(GenericAttrSource(self.source, "__dict__"), name),
            AttrSource(kind, name),
            AttrSource(kind, "__getattr__"),
        ):
            tx.output.add_guard(Guard(source, GuardKind.ABSENT, user_location=where))
        raise TracedException(AttributeError, f"{cls.__name__!r} object has no attribute {name!r}")

    def _instance_entry_source(self, name: str) -> Source:
        """Where the guards read an instance-dict entry that object.__getattribute__ found.
        Under a Python __getattribute__ (transformers' configs), `obj.name` would run that
        hook on every guard call and repeat the guard of a read of the instance dict: the
        entry is read from the dict instead (`object.__getattribute__(obj, '__dict__')`, as
        generic_getattr read it), which is what the program read, as long as no data
        descriptor of the type shadows it and the type's `__dict__` is the plain one."""

        cls = type(self.value)
        if not _python_getattribute(cls):
            return AttrSource(self.source, name)  # a C getattr: reading `obj.name` is cheap
        shadow = inspect.getattr_static(cls, name, None)
        if hasattr(type(shadow), "__set__") or hasattr(type(shadow), "__delete__"):
            return AttrSource(self.source, name)
        if not _plain_instance_dict(cls):
            return AttrSource(self.source, name)
        return ItemSource(GenericAttrSource(self.source, "__dict__"), name)

    def generic_setattr(self, tx, name: str, value: VariableTracker) -> None:
        """object.__setattr__ reached from a Python __setattr__: a write replayed later."""
        from ember_bytecode_tracer.variables.attributes import record_attribute_write

        record_attribute_write(tx, self, name, value)

    def dict_contents(self, tx) -> VariableTracker:
        """The entries of a dict subclass instance, as dict's own methods see them: guarded
        by its keys and each value, read through dict's lookup (refused when the subclass
        overrides what the guards would read through)."""
        from ember_bytecode_tracer.variables.builder import wrap_value
        from ember_bytecode_tracer.variables.dicts import ConstDictVariable

        value, cls = self.value, type(self.value)
        overridden = [
            n for n in ("__getitem__", "__iter__") if getattr(cls, n) is not getattr(dict, n)
        ]
        if not isinstance(value, dict) or overridden or self.source is None:
            raise Unsupported(f"dict methods of a {cls.__name__} ({overridden or 'no source'})")
        if not all(is_constant_value(k) for k in value):
            raise Unsupported("dict with non-constant keys")
        tx.output.add_guard(
            Guard(
                self.source, GuardKind.DICT_KEYS, (cls, tuple(value)), user_location=tx.location()
            )
        )
        items = {k: wrap_value(tx, v, ItemSource(self.source, k)) for k, v in value.items()}
        return ConstDictVariable(items)

    def call_method(self, tx, name, args, kwargs):
        # Dunder methods (obj[k], len(obj)...) dispatch on the type: inline Python ones.
        attribute = inspect.getattr_static(type(self.value), name, None)
        if inspect.isfunction(attribute) and self.source is not None:
            fn_source = AttrSource(TypeSource(self.source), name)
            return tx.inline_call(attribute, fn_source, [self, *args], kwargs)
        if name.startswith("__") and name.endswith("__"):
            raise Unsupported(f"{type(self.value).__name__}.{name} is not a Python method")
        return super().call_method(tx, name, args, kwargs)

    def call_function(self, tx, args, kwargs):
        if isinstance(self.value, types.BuiltinFunctionType | types.BuiltinMethodType):
            name = getattr(self.value, "__qualname__", None) or repr(self.value)
            raise Unsupported(
                f"call to {name}, a function implemented in C (its effects are not in the graph)"
            )
        return self.call_method(tx, "__call__", args, kwargs)

    def __repr__(self) -> str:
        return f"UserDefinedObjectVariable({type(self.value).__name__})"


class NullVariable(VariableTracker):
    """The NULL that 3.11+ pushes under a callable."""

    def __repr__(self) -> str:
        return "NULL"


__all__ = ["ConstantVariable", "NullVariable", "PythonModuleVariable", "TypeVariable"]
