"""`super()` inside traced code: attribute lookup along the MRO after the class."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, ItemSource, TypeSource
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard_identity
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.functions import UserFunctionVariable, UserMethodVariable
from ember_bytecode_tracer.variables.lazy import resolve_local
from ember_bytecode_tracer.variables.lists import BoundMethodOfTracker
from ember_bytecode_tracer.variables.objects import TypeVariable

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator


class SuperVariable(VariableTracker):
    def __init__(self, cls: type, obj: VariableTracker) -> None:
        super().__init__()
        self.cls = cls
        self.obj = obj

    def _owner_type(self) -> type:
        if isinstance(self.obj, TypeVariable):  # super() in a classmethod: the class itself
            return self.obj.cls
        value = getattr(self.obj, "module", None) or getattr(self.obj, "value", None)
        if value is None:
            return self.obj.python_type()  # raises Unsupported when not known
        return type(value)

    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        mro = self._owner_type().__mro__
        if self.cls not in mro:
            raise Unsupported("super(): the object is not an instance of the class")
        for klass in mro[mro.index(self.cls) + 1 :]:
            if name in klass.__dict__:
                attribute = klass.__dict__[name]
                break
        else:
            raise Unsupported(f"super() has no attribute {name!r}")
        if attribute is _MODULE_CALL and hasattr(self.obj, "module_call"):
            # An override of nn.Module.__call__ deferring to it: hooks and forward, as a
            # module call is traced, not nn.Module's dispatch code.
            return _CallWith(self.obj.module_call)
        source = self._found_source(tx, mro.index(klass), name)
        bound = self._bind_descriptor(tx, attribute, source)
        if bound is not None:
            return bound
        if not hasattr(type(attribute), "__get__"):  # a plain class attribute: the value
            if source is not None:
                return tx.wrap(attribute, source)
            if is_constant_value(attribute):
                return ConstantVariable(attribute)
        if klass is object and name == "__init__":
            return _NoOpCall()
        if klass is object and name == "__new__":  # a Python __new__ reaching object's
            return tx.wrap(object.__new__, None)
        if klass is object and name == "__getattribute__" and hasattr(self.obj, "generic_getattr"):
            return _GenericGetattr(self.obj)
        if klass is object and name in _OBJECT_WRITES and hasattr(self.obj, _OBJECT_WRITES[name]):
            # object.__setattr__/__delattr__ on an object made in the trace: its own table.
            return _BoundCall(getattr(self.obj, _OBJECT_WRITES[name]))
        if klass in (list, dict) and hasattr(self.obj, "builtin_method"):
            # list's or dict's own method on a subclass instance made in the trace
            obj = self.obj
            return _CallWith(lambda tx, args, kwargs: obj.builtin_method(tx, name, args, kwargs))
        if klass is dict and name in _DICT_READS and hasattr(self.obj, "dict_contents"):
            # A dict subclass reaching dict's own lookup (transformers' _CanRecordRegistry).
            return BoundMethodOfTracker(self.obj.dict_contents(tx), name)
        raise Unsupported(f"super().{name} is a {type(attribute).__name__}")

    def _found_source(self, tx: Translator, depth: int, name: str) -> Source | None:
        """Where the function found at `__mro__[depth]` is read from, through the owner's
        class (guarded, with its closure cells); None where the owner has no source."""
        if isinstance(self.obj, TypeVariable):
            owner = self.obj.source
        elif self.obj.source is not None:
            owner = TypeSource(self.obj.source)
        else:
            owner = getattr(self.obj, "cls_source", None)  # an object built in the trace
        if owner is None:
            return None
        source = AttrSource(ItemSource(AttrSource(owner, "__mro__"), depth), name)
        found = getattr(self._owner_type().__mro__[depth], name)
        if inspect.isfunction(found):  # a plain value is guarded where it is wrapped
            guard_identity(tx, found, source)
        return source

    def _bind_descriptor(
        self, tx: Translator, attribute: Any, source: Source | None = None
    ) -> VariableTracker | None:
        """What `attribute.__get__(obj, type)` gives for Python functions: a function is
        bound to an instance and left as it is on a class (super(C, cls).f); a classmethod
        is bound to the class; a staticmethod is its function. `source` reads the function
        (a function or staticmethod as the class gives it)."""
        on_class = isinstance(self.obj, TypeVariable)
        if inspect.isfunction(attribute):
            return (
                UserFunctionVariable(attribute, source=source)
                if on_class
                else UserMethodVariable(attribute, self.obj, fn_source=source)
            )
        if isinstance(attribute, staticmethod) and inspect.isfunction(attribute.__func__):
            return UserFunctionVariable(attribute.__func__, source=source)
        if isinstance(attribute, classmethod) and inspect.isfunction(attribute.__func__):
            return UserMethodVariable(attribute.__func__, self._owner_class(tx))
        return None

    def _owner_class(self, tx: Translator) -> VariableTracker:
        if isinstance(self.obj, TypeVariable):
            return self.obj
        if self.obj.source is None:
            raise Unsupported("super() reaching a classmethod of an object without a source")
        return tx.wrap(self._owner_type(), TypeSource(self.obj.source))


_DICT_READS = ("get", "__getitem__", "__contains__", "__len__", "keys", "values", "items")


_OBJECT_WRITES = {"__setattr__": "generic_setattr", "__delattr__": "generic_delattr"}


class _BoundCall(VariableTracker):
    """A tracker's own implementation of an object slot, called with constant names."""

    def __init__(self, method) -> None:
        super().__init__()
        self.method = method

    def call_function(self, tx, args, kwargs):

        if kwargs or not args:
            raise Unsupported("object.__setattr__/__delattr__ take positional arguments")
        self.method(tx, args[0].as_python_constant(), *args[1:])
        return ConstantVariable(None)


_MODULE_CALL = torch.nn.Module.__dict__["__call__"]


class _CallWith(VariableTracker):
    """A tracker's own implementation of a call, given the arguments as they are."""

    def __init__(self, method) -> None:
        super().__init__()
        self.method = method

    def call_function(self, tx, args, kwargs):
        return self.method(tx, args, kwargs)


class _NoOpCall(VariableTracker):
    def call_function(self, tx, args, kwargs):

        return ConstantVariable(None)


class _GenericGetattr(VariableTracker):
    """super().__getattribute__ reaching object's: the plain attribute lookup."""

    def __init__(self, obj: VariableTracker) -> None:
        super().__init__()
        self.obj = obj

    def call_function(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            raise Unsupported("object.__getattribute__ takes one argument")
        return self.obj.generic_getattr(tx, args[0].as_python_constant())


def zero_argument_super(tx: Translator) -> SuperVariable:
    """super() with no arguments: the enclosing class and the frame's first argument."""
    code = tx.code
    if "__class__" not in code.co_freevars or code.co_argcount == 0:
        raise Unsupported("super() outside a method")
    cls = _class_cell(tx)
    first = code.co_varnames[0]

    return SuperVariable(cls, resolve_local(tx, first))


def _class_cell(tx: Translator) -> Any:
    if "__class__" in tx.closure_cells:
        return tx.closure_cells["__class__"].cell_contents
    if "__class__" in tx.symbolic_locals:
        return resolve_local(tx, "__class__").as_python_constant()
    raise Unsupported("super(): no __class__ cell")
