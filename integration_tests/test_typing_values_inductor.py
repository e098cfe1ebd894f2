"""Typing objects read and built in traced code, under the default backend (issue 26): the
inductor twin of packages/bytecode_tracer/tests/tracer/test_typing_values.py, compared with
eager and checked to have run compiled in one graph."""

# The typing spellings (typing.List, Optional, Union) are what these tests are about.
# ruff: noqa: UP006, UP045

from __future__ import annotations

import collections.abc
import typing

import pytest
import torch

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")


def _accepts(value, hint) -> bool:
    origin = typing.get_origin(hint)
    if origin is typing.Union:
        return any(_accepts(value, option) for option in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if origin is collections.abc.Callable:
        return callable(value)
    return isinstance(value, origin or hint)


HINTS = {"mode": typing.Optional[str], "hook": typing.Optional[typing.Callable[[int], int]]}


def test_typing_validation_and_aliases_under_inductor():
    def fn(x):
        ok = _accepts("single", HINTS["mode"]) and _accepts(None, HINTS["hook"])
        alias = collections.abc.Callable[[int], float]
        n = len(typing.get_args(alias)) + len(typing.get_args(typing.Dict[str, int]))
        return (x.sin() + n) if ok else x.cos()

    x = torch.randn(8)
    compiled = ember.compile(fn, backend="inductor", fullgraph=True)
    torch.testing.assert_close(compiled(x), fn(x))
    assert ember.counters["inductor"]["forward_runs"] >= 1, dict(ember.counters["inductor"])
    assert ember.counters["inductor"]["forward_graphs"] == 1  # fullgraph: one graph, no break


# (the functional form: real types, where this module's annotations are strings)
_Options = typing.NamedTuple("_Options", [("width", int), ("label", typing.Optional[str])])  # noqa: UP014


def test_get_type_hints_under_inductor():
    def fn(x):
        hints = typing.get_type_hints(_Options)
        optional = sum(type(None) in typing.get_args(h) for h in hints.values())
        return x.cos() * (optional + len(hints))

    x = torch.randn(8)
    compiled = ember.compile(fn, backend="inductor", fullgraph=True)
    torch.testing.assert_close(compiled(x), fn(x))
    assert ember.counters["inductor"]["forward_graphs"] == 1
