"""copy.deepcopy / copy.copy in a trace (variables/object_copy.py): copies made from the
trackers of the original's state (guarded), objects with Python attribute hooks (the shape of
transformers' strict configs), `del obj.attr`, setattr/delattr, and dicts keyed by classes."""

from __future__ import annotations

import copy
from typing import ClassVar

import pytest
import torch

from conftest import Compiled

x = torch.randn(4, 3)


class Config:
    def __init__(self, layers=2, scale=1.5):
        self.layers = layers
        self.scale = scale
        self.names = ["a", "b"]
        self.table = {"mode": "sum"}


class AliasedConfig:
    """Attribute aliases in Python hooks, a validated __setattr__ and a to_dict that deep
    copies the instance dict (transformers' PreTrainedConfig in miniature)."""

    attribute_map: ClassVar[dict] = {"num_layers": "layers"}
    kind = "aliased"

    def __init__(self):
        self.layers = 2
        self.decoder_layers = 3
        self.decoder_scale = 0.5

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        if key == "layers" and not isinstance(value, int):
            raise TypeError("layers must be an int")
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def to_dict(self):
        output = copy.deepcopy(self.__dict__)
        if hasattr(self.__class__, "kind"):
            output["kind"] = self.__class__.kind
        return output

    def decoder_view(self):
        view = copy.deepcopy(self)
        for key in view.to_dict():
            if key.startswith("decoder_"):
                new_key = key[len("decoder_") :]
                if new_key == "layers":
                    new_key = "num_layers"
                value = getattr(view, key)
                delattr(view, key)
                setattr(view, new_key, value)
        return view


def test_deepcopy_of_an_argument_mutated_in_the_trace_leaves_the_original_alone():
    def fn(t, config):
        c = copy.deepcopy(config)
        c.layers = c.layers + 1
        c.names.append("c")
        c.table["mode"] = "mean"
        del c.scale
        out = t * c.layers * len(c.names)
        return out.sum() if c.table["mode"] == "sum" else out.mean(), hasattr(c, "scale")

    config = Config()
    compiled = Compiled(fn, fullgraph=True)
    got = compiled(x, config)
    expected = fn(x, Config())
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] is expected[1] is False
    assert compiled.backend.graph_count == 1
    assert (config.layers, config.scale, config.names, config.table) == (
        2,
        1.5,
        ["a", "b"],
        {"mode": "sum"},
    )


def test_the_copy_depends_on_the_original_through_guards():
    def fn(t, config):
        c = copy.deepcopy(config)
        return t * c.layers + len(c.names)

    config = Config()
    compiled = Compiled(fn)
    torch.testing.assert_close(compiled(x, config), fn(x, config))
    config.layers = 5
    torch.testing.assert_close(compiled(x, config), fn(x, config))
    config.names.append("z")
    torch.testing.assert_close(compiled(x, config), fn(x, config))
    config.extra = 1  # a new key in the instance dict
    torch.testing.assert_close(compiled(x, config), fn(x, config))
    assert compiled.backend.graph_count == 4


def test_a_write_earlier_in_the_trace_is_in_the_copy():
    def fn(t, config):
        config.layers = 7
        c = copy.deepcopy(config)
        return t * c.layers

    compiled = Compiled(fn, fullgraph=True)
    config = Config()
    torch.testing.assert_close(compiled(x, config), x * 7)
    assert config.layers == 7


def test_copy_with_python_attribute_hooks_and_del():
    def fn(t, config):
        view = config.decoder_view()
        return t * view.num_layers + view.scale, view.layers, hasattr(view, "decoder_layers")

    config = AliasedConfig()
    compiled = Compiled(fn, fullgraph=True)
    got = compiled(x, config)
    expected = fn(x, config)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:] == (3, False)
    assert compiled.backend.graph_count == 1
    assert vars(config) == {"layers": 2, "decoder_layers": 3, "decoder_scale": 0.5}


def test_the_hooks_validation_error_is_not_lost():
    def fn(t, config):
        c = copy.deepcopy(config)
        c.num_layers = "two"  # the __setattr__ hook raises TypeError
        return t + 1

    with pytest.raises(TypeError, match="layers must be an int"):
        Compiled(fn)(x, AliasedConfig())


def test_a_copy_returned_is_rebuilt_distinct_from_the_original():
    def fn(t, config):
        c = copy.deepcopy(config)
        c.layers = 4
        return t + 1, c

    config = Config()
    compiled = Compiled(fn, fullgraph=True)
    out, c = compiled(x, config)
    assert c is not config and type(c) is Config
    assert (c.layers, c.names, c.table) == (4, ["a", "b"], {"mode": "sum"})
    assert c.names is not config.names
    torch.testing.assert_close(out, x + 1)


