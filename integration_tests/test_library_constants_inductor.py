"""Immutable library values (versions, regular expressions, inspect signatures) answered at
trace time under the default backend (issue 26): the inductor twin of
packages/bytecode_tracer/tests/tracer/test_library_constants.py and test_inspect_signatures.py,
compared with eager and checked to have run compiled in one graph."""

from __future__ import annotations

import inspect
import re

import pytest
import torch
from packaging import version

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")

RELEASE = re.compile(r"(?P<major>\d+)\.(?P<minor>\d+)")


def test_version_checks_and_regex_matches_under_inductor():
    def fn(x):
        found = RELEASE.match(torch.__version__)
        if version.parse(torch.__version__) >= version.parse("2.0.0") and found:
            return x.sin() * int(found.group("major"))
        return x.cos()

    x = torch.randn(8)
    compiled = ember.compile(fn, backend="inductor", fullgraph=True)
    torch.testing.assert_close(compiled(x), fn(x))
    assert ember.counters["inductor"]["forward_runs"] >= 1, dict(ember.counters["inductor"])
    assert ember.counters["inductor"]["forward_graphs"] == 1


def _blend(t, weight=0.5, *rest, bias=1.0, **options):
    return t * weight + bias


def test_a_signature_binding_under_inductor():
    def fn(x):
        signature = inspect.signature(_blend)
        bound = signature.bind(x, 2.0, bias=0.25)
        bound.apply_defaults()
        if signature.parameters["weight"].default is not inspect.Parameter.empty:
            return _blend(*bound.args, **bound.kwargs).sin(), bound.arguments["bias"]
        return x, 0.0

    x = torch.randn(8)
    compiled = ember.compile(fn, backend="inductor", fullgraph=True)
    got, want = compiled(x), fn(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1]
    assert ember.counters["inductor"]["forward_graphs"] == 1
