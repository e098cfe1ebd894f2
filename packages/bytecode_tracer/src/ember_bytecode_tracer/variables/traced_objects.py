"""Plain Python objects built during a trace (a library's cache object, a small state holder).

`Cls(...)` for a Python class (no `__del__`, no C base) makes a `TracedObjectVariable`: the
object is not built at trace time. A Python `__new__` runs inline first (object.__new__ at
its end makes the tracker; `__init__` runs only if it returned an instance of the class, as
type.__call__ does). Its class's `__init__` is inlined with the tracker as `self`; attribute writes go to the tracker's own tables (the
object is new, so nothing else can see them): its instance dict, and the values of its
`__slots__`. Methods, properties and class attributes are looked up along the class's MRO as
Python would. Python attribute hooks run inline as eager runs them: `__getattribute__` for
every read, `__getattr__` when the plain lookup raises AttributeError, `__setattr__` and
`__delattr__` for writes and `del`; their `object.__setattr__(self, ...)` /
`super().__setattr__` calls reach the tables (generic_setattr and friends).
After the graph ran, the runner rebuilds the object as `object.__new__(cls)` with its final
state (instance dict and slots, set without the hooks), once per call however many times it
is reached (so identity is kept).
"""

from __future__ import annotations

import abc
import inspect
import sys
import types
from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import AttrSource, GlobalSource, ItemSource, TypeSource
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard_identity
from ember_bytecode_tracer.variables.builtins import constant_fold, rule
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.descriptors import (
    data_descriptor,
    descriptor_get,
    descriptor_set,
)
from ember_bytecode_tracer.variables.dicts import ConstDictVariable
from ember_bytecode_tracer.variables.functions import UserFunctionVariable, UserMethodVariable
from ember_bytecode_tracer.variables.iterator_tools import LazyIteratorVariable
from ember_bytecode_tracer.variables.iterators import ListIteratorVariable
from ember_bytecode_tracer.variables.objects import (
    TypeVariable,
    UserDefinedObjectVariable,
    constructor,
    hook_truth,
)

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator

_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement
# Attribute hooks run inline when they are Python functions.
_ATTRIBUTE_HOOKS = ("__getattribute__", "__getattr__", "__setattr__", "__delattr__")


def traceable_class_refusal(cls: type) -> str | None:
    """Why instances of `cls` cannot be built in the trace, or None when they can."""
    if type(cls) not in (type, abc.ABCMeta):
        return f"its metaclass is {type(cls).__name__}"
    if getattr(cls, "__abstractmethods__", None):
        return "it is abstract"
    for klass in cls.__mro__[:-1]:
        if not klass.__flags__ & _HEAPTYPE:
            return f"it derives from {klass.__name__}, implemented in C"
        own = vars(klass)
        if "__del__" in own:
            return "it defines __del__"
        if "__new__" in own and not _python_new(own["__new__"]):
            return "its __new__ is not a Python function"
        for hook in _ATTRIBUTE_HOOKS:
            if hook in own and not inspect.isfunction(own[hook]):
                return f"its {hook} is not a Python function"
    return None


def _python_new(new: Any) -> bool:
    """Whether a class's own `__new__` is a Python function (run inline, object.__new__
    below it making the tracker)."""
    return inspect.isfunction(getattr(new, "__func__", new))


def slot_descriptor(cls: type, name: str) -> Any:
    """The member descriptor of `cls`'s `__slots__` that `obj.name` reaches, or None."""
    found = inspect.getattr_static(cls, name, None)
    return found if isinstance(found, types.MemberDescriptorType) else None


