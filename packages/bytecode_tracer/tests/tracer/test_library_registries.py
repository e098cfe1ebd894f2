"""Library objects read in a trace: registries that are Mapping subclasses (transformers'
AttentionInterface), objects built in the trace and returned (caches), dataclass helpers."""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import MutableMapping, Sequence
from typing import ClassVar

import pytest
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


class Layer:
    """The shape of transformers' DynamicLayer: lazily initialised key/value tensors."""

    growing = True

    def __init__(self):
        self.keys = None
        self.is_initialized = False

    def update(self, k):
        if not self.is_initialized:
            self.keys = torch.zeros(k.shape[0], 0)
            self.is_initialized = True
        self.keys = torch.cat([self.keys, k], dim=-1)
        return self.keys

    @property
    def length(self):
        return 0 if self.keys is None else self.keys.shape[-1]


class Cache:
    def __init__(self, layer_class=None):
        self.layers = []
        self.layer_class = layer_class

    def update(self, k, index):
        while len(self.layers) <= index:
            self.layers.append(self.layer_class())
        return self.layers[index].update(k)

    @classmethod
    def kind(cls):
        return cls.__name__

    @staticmethod
    def scale():
        return 2.0


class DynamicCacheLike(Cache):
    def __init__(self):
        super().__init__(layer_class=Layer)


def _cache_model(a, cache=None):
    if cache is None:
        cache = DynamicCacheLike()
    h = a
    for i in range(2):
        keys = cache.update(h * (i + 1), i)
        h = h + keys.sum(-1, keepdim=True) * Cache.scale()
    return h, cache, cache.layers[0].length, cache.kind()


def _cache_tensors(cache):
    return [layer.keys for layer in cache.layers]


def test_an_object_built_in_the_trace_is_returned_rebuilt():
    compiled = Compiled(_cache_model)
    expected = _cache_model(x)
    for _ in range(2):
        got = compiled(x)
        assert same(got[0], expected[0])
        assert type(got[1]) is DynamicCacheLike and got[1] is not expected[1]
        assert [type(layer) for layer in got[1].layers] == [Layer, Layer]
        assert same(_cache_tensors(got[1]), _cache_tensors(expected[1]))
        assert got[1].layers[1].is_initialized and got[1].layer_class is Layer
        assert got[2:] == expected[2:]
    assert not compiled.breaks
    assert compiled.backend.graph_count == 1  # the second call reuses the first trace


def test_a_cache_passed_in_is_updated_in_place():
    compiled = Compiled(_cache_model)
    mine, theirs = DynamicCacheLike(), DynamicCacheLike()
    _cache_model(x, theirs)
    got = compiled(x, mine)
    assert got[1] is mine
    assert same(_cache_tensors(mine), _cache_tensors(theirs))
    assert not compiled.breaks


def test_an_object_reached_twice_is_rebuilt_once():
    def fn(a):
        layer = Layer()
        layer.update(a)
        return layer, [layer], {"layer": layer}

    compiled = Compiled(fn)
    first, in_list, in_dict = compiled(x)
    assert in_list[0] is first and in_dict["layer"] is first
    assert same(first.keys, fn(x)[0].keys)
    assert not compiled.breaks


def test_identity_of_objects_built_in_the_trace():
    def fn(a):
        one, two = Layer(), Layer()
        return a + 1 if (one is two or one is None) else a - 1

    compiled = Compiled(fn)
    assert same(compiled(x), x - 1)
    assert not compiled.breaks


class Finalized:
    def __init__(self, value):
        self.value = value

    def __del__(self):
        pass


def test_a_class_the_trace_cannot_build_is_a_graph_break():
    def fn(a):
        box = Finalized(a * 2)
        return box.value + 1

    compiled = Compiled(fn)
    assert same(compiled(x), x * 2 + 1)
    assert any("Finalized" in b.reason and "__del__" in b.reason for b in compiled.breaks)


