"""Fast physical paths for reading nn.Module attributes inside compiled guards.

`module.weight` goes through `nn.Module.__getattr__`, a Python function (~800 ns); the
same value read as `module._parameters['weight']` costs ~60 ns. Likewise
`module_list[0]` runs `ModuleList.__getitem__` where `module_list._modules['0']` is a dict
read (likewise `module_dict['name']`, and `sequential[0]` where a DICT_KEYS guard pins the
order of its `_modules`: its `__getitem__` counts through the dict's values). Guards keep their semantic sources (for messages); only the generated code reads
the physical path, and only where the two provably agree whenever the physical read
succeeds:

- the base's exact class is pinned by a TYPE_MATCH or ID_MATCH guard in the same set, so
  class attributes, properties and `__getattr__` cannot change under the guard;
- that class resolves the name through nn.Module's own `__getattr__` (no class attribute
  of that name, `__getattr__`/`__getattribute__` not overridden), and the live object
  seen at compile time holds it in `_parameters`, `_buffers` or `_modules`, not in its
  `__dict__`. nn.Module's `__setattr__`/`register_*` keep the name in one of those dicts;
  writing to an instance `__dict__` directly is the one way around this, as in Dynamo.

A physical read that fails at run time (the key moved) makes the guard fail, which only
costs a recompile.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from ember_bytecode_tracer.guards.sources import AttrSource, ItemSource, Source

MODULE_DICTS = ("_parameters", "_buffers", "_modules")
_UNKNOWN = object()

TypeOf = Callable[[Source], type | None]  # the exact class a guard pins a source to
ValueOf = Callable[[Source], Any]  # the live value at compile time, or _UNKNOWN
KeysOf = Callable[[Source], tuple | None]  # the keys a DICT_KEYS guard pins a source's to


def physical_source(
    source: Source,
    type_of: TypeOf,
    value_of: ValueOf,
    keys_of: KeysOf | None = None,
    physical_of: Callable[[Source], Source] | None = None,
) -> Source:
    """The source the generated code should read for `source` (itself when no rewrite).
    `physical_of`: this function over the same pins, memoized by the caller, for the base
    (the sources of one guard set share long prefixes: `L['self']._modules['model']...`)."""
    base = source.base
    if base is None:
        return source
    if physical_of is not None:
        physical_base = physical_of(base)
    else:
        physical_base = physical_source(base, type_of, value_of, keys_of)
    if isinstance(source, AttrSource):
        found = _module_dict_holding(base, source.attr, type_of, value_of)
        if found is not None:
            return ItemSource(AttrSource(physical_base, found), source.attr)
        return AttrSource(physical_base, source.attr)
    if isinstance(source, ItemSource):
        key = _container_key(base, source.key, type_of, keys_of)
        if key is not None:
            return ItemSource(AttrSource(physical_base, "_modules"), key)
    if physical_base is base:
        return source
    return _with_base(source, physical_base)


def absent_from_module_dicts(source: Source, type_of: TypeOf, value_of: ValueOf) -> bool:
    """Whether ABSENT on `source` (`not hasattr(module, name)`) may be checked as `name`
    missing from the module's instance `__dict__` and its `_parameters`, `_buffers` and
    `_modules`: the base's class is pinned and resolves the name only through nn.Module's
    `__getattr__`, so those four dicts are all `hasattr` can find it in, and the Python
    `__getattr__` that raises AttributeError (~1 us) never runs."""
    if not isinstance(source, AttrSource):
        return False
    cls = type_of(source.base)
    if cls is None or not _resolves_through_module_getattr(cls, source.attr):
        return False
    module = value_of(source.base)
    if module is _UNKNOWN or type(module) is not cls:
        return False
    instance_dict = getattr(module, "__dict__", None)
    return type(instance_dict) is dict and all(
        type(instance_dict.get(name)) is dict for name in MODULE_DICTS
    )


def unknown() -> Any:
    """The marker a ValueOf returns when it has no live value."""
    return _UNKNOWN


def _module_dict_holding(base: Source, name: str, type_of: TypeOf, value_of: ValueOf) -> str | None:
    cls = type_of(base)
    if cls is None or not _resolves_through_module_getattr(cls, name):
        return None
    module = value_of(base)
    if module is _UNKNOWN or type(module) is not cls:
        return None
    instance_dict = getattr(module, "__dict__", {})
    if name in instance_dict:
        return None
    for dict_name in MODULE_DICTS:
        if name in instance_dict.get(dict_name, ()):
            return dict_name
    return None


def _resolves_through_module_getattr(cls: type, name: str) -> bool:
    return (
        issubclass(cls, torch.nn.Module)
        and cls.__getattr__ is torch.nn.Module.__getattr__
        and cls.__getattribute__ is object.__getattribute__
        and not any(name in klass.__dict__ for klass in cls.__mro__)
    )


def _container_key(
    base: Source, key: Any, type_of: TypeOf, keys_of: KeysOf | None = None
) -> str | None:
    """The `_modules` key that `base[key]` reads, for ModuleList/ModuleDict bases, and for
    a Sequential whose `_modules` keys (so their order) a guard pins."""
    cls = type_of(base)
    if cls is None:
        return None
    if (
        issubclass(cls, torch.nn.Sequential)
        and cls.__getitem__ is torch.nn.Sequential.__getitem__
        and type(key) is int
        and key >= 0
        and keys_of is not None
    ):
        keys = keys_of(AttrSource(base, "_modules"))
        return keys[key] if keys is not None and key < len(keys) else None
    if (
        issubclass(cls, torch.nn.ModuleList)
        and cls.__getitem__ is torch.nn.ModuleList.__getitem__
        and type(key) is int
        and key >= 0  # a negative index depends on the length
    ):
        return str(key)
    if (
        issubclass(cls, torch.nn.ModuleDict)
        and cls.__getitem__ is torch.nn.ModuleDict.__getitem__
        and type(key) is str
    ):
        return key
    return None


def _with_base(source: Source, base: Source) -> Source:
    return replace(source, base=base)  # type: ignore[type-var]
