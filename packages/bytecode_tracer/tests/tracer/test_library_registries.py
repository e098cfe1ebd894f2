"""Library objects read in a trace: registries that are Mapping subclasses (transformers'
AttentionInterface), objects built in the trace and returned (caches), dataclass helpers."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import ClassVar

import torch

from conftest import Compiled, same

x = torch.randn(4, 3)


def _sin(a):
    return a.sin()


def _cos(a):
    return a.cos()


class Registry(MutableMapping):
    """The shape of transformers' GeneralInterface: a class-wide mapping plus local overrides,
    with __contains__ and get inherited from collections.abc.Mapping (Python code)."""

    _global_mapping: ClassVar[dict] = {"sin": _sin, "cos": _cos}

    def __init__(self):
        self._local_mapping = {}

    def __getitem__(self, key):
        if key in self._local_mapping:
            return self._local_mapping[key]
        return self._global_mapping[key]

    def __setitem__(self, key, value):
        self._local_mapping.update({key: value})

    def __delitem__(self, key):
        del self._local_mapping[key]

    def __iter__(self):
        return iter({**self._global_mapping, **self._local_mapping})

    def __len__(self):
        return len(self._global_mapping.keys() | self._local_mapping.keys())

    def lookup(self, key, default):
        if key != "eager" and key not in self:
            raise KeyError(key)
        return super().get(key, default)


REGISTRY = Registry()


def test_membership_in_a_mapping_subclass_is_traced():
    def fn(a, key):
        if key in REGISTRY:
            return REGISTRY[key](a)
        return a

    compiled = Compiled(fn)
    assert same(compiled(x, "sin"), x.sin())
    assert same(compiled(x, "tanh"), x)
    assert not compiled.breaks
    assert compiled.backend.graph_count == 1  # the second call has no tensor op


def test_registry_lookup_through_super_get_is_one_graph():
    def fn(a, key):
        return REGISTRY.lookup(key, torch.tanh)(a) + 1

    compiled = Compiled(fn)
    assert same(compiled(x, "cos"), x.cos() + 1)
    assert same(compiled(x, "eager"), x.tanh() + 1)
    assert not compiled.breaks
    assert compiled.backend.graph_count == 2


def test_rebinding_a_registry_entry_between_calls_retraces():
    local = Registry()

    def fn(a):
        return local.lookup("sin", None)(a)

    compiled = Compiled(fn)
    assert same(compiled(x), x.sin())
    local["sin"] = _cos  # a local override, as a user registering their own kernel
    assert same(compiled(x), x.cos())
    Registry._global_mapping["sin"] = _cos
    try:
        del local["sin"]
        assert same(compiled(x), x.cos())  # the class-wide mapping changed too
    finally:
        Registry._global_mapping["sin"] = _sin
    assert same(compiled(x), x.sin())
    assert not compiled.breaks