class AliasedConfig:
    """The shape of transformers' configs: attribute aliases resolved by a Python
    __getattribute__ that calls object's through super()."""

    attribute_map: ClassVar[dict] = {"num_layers": "n_layer"}

    def __init__(self, n_layer):
        self.n_layer = n_layer

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


def test_a_python_getattribute_hook_is_inlined():
    config = AliasedConfig(2)

    def fn(a):
        for _ in range(config.num_layers):
            a = a * 2
        return a

    compiled = Compiled(fn)
    assert same(compiled(x), x * 4)
    config.n_layer = 3  # the alias reads the new value: the guard sees it
    assert same(compiled(x), x * 8)
    assert not compiled.breaks
    assert compiled.backend.graph_count == 2


class ClassKeyedRegistry(dict):
    """transformers' _CanRecordRegistry: a dict subclass reaching dict.get through super()."""

    def get(self, obj):
        return super().get(str(type(obj).__name__)) or {}


CLASS_REGISTRY = ClassKeyedRegistry({"Tensor": {"scale": 3.0}})


def test_super_get_of_a_dict_subclass_reads_its_entries():
    def fn(a):
        return a * CLASS_REGISTRY.get(a).get("scale", 1.0)

    compiled = Compiled(fn)
    assert same(compiled(x), x * 3)
    CLASS_REGISTRY["Tensor"] = {"scale": 5.0}
    try:
        assert same(compiled(x), x * 5)  # the entry is guarded
    finally:
        CLASS_REGISTRY["Tensor"] = {"scale": 3.0}
    assert not compiled.breaks


class BuildsPerLookup(OrderedDict):
    """transformers' ClassInstantier: an ordered dict of classes (or (class, kwargs)) whose
    own __getitem__ builds a fresh object from the entry on every lookup."""

    def __getitem__(self, key):
        entry = super().__getitem__(key)
        kind, kwargs = entry if isinstance(entry, tuple) else (entry, {})
        return kind(**kwargs)


BUILDERS = BuildsPerLookup(
    {"tanh": torch.nn.Tanh, "leaky": (torch.nn.LeakyReLU, {"negative_slope": 0.3})}
)


def test_a_dict_subclass_building_per_lookup_is_one_graph():
    # (integration_tests/test_eager_semantics.py runs transformers' ACT2FN under inductor)
    def fn(a):
        return BUILDERS["tanh"](a) + BUILDERS["leaky"](a)

    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), fn(x))
    BUILDERS["leaky"] = (torch.nn.LeakyReLU, {"negative_slope": 0.7})
    try:  # the entries are guarded, read without running the subclass's __getitem__
        assert same(compiled(x), fn(x))
    finally:
        BUILDERS["leaky"] = (torch.nn.LeakyReLU, {"negative_slope": 0.3})
    assert not compiled.breaks


class LayerView(Sequence):
    """transformers' _PerLayerConfigView: a Sequence built in the trace, iterated through
    Sequence.__iter__ (a generator that stops on the IndexError its __getitem__ raises)."""

    def __init__(self, count):
        self._count = count

    def __len__(self):
        return self._count

    def __getitem__(self, index):
        if index < 0 or index >= len(self):
            raise IndexError("list index out of range")
        return index + 1


def test_a_sequence_built_in_the_trace_iterates_until_its_index_error():
    def fn(a):
        for scale in LayerView(3):
            a = a * scale
        return a, len(LayerView(2))

    compiled = Compiled(fn)
    got = compiled(x)
    assert same(got[0], x * 6) and got[1] == 2
    assert not compiled.breaks


def test_a_builtin_exception_raised_and_caught_in_the_trace():
    def fn(a, k):
        try:  # no tensor op inside: those under try/except are a break by design
            if k > 1:
                raise ValueError("too big", 5)
            shift = 1
        except ValueError as error:
            shift = -error.args[1]
        return (a + shift) * 2

    compiled = Compiled(fn)
    assert same(compiled(x, 0), (x + 1) * 2)
    assert same(compiled(x, 5), (x - 5) * 2)
    assert not compiled.breaks


