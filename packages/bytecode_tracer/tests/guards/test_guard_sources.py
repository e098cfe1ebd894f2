"""Sources: expressions, roots, hashing, and reading live values."""

from __future__ import annotations

import builtins
import copy
import pickle

import pytest
import torch

from ember_bytecode_tracer.guards import (
    AttrSource,
    BuiltinSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    TorchStateSource,
    TypeSource,
)
from ember_bytecode_tracer.guards.sources import builtins_of


class Holder:
    def __init__(self) -> None:
        self.layers = [torch.nn.Linear(2, 2), torch.nn.Linear(2, 3)]
        self.table = {"a": 1, 2: "two", ("k", 1): 3}
        setattr(self, "not an identifier", 7)
        setattr(self, "class", 8)


def test_expressions() -> None:
    self_ = LocalSource("self")
    assert self_.expr() == "L['self']"
    assert GlobalSource("torch").expr() == "G['torch']"
    assert AttrSource(GlobalSource("torch"), "nn").expr() == "G['torch'].nn"
    weight = AttrSource(ItemSource(AttrSource(self_, "layers"), 0), "weight")
    assert weight.expr() == "L['self'].layers[0].weight"
    assert str(weight) == weight.expr()
    assert TypeSource(self_).expr() == "type(L['self'])"
    assert (
        AttrSource(self_, "not an identifier").expr() == "getattr(L['self'], 'not an identifier')"
    )
    assert AttrSource(self_, "class").expr() == "getattr(L['self'], 'class')"
    assert ItemSource(self_, ("k", 1)).expr() == "L['self'][('k', 1)]"
    assert BuiltinSource("len").expr() == "B['len']"
    assert TorchStateSource("grad_enabled").expr() == "torch.is_grad_enabled()"


def test_roots_and_depth() -> None:
    weight = AttrSource(ItemSource(AttrSource(LocalSource("self"), "layers"), 0), "weight")
    assert weight.is_local()
    assert weight.root() == LocalSource("self")
    assert weight.depth() == 3
    assert not AttrSource(GlobalSource("torch"), "nn").is_local()
    assert not BuiltinSource("len").is_local()
    assert not TorchStateSource("grad_enabled").is_local()


def test_hashable_and_equal_by_value() -> None:
    a = AttrSource(ItemSource(LocalSource("x"), 1), "y")
    b = AttrSource(ItemSource(LocalSource("x"), 1), "y")
    assert a == b and hash(a) == hash(b)
    assert len({a, b, AttrSource(ItemSource(LocalSource("x"), 2), "y")}) == 2
    assert LocalSource("x") != GlobalSource("x")


def test_hash_is_kept_but_never_copied_out() -> None:
    """A source's hash is computed once (a chain's walks the chain); a pickled or copied
    source carries no hash, which another process would compute otherwise."""
    source = AttrSource(ItemSource(AttrSource(LocalSource("self"), "layers"), 3), "weight")
    first = hash(source)
    assert source.__dict__["_hash"] == first and hash(source) == first
    copied = pickle.loads(pickle.dumps(source))
    assert "_hash" not in copied.__dict__ and copied == source and hash(copied) == first
    assert "_hash" not in copy.deepcopy(source).__dict__
    assert repr(source) == repr(copied) and "_hash" not in repr(source)


def test_get_matches_the_expression() -> None:
    holder = Holder()
    f_locals = {"self": holder}
    f_globals = {"torch": torch, "__builtins__": builtins}
    scope = {"L": f_locals, "G": f_globals, "B": builtins.__dict__, "torch": torch}
    sources = [
        AttrSource(ItemSource(AttrSource(LocalSource("self"), "layers"), 1), "weight"),
        ItemSource(AttrSource(LocalSource("self"), "table"), ("k", 1)),
        ItemSource(AttrSource(LocalSource("self"), "table"), 2),
        AttrSource(LocalSource("self"), "not an identifier"),
        AttrSource(LocalSource("self"), "class"),
        TypeSource(LocalSource("self")),
        AttrSource(GlobalSource("torch"), "nn"),
        BuiltinSource("len"),
        TorchStateSource("grad_enabled"),
    ]
    for source in sources:
        assert source.get(f_locals, f_globals) is eval(source.expr(), scope)


def test_get_raises_like_the_expression() -> None:
    with pytest.raises(AttributeError):
        AttrSource(LocalSource("x"), "missing").get({"x": 1}, {})
    with pytest.raises(IndexError):
        ItemSource(LocalSource("x"), 3).get({"x": [1]}, {})
    with pytest.raises(KeyError):
        LocalSource("nope").get({}, {})


def test_builtins_follow_the_globals() -> None:
    assert builtins_of({}) is builtins.__dict__
    assert builtins_of({"__builtins__": builtins}) is builtins.__dict__
    custom = {"len": len}
    assert builtins_of({"__builtins__": custom}) is custom


def test_bad_keys_and_names_are_typed_errors() -> None:
    with pytest.raises(TypeError, match="ItemSource key"):
        ItemSource(LocalSource("d"), object())
    with pytest.raises(TypeError, match="ItemSource key"):
        ItemSource(LocalSource("d"), float("nan"))
    with pytest.raises(TypeError, match="attr must be a str"):
        AttrSource(LocalSource("d"), 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown torch state"):
        TorchStateSource("flux_capacitor")
