"""Closures made anew by each call of their maker, passed into a compiled function: guarded
by what a call of them depends on (code, globals, defaults' shape, the cell contents and
defaults the trace reads), not by the identity of each function object, as torch.compile
guards them. A fresh closure of the same code over the same kind of values reuses the
compiled code; an int that varies in the cell turns symbolic (0 and 1 included) after the
first recompile. Where the trace uses the function object itself (an `is` test, its name),
the answer stays eager's."""

from __future__ import annotations

import pytest
import torch

import ember
from conftest import RecordingBackend


def adder(k):
    def add(t):
        return t + k

    return add


def scaler(w):
    def scale(t):
        return t * w

    return scale


def with_default(k):
    unit = 1.0  # a cell: a closure (a function without cells is guarded by identity)

    def shifted(t, by=k):
        return t - by * unit

    return shifted


def apply(t, fn):
    return fn(t).sin()


def test_fresh_closures_over_ints_compile_twice():
    backend = RecordingBackend()
    compiled = ember.compile(apply, backend=backend)
    t = torch.randn(4)
    for k in range(10):  # 0 static, then one symbolic k for every other value
        assert torch.equal(compiled(t, adder(k)), apply(t, adder(k)))
    assert len(backend.graphs) == 2


def test_fresh_closures_over_ints_under_inductor():
    compiled = ember.compile(apply)
    t = torch.randn(4)
    for k in range(6):
        torch.testing.assert_close(compiled(t, adder(k)), apply(t, adder(k)))
    assert ember.counters["inductor"]["forward_graphs"] == 2


def test_fresh_closures_over_tensors_compile_once():
    backend = RecordingBackend()
    compiled = ember.compile(apply, backend=backend)
    t = torch.randn(4)
    for _ in range(5):
        fn = scaler(torch.randn(4))
        assert torch.equal(compiled(t, fn), apply(t, fn))
    assert len(backend.graphs) == 1


def test_another_code_is_another_compile():
    backend = RecordingBackend()
    compiled = ember.compile(apply, backend=backend, dynamic=False)
    t = torch.randn(4)
    w = torch.randn(4)
    for fn in (adder(3), scaler(w), adder(3), scaler(w)):
        assert torch.equal(compiled(t, fn), apply(t, fn))
    assert len(backend.graphs) == 2


def test_defaults_of_fresh_closures_are_guarded():
    backend = RecordingBackend()
    compiled = ember.compile(apply, backend=backend, dynamic=False)
    t = torch.randn(4)
    for k in (2, 5, 2):
        assert torch.equal(compiled(t, with_default(k)), apply(t, with_default(k)))
    assert len(backend.graphs) == 2  # k=2 and k=5; the second k=2 reuses the first


def test_a_closure_mutated_after_it_was_made_is_seen():
    backend = RecordingBackend()
    compiled = ember.compile(apply, backend=backend, dynamic=False)
    t = torch.randn(4)
    fn = with_default(1)
    assert torch.equal(compiled(t, fn), apply(t, fn))
    fn.__defaults__ = (7,)
    assert torch.equal(compiled(t, fn), apply(t, fn))
    fn.__defaults__ = None  # the default gone: eager raises, so does the compiled call
    with pytest.raises(TypeError):
        apply(t, fn)
    with pytest.raises(TypeError):
        compiled(t, fn)


def same_function(t, fn, other):
    return t + 1 if fn is other else t - 1


def named(t, fn):
    return t * len(fn.__name__)


@pytest.mark.parametrize("backend", ["recording", "inductor"])
def test_identity_and_name_of_a_closure_stay_eagers(backend):
    chosen = RecordingBackend() if backend == "recording" else "inductor"
    by_identity = ember.compile(same_function, backend=chosen)
    by_name = ember.compile(named, backend=chosen)
    t = torch.randn(3)
    first, second = adder(1), adder(1)
    for fn, other in ((first, first), (second, first), (first, second), (second, second)):
        torch.testing.assert_close(by_identity(t, fn, other), same_function(t, fn, other))
    renamed = adder(1)
    renamed.__name__ = "a_much_longer_name"
    for fn in (first, renamed, second):
        torch.testing.assert_close(by_name(t, fn), named(t, fn))
