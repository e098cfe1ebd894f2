"""An object passed in whose class defines `__call__` (or another dunder) as a staticmethod
or a classmethod: Python binds it at the type (no instance, or the class), and so does the
trace (torch's `comptime(fn)` is such an object: a no-op outside Dynamo)."""

from __future__ import annotations

import torch

from conftest import Compiled, same


class Scaler:
    factor = 3

    @staticmethod
    def __call__(t, extra=0.0):
        return t * 2 + extra

    @classmethod
    def __getitem__(cls, t):
        return t * cls.factor


class NoOpHook:
    @staticmethod
    def __call__(fn, fallback=lambda: None):
        fallback()


SCALER = Scaler()
HOOK = NoOpHook()


def test_a_staticmethod_call_is_bound_without_the_instance():
    def fn(x):
        return SCALER(x, extra=1.0) + SCALER[x]

    x = torch.randn(4)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 1


def test_a_class_attribute_read_by_the_classmethod_is_guarded():
    def fn(x):
        return SCALER[x]

    x = torch.randn(4)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), x * 3)
    Scaler.factor = 5
    try:
        assert same(compiled(x), x * 5)
    finally:
        Scaler.factor = 3


def test_a_no_op_hook_object_runs_its_fallback_only():
    def fn(x):
        HOOK(lambda ctx: ctx.fail())
        return x.sin()

    x = torch.randn(4)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), fn(x))
    assert compiled.backend.ops() == ["sin"]
