"""Data descriptors on an object's type (a class with `__set__`, a property): object's own
attribute lookup and assignment defer to them before the instance dict, so the tracer runs
their Python `__get__` / `__set__` (or a property's fget / fset) inline, as eager does."""

from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import AttrSource, ItemSource, TypeSource

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator, VariableTracker

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
