"""A model the user dropped is freed (issue 26): cache entries live as long as the code
they were compiled for, so they hold the classes and objects their guards pin weakly
where those can die (guards/weak_pins.py), and an entry whose object died makes room."""

from __future__ import annotations

import gc
import weakref

import torch
from torch import nn

import ember_frame_hook as fh
from conftest import Compiled, same


def _model_of_local_class(layer: nn.Module) -> nn.Module:
    """A model whose class is made here and reaches `layer` through its closure only."""

    class Wrapper(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = layer

        def forward(self, x):
            return self.inner(x).relu() + 1

    return Wrapper()


def _run_and_drop(make_model, freed: list[str], compiled_counts: list[int]) -> None:
    layer = nn.Linear(6, 6)
    weakref.finalize(layer, freed.append, "layer")
    model = make_model(layer)
    weakref.finalize(type(model), freed.append, "class")
    compiled = Compiled(model)
    x = torch.randn(3, 6)
    assert same(compiled(x), model(x))
    compiled_counts.append(compiled.backend.graph_count)


def test_dropped_model_of_a_local_class_is_freed():
    freed: list[str] = []
    counts: list[int] = []
    _run_and_drop(_model_of_local_class, freed, counts)
    gc.collect()
    assert counts == [1]
    assert sorted(freed) == ["class", "layer"]


def test_dropped_parameter_is_freed():
    freed: list[str] = []

    def run() -> None:
        weight = nn.Parameter(torch.randn(4, 4))
        weakref.finalize(weight, freed.append, "weight")

        class Scale(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.weight = weight

            def forward(self, x):
                return self.weight * x

        model = Scale()
        compiled = Compiled(model)
        x = torch.randn(4, 4)
        assert same(compiled(x), model(x))
        assert compiled.backend.graph_count == 1

    run()
    gc.collect()
    assert freed == ["weight"]


def test_function_pinned_by_identity_is_freed():
    """A function made in a function, called through a global-free closure cell, is
    guarded by identity: the entry must not keep it (or what it closes over) alive."""
    freed: list[str] = []

    def run() -> None:
        big = torch.randn(8)
        weakref.finalize(big, freed.append, "captured")

        def helper(x):
            return x + big

        def fn(x, f):
            return f(x) * 2

        compiled = Compiled(fn)
        x = torch.randn(8)
        assert same(compiled(x, helper), fn(x, helper))

    run()
    gc.collect()
    assert freed == ["captured"]


def test_entries_of_freed_objects_make_room_in_a_full_cache():
    """Each round builds a new model of a new local class for the same forward code; with
    the old ones freed their entries can never run again, so the limit does not count them
    and every round compiles (before: the cache filled and the code ran eagerly)."""
    old_limit = fh.get_cache_limit()
    fh.set_cache_limit(2)
    try:
        freed: list[str] = []
        counts: list[int] = []
        for _ in range(5):
            _run_and_drop(_model_of_local_class, freed, counts)
            gc.collect()
        assert counts == [1] * 5
        assert freed.count("class") == 5
    finally:
        fh.set_cache_limit(old_limit)


def test_entry_of_a_freed_class_never_matches_again():
    """The guard of a freed class fails for any value: a new object that took the freed
    one's id must not run code compiled for the old one."""
    layer = nn.Linear(2, 2)
    model = _model_of_local_class(layer)
    compiled = Compiled(model)
    x = torch.randn(1, 2)
    assert same(compiled(x), model(x))
    (record,) = [r for r in compiled.compiler.records if r.guards is not None]
    assert record.guards(dict(self=model, x=x))
    assert record.guards.native(dict(self=model, x=x))
    cls = type(model)
    del model, compiled
    gc.collect()
    cls.forward = None  # the class is otherwise alive only in this test: drop it
    del cls
    gc.collect()
    stranger = nn.Linear(2, 2)
    assert not record.guards(dict(self=stranger, x=x))
    assert not record.guards.native(dict(self=stranger, x=x))
    assert "freed since the trace" in record.guards.failure_reason(dict(self=stranger, x=x))


def test_guard_of_a_freed_object_differs_from_a_new_ones():
    """Two identity guards on one source are the same guard only while they pin the same
    live object: a new object that took a freed one's id gets a guard of its own."""
    from ember_bytecode_tracer.guards import Guard, GuardKind, LocalSource

    source = LocalSource("m")
    first = nn.Linear(1, 1)
    old = Guard.from_value(source, GuardKind.ID_MATCH, first)
    assert old == Guard.from_value(source, GuardKind.ID_MATCH, first)
    assert old.weak_ref() is not None
    del first
    gc.collect()
    assert old.expected is not None and not isinstance(old.expected, nn.Module)
    second = nn.Linear(1, 1)
    assert old != Guard.from_value(source, GuardKind.ID_MATCH, second)