class TracedObjectVariable(VariableTracker):
    """An instance of a plain Python class, made in the trace and rebuilt after it."""

    def __init__(self, cls: type, cls_source: Source | None) -> None:
        super().__init__()
        self.cls = cls
        self.cls_source = cls_source
        self.attrs: dict[str, VariableTracker] = {}  # the instance dict
        self.slots: dict[str, VariableTracker] = {}  # the __slots__ that were set

    @classmethod
    def construct(cls, tx: Translator, klass: type, klass_source, args, kwargs):
        """`klass(*args, **kwargs)` as type.__call__ runs it: `__new__` (a Python one
        inlined; object's makes the tracker), then `__init__` when `__new__` gave an
        instance of `klass`."""
        klass_source = klass_source or _class_source(klass)
        new = inspect.getattr_static(klass, "__new__")
        if new is object.__new__:
            obj = cls(klass, klass_source)
        else:
            kind = TypeVariable(klass, source=klass_source)
            fn_source = AttrSource(klass_source, "__new__") if klass_source is not None else None
            new = getattr(new, "__func__", new)  # a staticmethod, or a function set later
            guard_identity(tx, new, fn_source)
            obj = tx.inline_call(new, fn_source, [kind, *args], kwargs)
            if not isinstance(obj, TracedObjectVariable):
                if issubclass(obj.python_type(), klass):  # __init__ on an object we do not model
                    raise Unsupported(f"{klass.__qualname__}.__new__ returned a {obj}")
                return obj
            if not issubclass(obj.cls, klass):
                return obj  # not an instance of klass: its __init__ is not run
        init = inspect.getattr_static(obj.cls, "__init__")
        if init is object.__init__:
            if (args or kwargs) and new is object.__new__:
                raise Unsupported(f"{klass.__qualname__}() takes no arguments")
        else:
            obj._method(tx, init, "__init__").call_function(tx, args, kwargs)
        return obj

    def python_type(self) -> type:
        return self.cls

    # ---- attributes ----------------------------------------------------------------
    def _hook(self, name: str) -> Any:
        hook = inspect.getattr_static(self.cls, name, None)
        return hook if inspect.isfunction(hook) else None

    def has_attribute(self, name: str) -> bool | None:
        if self._hook("__getattribute__") is not None:
            return None  # the hook decides: hasattr/getattr run it (builtins._probe)
        if slot_descriptor(self.cls, name) is not None:
            return name in self.slots
        if name in self.attrs or hasattr(self.cls, name):
            return True
        return None if self._hook("__getattr__") is not None else False

    def var_getattr(self, tx, name):
        hook = self._hook("__getattribute__")
        fallback = self._hook("__getattr__")
        try:
            if hook is None or name == "__class__":
                return self.generic_getattr(tx, name)
            args = [self, ConstantVariable(name)]
            return tx.inline_call(hook, self._attr_source("__getattribute__"), args, {})
        except TracedException as exc:
            if fallback is None or exc.exc_type is not AttributeError:
                raise
        args = [self, ConstantVariable(name)]
        return tx.inline_call(fallback, self._attr_source("__getattr__"), args, {})

    def _has_dict(self) -> bool:
        return bool(self.cls.__dictoffset__)

    def generic_getattr(self, tx, name):
        """object.__getattribute__: data descriptors of the type (slots among them), the
        instance dict, then the class."""
        if slot_descriptor(self.cls, name) is not None:
            if name not in self.slots:
                raise TracedException(AttributeError, name)
            return self.slots[name]
        through = descriptor_get(
            tx, self, self.cls, TypeVariable(self.cls, source=self.cls_source), name
        )
        if through is not None:  # a data descriptor of the type wins over the table
            return through
        if name in self.attrs:
            return self.attrs[name]
        if name == "__class__":
            return TypeVariable(self.cls, source=self.cls_source)
        if name == "__dict__" and self._has_dict():
            view = ConstDictVariable({})
            view.items = self.attrs  # the table itself: writes through the view are the object's
            return view
        try:
            attribute = inspect.getattr_static(self.cls, name)
        except AttributeError:
            raise TracedException(AttributeError, name) from None
        return self._class_attribute(tx, name, attribute)

    def _class_attribute(self, tx, name: str, attribute: Any) -> VariableTracker:
        if isinstance(attribute, property):
            if attribute.fget is None:
                raise TracedException(AttributeError, name)
            return tx.inline_call(attribute.fget, None, [self], {})
        if isinstance(attribute, staticmethod):
            return UserFunctionVariable(attribute.__func__, source=self._attr_source(name))
        if isinstance(attribute, classmethod):
            owner = TypeVariable(self.cls, source=self.cls_source)
            return UserMethodVariable(attribute.__func__, owner, fn_source=None)
        if inspect.isfunction(attribute):
            return self._method(tx, attribute, name)
        getter = inspect.getattr_static(type(attribute), "__get__", None)
        if inspect.isfunction(getter) and not hasattr(type(attribute), "__set__"):
            return self._non_data_descriptor(tx, name, attribute, getter)
        if name == "__weakref__" and isinstance(attribute, types.GetSetDescriptorType):
            # the object's weak reference: the one the trace made to it (weak_refs.py), or
            # None (nothing outside the trace can have made one to a new object)
            return getattr(self, "weak_ref", None) or ConstantVariable(None)
        if getter is not None and hasattr(type(attribute), "__set__"):  # other C getsets
            raise Unsupported(f"reading {self.cls.__qualname__}.{name}, a C data descriptor")
        source = self._attr_source(name)
        if source is not None:
            return tx.wrap(getattr(self.cls, name), source)
        value = getattr(self.cls, name)
        if is_constant_value(value):
            return ConstantVariable(value)
        raise Unsupported(f"class attribute {self.cls.__qualname__}.{name} without a source")

    def _non_data_descriptor(self, tx, name: str, attribute: Any, getter: Any) -> VariableTracker:
        """A Python non-data descriptor (torch.distributions' lazy_property): its __get__,
        inlined with the object (the table was checked first, as the instance dict is)."""

        if self.cls_source is None:
            raise Unsupported(f"descriptor {self.cls.__qualname__}.{name} without a source")
        depth = next(i for i, k in enumerate(self.cls.__mro__) if name in vars(k))
        owner = ItemSource(AttrSource(self.cls_source, "__mro__"), depth)
        source = ItemSource(AttrSource(owner, "__dict__"), name)
        descriptor = tx.wrap(attribute, source)
        fn_source = AttrSource(TypeSource(source), "__get__")
        cls = TypeVariable(self.cls, source=self.cls_source)
        return tx.inline_call(getter, fn_source, [descriptor, self, cls], {})

    def _method(self, tx, fn: Any, name: str) -> VariableTracker:
        # The method as the class gives it, guarded (a class's methods can be replaced).
        source = self._attr_source(name)
        guard_identity(tx, fn, source)
        return UserMethodVariable(fn, self, fn_source=source)

    def _attr_source(self, name: str) -> Source | None:

        return AttrSource(self.cls_source, name) if self.cls_source is not None else None

    def store_attribute(self, tx, name: str, value: VariableTracker) -> None:
        hook = self._hook("__setattr__")
        if hook is None:
            self.generic_setattr(tx, name, value)
            return
        args = [self, ConstantVariable(name), value]
        tx.inline_call(hook, self._attr_source("__setattr__"), args, {})

    def generic_setattr(self, tx, name: str, value: VariableTracker) -> None:
        """object.__setattr__ on the tables."""
        if slot_descriptor(self.cls, name) is not None:
            self.slots[name] = value
            return
        if descriptor_set(tx, self, self.cls, self.cls_source, name, value):
            return  # a property's setter or a data descriptor's __set__, inlined
        if data_descriptor(self.cls, name) is not None:  # a C getset: not in the table
            raise Unsupported(f"setting {self.cls.__qualname__}.{name}, a data descriptor")
        if not self._has_dict():
            raise Unsupported(
                f"setting {name!r} on a {self.cls.__qualname__}, which has no __dict__"
            )
        self.attrs[name] = value

    def delete_attribute(self, tx, name: str) -> None:
        hook = self._hook("__delattr__")
        if hook is None:
            self.generic_delattr(tx, name)
            return
        tx.inline_call(hook, self._attr_source("__delattr__"), [self, ConstantVariable(name)], {})

    def generic_delattr(self, tx, name: str) -> None:
        """object.__delattr__ on the tables (a class-level default shows through again)."""
        if slot_descriptor(self.cls, name) is not None:
            if name not in self.slots:
                raise TracedException(AttributeError, name)
            del self.slots[name]
            return
        descriptor = inspect.getattr_static(self.cls, name, None)
        if hasattr(type(descriptor), "__delete__"):
            raise Unsupported(f"deleting {self.cls.__qualname__}.{name}, a data descriptor")
        if name not in self.attrs:
            raise TracedException(AttributeError, name)
        del self.attrs[name]

    # ---- protocols -------------------------------------------------------------------
    def call_method(self, tx, name, args, kwargs):
        # Special methods are looked up on the type, ordinary ones as attributes.
        if name.startswith("__") and name.endswith("__"):
            attribute = inspect.getattr_static(self.cls, name, None)
            if not inspect.isfunction(attribute):
                raise Unsupported(f"{self.cls.__qualname__}.{name} is not a Python method")
            return self._method(tx, attribute, name).call_function(tx, args, kwargs)
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def call_function(self, tx, args, kwargs):
        return self.call_method(tx, "__call__", args, kwargs)

    def truthiness(self, tx) -> bool:
        for name in ("__bool__", "__len__"):
            if inspect.getattr_static(self.cls, name, None) is not None:
                return hook_truth(name, self.call_method(tx, name, [], {}))
        return True

    def python_len(self, tx) -> VariableTracker:
        return self.call_method(tx, "__len__", [], {})

    def unpack(self, tx) -> list[VariableTracker]:
        return self.iterate_lazily(tx).unpack(tx)

    def iterate_lazily(self, tx) -> ListIteratorVariable:
        """`iter(obj)`: what its `__iter__` returns; an object of this kind (an iterator
        whose `__iter__` returns itself) is advanced by its `__next__` when asked."""
        method = inspect.getattr_static(self.cls, "__iter__", None)
        if method is None:
            raise Unsupported(f"iterating over a {self.cls.__qualname__}")
        if inspect.isgeneratorfunction(method):  # collections.abc.Sequence.__iter__
            items = _run_generator(tx, method, self._attr_source("__iter__"), [self])
            return ListIteratorVariable(items)
        iterator = self.call_method(tx, "__iter__", [], {})
        if isinstance(iterator, ListIteratorVariable):
            return iterator
        if isinstance(iterator, TracedObjectVariable):
            return LazyIteratorVariable(iterator.next_item, what=self.cls.__qualname__)
        return ListIteratorVariable(iterator.unpack(tx))

    def next_item(self, tx) -> VariableTracker | None:
        """`next(obj)` through its `__next__`; None where it raised StopIteration."""
        try:
            return self.call_method(tx, "__next__", [], {})
        except TracedException as raised:
            if issubclass(raised.exc_type, StopIteration):
                return None
            raise

    def __repr__(self) -> str:
        return f"TracedObjectVariable({self.cls.__qualname__})"


