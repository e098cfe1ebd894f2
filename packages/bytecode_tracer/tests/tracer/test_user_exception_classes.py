"""A user's exception class that keeps BaseException's construction (`class Refused(
Exception): pass`) raised and caught in a trace, as builtin ones are (issue 26: library code
such as torch.testing raises one and catches it to try the next case)."""

from __future__ import annotations

import pytest
import torch

from conftest import Compiled, same


class Refused(Exception):
    """Raised to try the next way."""


class NarrowRefused(Refused):
    pass


class WithState(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _first_that_works(x, ways):
    for way in ways:
        try:
            chosen = way(x.dim())  # Python work only: tensor ops stay out of a try
        except Refused:
            continue
        return chosen(x)
    raise ValueError("no way")


def _refuses(ndim):
    raise Refused


def _refuses_narrowly(ndim):
    raise NarrowRefused("not this one")


def _sine(ndim):
    return torch.sin


def test_a_user_exception_raised_and_caught_in_the_trace():
    def fn(x):
        return _first_that_works(x, (_refuses, _refuses_narrowly, _sine)) + 1

    x = torch.randn(3)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), fn(x))
    assert compiled.backend.ops() == ["sin", "add"]


def test_an_except_clause_that_does_not_match_lets_it_through():
    def fn(x):
        try:
            try:
                raise Refused("outer")
            except KeyError:
                return x - 1
        except Refused:
            return x + 1

    x = torch.randn(3)
    compiled = Compiled(fn, fullgraph=True)
    assert same(compiled(x), fn(x))


def test_uncaught_it_reaches_the_caller_as_eager_raises_it():
    def fn(x):
        y = x * 2
        if y.dim() == 1:
            raise NarrowRefused("shape", 1)
        return y

    x = torch.randn(3)
    with pytest.raises(NarrowRefused) as caught:
        Compiled(fn)(x)
    assert type(caught.value) is NarrowRefused and caught.value.args == ("shape", 1)


def test_a_class_with_its_own_init_is_still_run_by_python():
    def fn(x):
        try:
            raise WithState(3)
        except WithState as exc:
            return x + exc.code

    x = torch.randn(3)
    assert same(Compiled(fn)(x), fn(x))
