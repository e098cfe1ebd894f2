"""User objects passed in or built in the traced code whose protocols the trace must follow as
eager does (issue 26): attribute hooks that only the trace may run, namedtuples compared and
extended as the tuples they are. Each case is one graph matching eager under the recording
backend, and runs again through `ember.compile(..., backend="inductor", fullgraph=True)`."""

from __future__ import annotations

import pytest
import torch

from conftest import Compiled, same


def one_graph_like_eager(fn, *args):
    expected = fn(*args)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(*args), expected)
    assert compiled.backend.graph_count == 1
    assert not compiled.breaks


def inductor_like_eager(fn, *args):
    ember = pytest.importorskip("ember")
    ember.reset()
    try:
        expected = fn(*args)
        assert same(ember.compile(fn, backend="inductor", fullgraph=True)(*args), expected)
        assert ember.counters["inductor"]["forward_runs"] >= 1, dict(ember.counters["inductor"])
    finally:
        ember.reset()


# ---- a class whose hooks may run only inside a compile -----------------------------------
class Renamed:
    """Stores every attribute under a prefixed name; its hooks refuse to run for real unless
    `allowed` is set (eager code sets it), so the tracer must trace them, never call them
    while it looks at the object."""

    allowed = False

    def __setattr__(self, name, value):
        if not (torch.compiler.is_compiling() or Renamed.allowed):
            raise RuntimeError(f"__setattr__({name!r}) ran outside a compile")
        object.__setattr__(self, "stored_" + name, value)

    def __getattr__(self, name):
        if not (torch.compiler.is_compiling() or Renamed.allowed):
            raise RuntimeError(f"__getattr__({name!r}) ran outside a compile")
        return self.__dict__["stored_" + name]


def _renamed(x):
    Renamed.allowed = True
    try:
        obj = Renamed()
        obj.weight = x
    finally:
        Renamed.allowed = False
    return obj


def _write_through_hooks(obj):
    obj.total = obj.weight * 2 + 1


@pytest.mark.parametrize("run", ["recording", "inductor"])
def test_attribute_hooks_are_traced_not_called_while_wrapping(run):
    x = torch.randn(6)
    eager_obj, obj = _renamed(x), _renamed(x)
    Renamed.allowed = True
    try:
        _write_through_hooks(eager_obj)
    finally:
        Renamed.allowed = False
    if run == "recording":
        compiled = Compiled(_write_through_hooks, fullgraph=True)
        compiled(obj)
        assert compiled.backend.graph_count == 1 and not compiled.breaks
    else:
        ember = pytest.importorskip("ember")
        ember.reset()
        try:
            ember.compile(_write_through_hooks, backend="inductor", fullgraph=True)(obj)
        finally:
            ember.reset()
    assert vars(obj).keys() == vars(eager_obj).keys() == {"stored_weight", "stored_total"}
    assert same(vars(obj)["stored_total"], vars(eager_obj)["stored_total"])