def _run_generator(tx, fn: Any, fn_source, args: list[VariableTracker]) -> list[VariableTracker]:
    """What iterating a call of the generator function `fn` produces, run to its end in the
    trace (as generator expressions made in the trace are)."""
    return tx.run_generator(fn, fn_source, args)


def _class_source(cls: type) -> Source | None:
    """Where a top-level class lives, for classes reached without a source (`type(x)`)."""

    module = sys.modules.get(cls.__module__)
    if module is None or getattr(module, cls.__qualname__, None) is not cls:
        return None
    modules = AttrSource(GlobalSource("__ember_sys__"), "modules")
    return AttrSource(ItemSource(modules, cls.__module__), cls.__qualname__)


@constructor("traced_object")
def _construct_traced_object(tx, kind: TypeVariable, args, kwargs) -> VariableTracker:
    refusal = traceable_class_refusal(kind.cls)
    if refusal is None:
        return TracedObjectVariable.construct(tx, kind.cls, kind.source, args, kwargs)
    raise Unsupported(f"constructing a {kind.cls.__qualname__} inside a traced region ({refusal})")


@rule(object.__new__)
def _object_new(tx, args, kwargs):
    """`object.__new__(cls)` (a Python `__new__` reaching object's): a new, empty object of
    a class the trace can build; `__init__` is the caller's business (type.__call__)."""
    if len(args) != 1 or kwargs or not isinstance(args[0], TypeVariable):
        raise Unsupported("object.__new__ with other than one class")  # eager may raise
    cls = args[0].cls
    refusal = traceable_class_refusal(cls)
    if refusal is not None:
        raise Unsupported(f"object.__new__({cls.__qualname__}) ({refusal})")
    return TracedObjectVariable(cls, args[0].source or _class_source(cls))


