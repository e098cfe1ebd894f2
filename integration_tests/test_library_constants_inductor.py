"""Immutable library values answered at trace time under the default backend (issue 26):
the inductor twin of packages/bytecode_tracer/tests/tracer/test_library_constants.py,
compared with eager and checked to have run compiled in one graph."""

from __future__ import annotations

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