def test_shallow_copy_shares_its_parts():
    def fn(t, config):
        c = copy.copy(config)
        c.names.append("c")  # the original's list: a side effect replayed after the graph
        c.layers = 9
        return t * len(config.names) + c.layers

    config = Config()
    compiled = Compiled(fn, fullgraph=True)
    torch.testing.assert_close(compiled(x, config), x * 3 + 9)
    assert config.names == ["a", "b", "c"] and config.layers == 2


def test_deepcopy_of_containers_in_the_trace():
    def fn(t):
        inner = [1, 2]
        d = {"a": inner, "b": inner, "c": (3, inner)}
        e = copy.deepcopy(d)
        e["a"].append(5)  # shared in the original, shared in the copy
        return t * (len(e["b"]) + len(e["c"][1]) + len(inner))

    compiled = Compiled(fn, fullgraph=True)
    torch.testing.assert_close(compiled(x), fn(x))


class CustomCopy(Config):
    def __deepcopy__(self, memo):
        return Config(layers=self.layers * 10)


@pytest.mark.parametrize(
    "make, reason",
    [
        (CustomCopy, "__deepcopy__"),
        (lambda: torch.ones(2), "Tensor"),
    ],
)
def test_what_cannot_be_copied_in_the_trace_is_a_graph_break(make, reason):
    def fn(t, value):
        c = copy.deepcopy(value)
        return t + 1, c

    compiled = Compiled(fn)
    value = make()
    out, c = compiled(x, value)
    torch.testing.assert_close(out, x + 1)
    expected = fn(x, value)[1]
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(c, expected)
    else:
        assert c.layers == expected.layers == 20
    assert any(reason in b.reason for b in compiled.breaks), compiled.breaks


def test_deleting_an_attribute_of_a_real_object_is_a_graph_break():
    def fn(t, config):
        del config.scale
        return t + 1

    config = Config()
    compiled = Compiled(fn)
    torch.testing.assert_close(compiled(x, config), x + 1)
    assert not hasattr(config, "scale")
    # no deletion replay: the frame runs as plain Python (a break it cannot resume from)
    assert compiled.breaks or any("DELETE_ATTR" in str(s) for s in compiled.compiler.skipped)


def _double(v):
    return v * 2


def _negate(v):
    return -v


HANDLERS = {int: _double, float: _negate}


def test_a_dict_keyed_by_classes_is_guarded_by_key_identity():
    def fn(t, v):
        return t * HANDLERS.get(type(v))(v)

    compiled = Compiled(fn, fullgraph=True)
    torch.testing.assert_close(compiled(x, 3), x * 6)
    torch.testing.assert_close(compiled(x, 1.5), x * -1.5)
    HANDLERS[int] = _negate
    try:
        torch.testing.assert_close(compiled(x, 3), x * -3)
    finally:
        HANDLERS[int] = _double
    del HANDLERS[float]
    HANDLERS[bool] = _negate  # same length, another class at that position
    try:
        assert compiled(x, True).equal(fn(x, True))
    finally:
        del HANDLERS[bool]
        HANDLERS[float] = _negate


class Pair:
    def __init__(self, shared: bool):
        self.a = []
        self.b = self.a if shared else []
        self.other = Config()
        self.again = self.other if shared else Config()


@pytest.mark.parametrize("first_shared", [True, False])
def test_parts_shared_or_distinct_in_the_original_are_so_in_the_copy(first_shared):
    def fn(t, pair):
        c = copy.deepcopy(pair)
        c.a.append(1)
        c.other.layers = 10
        return t * len(c.b) + c.again.layers

    compiled = Compiled(fn)
    for shared in (first_shared, not first_shared, first_shared):
        pair = Pair(shared)
        torch.testing.assert_close(compiled(x, pair), fn(x, Pair(shared)))
        assert pair.a == [] and pair.other.layers == 2


@pytest.mark.parametrize("how", ["statement", "setattr"])
def test_a_write_to_a_real_object_goes_through_its_python_setattr(how):
    def fn(t, config):
        if how == "statement":
            config.num_layers = 5  # the hook stores it as `layers`
        else:
            setattr(config, "num_layers", 5)  # noqa: B010  (the builtin is what is tested)
        return t * config.layers

    compiled = Compiled(fn, fullgraph=True)
    config = AliasedConfig()
    torch.testing.assert_close(compiled(x, config), x * 5)
    assert vars(config) == {"layers": 5, "decoder_layers": 3, "decoder_scale": 0.5}
