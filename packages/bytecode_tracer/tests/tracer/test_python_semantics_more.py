"""More Python semantics answered as CPython does (issue 26, classes of PyTorch's
test_functions.py): each compared with eager, in one graph."""

from __future__ import annotations

import functools

import pytest
import torch

from conftest import Compiled, same

_PARTIAL_NAMES = (
    "func", "args", "keywords", "__dict__", "__call__", "__repr__", "__reduce__",
    "__setstate__", "__class__", "__vectorcalloffset__", "__doc__",
    "__name__", "__qualname__", "__code__", "__defaults__", "__get__", "__wrapped__",
    "__globals__", "__closure__", "no_such_thing",
)  # fmt: skip


@pytest.mark.parametrize("name", _PARTIAL_NAMES)
def test_hasattr_of_a_partial_built_in_the_trace(name):
    def fn(x):
        scale = functools.partial(torch.mul, other=x)
        found = hasattr(scale, name)
        return (scale(x) if found else x - 1), found

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_attributes_of_a_partial_read_in_the_trace():
    def add3(a, b, c):
        return a + b * c

    def fn(x):
        part = functools.partial(add3, x, c=2)
        part.keywords["c"] = 5  # its own dict: the next call sees it
        return part.func(*part.args, 1, **part.keywords), part(x), len(part.args)

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_hasattr_of_a_partial_passed_in_keeps_its_own_attributes_apart():
    def fn(x, part):
        return part(x) + (1 if hasattr(part, "args") else 2) + (3 if hasattr(part, "tag") else 4)

    compiled = Compiled(fn)
    x = torch.randn(3)
    plain = functools.partial(torch.add, other=1.0)
    assert same(compiled(x, plain), fn(x, plain))
    tagged = functools.partial(torch.add, other=1.0)
    tagged.tag = 1
    assert same(compiled(x, tagged), fn(x, tagged))