def test_an_uncaught_exception_raised_in_the_trace_reaches_the_caller():
    def fn(a):
        b = a + 1
        raise KeyError("missing")
        return b

    compiled = Compiled(fn)
    with pytest.raises(KeyError, match="missing"):
        compiled(x)


def test_environment_lookups_are_guarded_on_their_key(monkeypatch):
    monkeypatch.delenv("EMBER_TEST_FLAG", raising=False)

    def fn(a):
        if os.environ.get("EMBER_TEST_FLAG", "0") == "1":
            return a + 1
        return a - 1

    compiled = Compiled(fn)
    assert same(compiled(x), x - 1)
    monkeypatch.setenv("EMBER_TEST_FLAG", "1")
    assert same(compiled(x), x + 1)
    monkeypatch.setenv("EMBER_TEST_FLAG", "0")
    assert same(compiled(x), x - 1)
    assert not compiled.breaks
    assert compiled.backend.graph_count == 3


class _PerLayerMixin:
    def __getattribute__(self, key):
        # transformers' HeterogeneousConfigMixin: reached through the next class's super()
        spec = super().__getattribute__("__dict__").get("_spec")
        if spec is not None and key in spec:
            return spec[key]
        return super().__getattribute__(key)


class LayeredConfig(AliasedConfig, _PerLayerMixin):
    pass


def test_chained_getattribute_hooks_through_super():
    config = LayeredConfig(2)

    def fn(a):
        return a * config.num_layers

    compiled = Compiled(fn)
    assert same(compiled(x), x * 2)
    config._spec = {"n_layer": 5}
    assert same(compiled(x), x * 5)
    assert not compiled.breaks


def _guard_sources(compiled, index=0):
    guards = compiled.compiler.records[index].guards
    guards = getattr(guards, "base", guards)
    return [g.source.expr() for g in guards.guards if g.source is not None]


def test_attributes_under_a_getattribute_hook_are_guarded_once_by_dict_reads():
    # issue 15: each attribute was guarded twice, as `config.n_layer` (the Python hook on
    # every guard call) and as `config.__dict__['n_layer']` (the mixin's __dict__ read)
    config = LayeredConfig(2)
    config.scale = 3

    def fn(a):
        return a * config.num_layers + config.scale

    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    sources = _guard_sources(compiled)
    reads = [s for s in sources if s.endswith(("n_layer']", ".n_layer", "scale']", ".scale"))]
    assert sorted(reads) == [
        "object.__getattribute__(L['config'], '__dict__')['n_layer']",
        "object.__getattribute__(L['config'], '__dict__')['scale']",
    ], sources
    for change in (
        lambda: setattr(config, "n_layer", 4),  # rebound through the alias's target
        lambda: setattr(config, "scale", -1),
        lambda: setattr(config, "_spec", {"n_layer": 7}),  # the mixin answers instead
        lambda: delattr(config, "_spec"),  # back to the second state: its entry again
    ):
        change()
        assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 4
    assert not compiled.breaks


class _DictMapping:
    """A hook that answers `scale` from the instance dict under another key: its guard must
    read what the program read (`__dict__['other']`), never `__dict__['scale']`."""

    def __init__(self) -> None:
        self.scale = 2
        self.other = 5

    def __getattribute__(self, key):
        if key == "scale":
            key = "other"
        return super().__getattribute__(key)


def test_a_hook_that_maps_names_is_guarded_by_the_entry_it_read():
    obj = _DictMapping()

    def fn(a):
        return a * obj.scale

    compiled = Compiled(fn)
    assert same(compiled(x), x * 5)
    obj.scale = 100  # not what the program reads: no recompile needed, still eager's result
    assert same(compiled(x), fn(x))
    obj.other = 6
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 2
    assert "object.__getattribute__(L['obj'], '__dict__')['other']" in _guard_sources(compiled)