# ---- str() / repr() of a user's object: its class's Python __str__ / __repr__, inlined --
def _python_dunder(cls: type, name: str) -> bool:
    return inspect.isfunction(inspect.getattr_static(cls, name, None))


def _text_from(tx, obj, name: str) -> VariableTracker:
    result = obj.var_getattr(tx, name).call_function(tx, [], {})
    if result.is_python_constant() and type(result.as_python_constant()) is str:
        return result
    cls = obj.python_type()
    raise Unsupported(f"{cls.__qualname__}.{name} returned a value not known at trace time")


@rule(str)
def _str(tx, args, kwargs):
    obj = args[0] if len(args) == 1 and not kwargs else None
    if isinstance(obj, TracedObjectVariable | UserDefinedObjectVariable):
        cls = obj.python_type()
        name = "__str__" if _python_dunder(cls, "__str__") else None
        if name is None and inspect.getattr_static(cls, "__str__") is object.__str__:
            name = "__repr__" if _python_dunder(cls, "__repr__") else None
        if name is not None:
            return _text_from(tx, obj, name)
    return constant_fold(str, args, kwargs)


@rule(repr)
def _repr(tx, args, kwargs):
    obj = args[0] if len(args) == 1 and not kwargs else None
    if isinstance(obj, TracedObjectVariable | UserDefinedObjectVariable) and _python_dunder(
        obj.python_type(), "__repr__"
    ):
        return _text_from(tx, obj, "__repr__")
    return constant_fold(repr, args, kwargs)
