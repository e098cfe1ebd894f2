"""Reads of objects the trace reaches through a source whose answer is known now and
guarded (issue 26): a pybind11 object's C property (`def_readonly`), and a class's
`__dict__` reached as `type(obj).__dict__`. One graph each, matching eager, and another
value on a later call is another trace (integration_tests/test_object_reads_inductor.py
runs them under the default backend)."""

from __future__ import annotations

import torch

from conftest import Compiled, same

# A pybind11 class with C properties, constructible from Python.
PybindInfo = torch._C._dynamo.guards.GuardDebugInfo


def test_c_property_of_a_pybind_object():
    def fn(x, info):
        scale = info.num_guards_executed + 1
        return x.sin() * scale if info.result else x.cos() - scale

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(5)
    for info in (PybindInfo(True, ["a"], 2), PybindInfo(False, ["b"], 2), PybindInfo(True, [], 7)):
        assert same(compiled(x, info), fn(x, info))
    assert compiled.backend.graph_count == 3  # each property value read is guarded
    assert not compiled.breaks


class Registry:
    kind = "table"

    def __init__(self) -> None:
        self.size = 3


REGISTRY = Registry()


def test_class_dict_through_type_of_an_object():
    def fn(x):
        attrs = type(REGISTRY).__dict__
        if "kind" in attrs and "missing" not in attrs:
            return x + len(attrs["kind"])
        return x - 1

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(4)
    assert same(compiled(x), fn(x))
    del Registry.kind
    try:  # the class's keys are guarded: this is another trace
        assert same(compiled(x), fn(x))
    finally:
        Registry.kind = "table"
    assert compiled.backend.graph_count == 2 and not compiled.breaks
