"""User objects passed in or built in the traced code whose protocols the trace must follow as
eager does (issue 26): attribute hooks that only the trace may run, namedtuples compared and
extended as the tuples they are. Each case is one graph matching eager under the recording
backend, and runs again through `ember.compile(..., backend="inductor", fullgraph=True)`."""

from __future__ import annotations

import dataclasses
import typing

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


# ---- namedtuples as the tuples they are ------------------------------------------------
class Span(typing.NamedTuple):
    start: int
    stop: int


class TaggedSpan(Span):  # a subclass without __slots__: its instances have a __dict__
    pass


class ReversedEqualSpan(Span):
    def __eq__(self, other):
        return tuple(reversed(self)) == tuple(other)

    __hash__ = Span.__hash__


def test_namedtuple_built_in_the_trace_compares_and_concatenates_as_a_tuple():
    def fn(x):
        s = Span(1, 2)
        checks = (s == (1, 2), s != (1, 2), s < (1, 3), (1, 2) == s, s + (3,), (0,) * 2 + s)  # noqa: SIM300, RUF005
        return x * s.stop, checks

    one_graph_like_eager(fn, torch.randn(3))
    inductor_like_eager(fn, torch.randn(3))


def test_namedtuple_passed_in_compares_as_a_tuple():
    def fn(x, s):
        return (x + 1) if s == (4, 5) else (x - 1)

    one_graph_like_eager(fn, torch.randn(3), Span(4, 5))
    one_graph_like_eager(fn, torch.randn(3), Span(4, 6))
    inductor_like_eager(fn, torch.randn(3), Span(4, 5))


def test_namedtuple_with_its_own_eq_runs_it():
    def fn(x):
        return x + 1, ReversedEqualSpan(1, 2) == (2, 1)

    one_graph_like_eager(fn, torch.randn(3))


@pytest.mark.parametrize("run", ["recording", "inductor"])
def test_attribute_set_on_a_passed_in_namedtuple_subclass(run):
    def fn(s, x):
        s.extra = x * s.start
        return s.extra + 1

    x = torch.randn(4)
    eager_span, span = TaggedSpan(3, 4), TaggedSpan(3, 4)
    expected = fn(eager_span, x)
    if run == "recording":
        compiled = Compiled(fn, fullgraph=True)
        assert same(compiled(span, x), expected)
        assert compiled.backend.graph_count == 1 and not compiled.breaks
    else:
        ember = pytest.importorskip("ember")
        ember.reset()
        try:
            assert same(ember.compile(fn, backend="inductor", fullgraph=True)(span, x), expected)
        finally:
            ember.reset()
    assert same(span.extra, eager_span.extra) and span == eager_span


def test_writing_a_namedtuple_field_is_a_break():
    def fn(s, x):
        s.start = 7
        return x + 1

    compiled = Compiled(fn)
    x = torch.randn(2)
    with pytest.raises(AttributeError):
        compiled(TaggedSpan(1, 2), x)


# ---- equality of objects built in the trace -----------------------------------------------
@dataclasses.dataclass
class Point:
    row: int
    col: float = 0.5


class OnlyEqualsItsKind:
    def __init__(self, tag):
        self.tag = tag

    def __eq__(self, other):
        if not isinstance(other, OnlyEqualsItsKind):
            return NotImplemented
        return self.tag == other.tag


def test_dataclass_equality_runs_its_generated_eq():
    def fn(x):
        checks = (Point(1) == Point(1), Point(1) != Point(2), Point(1) == Point(1, 0.25))
        return x + 1, checks

    one_graph_like_eager(fn, torch.randn(2))
    inductor_like_eager(fn, torch.randn(2))


def test_eq_falls_back_to_identity_when_both_sides_answer_not_implemented():
    def fn(x):
        p, q = Point(1), OnlyEqualsItsKind("a")
        checks = (p == 5, 5 == p, p != "a", q == 3, q != None, q == OnlyEqualsItsKind("a"))  # noqa: E711, SIM300
        return x - 1, checks, (5).__class__ is p.__class__

    one_graph_like_eager(fn, torch.randn(2))
    inductor_like_eager(fn, torch.randn(2))


# ---- f-strings of a user's object: its Python __str__ / __repr__ / __format__ run ---------
class Labelled:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"label:{self.name}"

    def __repr__(self):
        return f"Labelled({self.name!r})"


class Padded:
    def __format__(self, spec):
        return "<" + spec + ">"


LABEL = Labelled("w")


def _formatted_texts(x):
    made = Labelled("m")
    text = f"{LABEL} {LABEL!r} {made} {made!s} {Padded():>4} {LABEL!s:>12}"
    return x * len(text), text


def test_fstrings_run_the_objects_python_text_methods():
    one_graph_like_eager(_formatted_texts, torch.randn(3))


def test_fstrings_of_user_objects_under_inductor():
    inductor_like_eager(_formatted_texts, torch.randn(3))
