"""Data descriptors on an object's type (a class with `__set__`, a property): object's own
attribute lookup and assignment defer to them before the instance dict, so the tracer runs
their Python `__get__` / `__set__` (or a property's fget / fset) inline, as eager does."""

from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import AttrSource, GuardKind, ItemSource, TypeSource
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard, wrap_rule

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator

_MISSING = object()


def data_descriptor(cls: type, name: str) -> Any:
    """`cls.name` as found in the class dicts when it is a data descriptor; else None."""
    attribute = inspect.getattr_static(cls, name, _MISSING)
    if attribute is _MISSING or not hasattr(type(attribute), "__set__"):
        return None
    return attribute


def _descriptor_source(cls: type, cls_source: Source, name: str) -> Source:
    """Where the descriptor lives: the dict of the first class of the MRO that defines it."""
    depth = next(i for i, k in enumerate(cls.__mro__) if name in vars(k))
    owner = ItemSource(AttrSource(cls_source, "__mro__"), depth)
    return ItemSource(AttrSource(owner, "__dict__"), name)


def _python_method(descriptor: Any, method: str) -> Any:
    found = inspect.getattr_static(type(descriptor), method, None)
    return found if inspect.isfunction(found) else None


def descriptor_set(
    tx: Translator,
    obj: VariableTracker,
    cls: type,
    cls_source: Source | None,
    name: str,
    value: VariableTracker,
) -> bool:
    """`obj.name = value` through a data descriptor of `cls`, inlined; False when there is
    none (the write goes to the instance dict). C descriptors other than property (slots,
    getsets) are left to the caller's plain write."""
    descriptor = data_descriptor(cls, name)
    if descriptor is None:
        return False
    if isinstance(descriptor, property):
        if descriptor.fset is None:
            raise TracedException(AttributeError, f"property {name!r} has no setter")
        if not inspect.isfunction(descriptor.fset):
            raise Unsupported(f"property {cls.__qualname__}.{name} with a C setter")
        tx.inline_call(descriptor.fset, None, [obj, value], {})
        return True
    setter = _python_method(descriptor, "__set__")
    if setter is None:
        if isinstance(descriptor, types.MemberDescriptorType | types.GetSetDescriptorType):
            return False  # a C slot or getset: object.__setattr__ on the real object later
        raise Unsupported(f"data descriptor {cls.__qualname__}.{name} with a C __set__")
    if cls_source is None:
        raise Unsupported(f"data descriptor {cls.__qualname__}.{name} without a source")
    source = _descriptor_source(cls, cls_source, name)
    fn_source = AttrSource(TypeSource(source), "__set__")
    tx.inline_call(setter, fn_source, [tx.wrap(descriptor, source), obj, value], {})
    return True


def descriptor_get(
    tx: Translator,
    obj: VariableTracker,
    cls: type,
    cls_tracker: VariableTracker,
    name: str,
) -> VariableTracker | None:
    """`obj.name` through a Python data descriptor's `__get__`, inlined (it wins over the
    instance dict), or a property's fget; None when `cls.name` is no such descriptor."""
    descriptor = data_descriptor(cls, name)
    if descriptor is None:
        return None
    if isinstance(descriptor, property):  # it wins over an instance-dict entry too
        if descriptor.fget is None:
            raise TracedException(AttributeError, f"property {name!r} has no getter")
        if not inspect.isfunction(descriptor.fget):
            return None
        return tx.inline_call(descriptor.fget, None, [obj], {})
    getter = _python_method(descriptor, "__get__")
    if getter is None:
        return None  # C slots and getsets: the callers' plain read
    if cls_tracker.source is None:
        raise Unsupported(f"data descriptor {cls.__qualname__}.{name} without a source")
    source = _descriptor_source(cls, cls_tracker.source, name)
    fn_source = AttrSource(TypeSource(source), "__get__")
    return tx.inline_call(getter, fn_source, [tx.wrap(descriptor, source), obj, cls_tracker], {})


# ---- `descriptor.__get__` of a C slot or getset, called ----------------------------------
_C_DESCRIPTORS = (types.GetSetDescriptorType, types.MemberDescriptorType)


class DescriptorGetVariable(VariableTracker):
    """The bound `__get__` (a method-wrapper) of a C getset or member descriptor, such as
    `torch.Tensor.shape.__get__` or `type.__dict__["__dict__"].__get__`: called on an
    object whose type reaches that very descriptor first, it is the plain read `obj.name`
    (a data descriptor wins over the instance dict); any other object is a break."""

    def __init__(self, descriptor: Any, *, source: Source | None) -> None:
        super().__init__(source=source)
        self.descriptor = descriptor

    def python_type(self) -> type:
        return types.MethodWrapperType

    def call_function(self, tx, args, kwargs):
        if kwargs or not args or len(args) > 2:
            raise Unsupported("descriptor __get__ takes an object and an optional owner")
        obj, name = args[0], self.descriptor.__name__
        try:
            kind = obj.python_type()
        except Unsupported:
            kind = None
        found = next((vars(k)[name] for k in getattr(kind, "__mro__", ()) if name in vars(k)), None)
        if found is not self.descriptor:
            raise Unsupported(f"{self.descriptor!r}.__get__ on an object of another type")
        return obj.var_getattr(tx, name)


def _is_descriptor_get(tx, value: Any, source) -> bool:
    return (
        type(value) is types.MethodWrapperType
        and value.__name__ == "__get__"
        and isinstance(value.__self__, _C_DESCRIPTORS)
    )


@wrap_rule("c_descriptor_get", when=_is_descriptor_get)
def _wrap_descriptor_get(tx, value: Any, source) -> VariableTracker:
    # a new method-wrapper on every read: what it does is fixed by its descriptor
    if source is not None:
        guard(tx, source, GuardKind.TYPE_MATCH, types.MethodWrapperType)
        guard(tx, AttrSource(source, "__name__"), GuardKind.EQUALS_MATCH, "__get__")
        guard(tx, AttrSource(source, "__self__"), GuardKind.ID_MATCH, value.__self__)
    return DescriptorGetVariable(value.__self__, source=source)
