"""What a user's autograd.Function reads by name (a global, a closure cell, an attribute of
an object it names, a global of a helper it calls) is guarded: a backend that retraces the
graph with autograd keeps the value it saw, so a change must retrace, and an unchanged
value must not."""

from __future__ import annotations

import functools

import pytest
import torch

from conftest import Compiled, same

GAIN = 2.0


class Settings:
    factor = 2.0


SETTINGS = Settings()
OFFSETS = [1.0]


def _shift(t):
    return t + OFFSETS[0]


class ByGain(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * GAIN

    @staticmethod
    def backward(ctx, grad):
        return grad * GAIN * 10  # a rule of its own, reading the global too


class BySettings(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * SETTINGS.factor

    @staticmethod
    def backward(ctx, grad):
        return grad * SETTINGS.factor


class ByHelper(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _shift(x)

    @staticmethod
    def backward(ctx, grad):
        return _shift(grad)


def _with_cell(start: float):
    power = [start]

    class ByCell(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x ** power[0]

        @staticmethod
        def backward(ctx, grad):
            return grad * power[0]

    return ByCell, power


def _grads(fn, x):
    x = x.detach().clone().requires_grad_(True)
    out = fn(x)
    out.sum().backward()
    return out.detach(), x.grad


def _check(fn, change):
    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(5).abs() + 0.5
    assert same(_grads(compiled, x), _grads(fn, x))
    assert same(_grads(compiled, x), _grads(fn, x))
    assert compiled.backend.graph_count == 1  # nothing changed: no retrace
    change()
    assert same(_grads(compiled, x), _grads(fn, x))
    assert compiled.backend.graph_count == 2  # the value read changed: retraced


def test_global_read_by_forward_and_backward_is_guarded(monkeypatch):
    _check(lambda x: ByGain.apply(x), lambda: monkeypatch.setitem(globals(), "GAIN", 3.0))


def test_class_attribute_of_a_named_object_is_guarded(monkeypatch):
    _check(lambda x: BySettings.apply(x), lambda: monkeypatch.setattr(Settings, "factor", 4.0))


def test_instance_attribute_of_a_named_object_is_guarded(monkeypatch):
    monkeypatch.setattr(SETTINGS, "factor", 2.0, raising=False)
    _check(lambda x: BySettings.apply(x), lambda: setattr(SETTINGS, "factor", 5.0))


def test_list_item_read_by_a_helper_is_guarded():
    try:
        _check(lambda x: ByHelper.apply(x), lambda: OFFSETS.__setitem__(0, 7.0))
    finally:
        OFFSETS[0] = 1.0


def test_closure_cell_is_guarded():
    cls, power = _with_cell(2.0)
    _check(lambda x: cls.apply(x), lambda: power.__setitem__(0, 3.0))


def test_decorated_backward_is_followed(monkeypatch):
    def scaled(fn):
        @functools.wraps(fn)
        def wrapper(ctx, grad):
            return fn(ctx, grad)

        return wrapper

    class Decorated(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        @scaled
        def backward(ctx, grad):
            return grad * GAIN

    _check(lambda x: Decorated.apply(x), lambda: monkeypatch.setitem(globals(), "GAIN", 6.0))


def _local_class_fn(x):
    class Local(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * GAIN

        @staticmethod
        def backward(ctx, grad):
            return grad * GAIN * 3

    return Local.apply(x) + Local().apply(x)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # Local(): eager warns too
def test_globals_read_by_a_class_defined_in_the_frame_are_guarded(monkeypatch):
    _check(_local_class_fn, lambda: monkeypatch.setitem(globals(), "GAIN", 4.0))


class _FreshEachRead:
    """Makes its `box` anew on every read (its own __getattribute__)."""

    box = None

    def __getattribute__(self, name):
        if name == "box":
            return [3.0]
        return object.__getattribute__(self, name)


FRESH = _FreshEachRead()


class ByFreshBox(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * FRESH.box[0]

    @staticmethod
    def backward(ctx, grad):
        return grad * 3.0


def test_attribute_made_anew_on_each_read_does_not_retrace_every_call():
    fn = lambda x: ByFreshBox.apply(x)  # noqa: E731
    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(4)
    for _ in range(3):
        assert same(_grads(compiled, x), _grads(fn, x))
    assert compiled.backend.graph_count == 1