class _FakeDict:
    """A hook that hands out another dict as `__dict__`: guards read the real one."""

    def __init__(self) -> None:
        self.scale = 2

    def __getattribute__(self, key):
        if key == "__dict__":
            return {"scale": 0}
        return super().__getattribute__(key)


def test_a_hook_hiding_the_instance_dict_is_guarded_by_the_real_one():
    obj = _FakeDict()

    def fn(a):
        return a * obj.scale

    compiled = Compiled(fn)
    assert same(compiled(x), x * 2)
    obj.scale = 3
    assert same(compiled(x), x * 3)
    assert compiled.backend.graph_count == 2
    assert "object.__getattribute__(L['obj'], '__dict__')['scale']" in _guard_sources(compiled)


class _MissingConfig(AliasedConfig):
    """A config class of its own: the tests below change the class."""

    attribute_map: ClassVar[dict] = {"num_layers": "n_layer"}


def _fn_reading_missing_attributes(config):
    def fn(a):
        # transformers' idioms: getattr(config, name, default) and hasattr on a config
        window = getattr(config, "sliding_window", None)
        if hasattr(config, "text_config"):
            a = a + 100
        return a * (1 if window is None else window)

    return fn


def test_missing_attributes_under_a_getattribute_hook_are_guarded_without_the_hook():
    # issue 15: `not hasattr(config, name)` ran transformers' Python __getattribute__ on
    # every guard call (~1.5 us each); the trace runs the hook once and guards what it read:
    # the alias table's keys, the instance dict, the class and its lack of __getattr__
    config = _MissingConfig(2)
    fn = _fn_reading_missing_attributes(config)
    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    sources = _guard_sources(compiled)
    assert "L['config'].sliding_window" not in sources
    assert "L['config'].text_config" not in sources
    instance_dict = "object.__getattribute__(L['config'], '__dict__')"
    for expected in (
        f"{instance_dict}['sliding_window']",
        "type(L['config']).sliding_window",
        f"{instance_dict}['text_config']",
        "type(L['config']).text_config",
        "type(L['config']).__getattr__",
        "object.__getattribute__(L['config'], 'attribute_map')",  # not through the hook
    ):
        assert expected in sources, (expected, sources)
    assert not compiled.breaks


@pytest.mark.parametrize(
    "change",
    [
        lambda c: setattr(c, "sliding_window", 3),  # the instance dict
        lambda c: setattr(c, "text_config", object()),
        lambda c: setattr(type(c), "sliding_window", 5),  # the class
        lambda c: setattr(AliasedConfig, "text_config", 1),  # a base class
        lambda c: setattr(type(c), "__getattr__", lambda self, name: 7),  # a fallback
        lambda c: type(c).attribute_map.update(sliding_window="n_layer"),  # a new alias
    ],
)
def test_a_missing_attribute_that_appears_recompiles(change):
    config = _MissingConfig(2)
    fn = _fn_reading_missing_attributes(config)
    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    added = dict(vars(AliasedConfig))
    try:
        change(config)
        assert same(compiled(x), fn(x))  # eager's answer, from a new trace
        assert compiled.backend.graph_count == 2
    finally:
        for name in set(vars(AliasedConfig)) - set(added):
            delattr(AliasedConfig, name)
        _MissingConfig.attribute_map.pop("sliding_window", None)
        for name in ("sliding_window", "__getattr__"):
            if name in vars(_MissingConfig):
                delattr(_MissingConfig, name)


_SENTINEL = object()
_OTHER = object()


class Marked:
    def __init__(self, kind):
        self.kind = kind


def test_identity_of_objects_read_from_the_frame_is_guarded():
    marked = Marked(_SENTINEL)

    def fn(a):
        return a + 1 if marked.kind is _SENTINEL else a - 1  # dataclasses.fields' test

    compiled = Compiled(fn)
    assert same(compiled(x), x + 1)
    marked.kind = _OTHER
    assert same(compiled(x), x - 1)
    marked.kind = _SENTINEL
    assert same(compiled(x), x + 1)
    assert not compiled.breaks
