"""Class statements inside a traced frame (LOAD_BUILD_CLASS, variables/class_definition.py)."""

from __future__ import annotations

import pytest
import torch

from conftest import Compiled, same
from ember_bytecode_tracer.exc import Unsupported

defined: list[str] = []


def test_unused_autograd_function_class_does_not_break_the_graph():
    # torch.masked's shape: a class defined on every call, used only on another path.
    def fn(x):
        def helper(a):
            return a * 2

        class Combine(torch.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                """Docstrings are constants in the body."""
                return helper(a)

            @classmethod
            def describe(cls):
                return "combine"

        return helper(x) + 1

    x = torch.randn(4)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1
    assert compiled.backend.ops() == ["mul", "add"]


def test_class_body_side_effects_are_replayed():
    def fn(x):
        class Plain:
            defined.append("Plain")
            size = 3

        return x.sum()

    defined.clear()
    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(4)
    assert same(compiled(x), x.sum()) and defined == ["Plain"]
    assert same(compiled(x), x.sum()) and defined == ["Plain", "Plain"]


def test_reading_a_class_attribute_builds_the_class_in_the_trace():
    def fn(x):
        class Box:
            scale = 2

        return x * Box.scale

    x = torch.randn(4)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), x * 2) and compiled.backend.graph_count == 1


def test_returning_the_class_runs_the_frame_as_is():
    def fn(x):
        class Made:
            pass

        return x + 1, Made

    x = torch.randn(4)
    got, cls = Compiled(fn)(x)
    assert same(got, x + 1) and isinstance(cls, type) and cls.__name__ == "Made"


class Registering:
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        defined.append(cls.__name__)


def test_bases_with_init_subclass_break():
    def fn(x):
        class Child(Registering):
            pass

        return x + 1

    x = torch.randn(4)
    with pytest.raises(Unsupported, match="__init_subclass__"):
        Compiled(fn, fullgraph=True)(x)
    defined.clear()
    assert same(Compiled(fn)(x), x + 1) and defined == ["Child"]
