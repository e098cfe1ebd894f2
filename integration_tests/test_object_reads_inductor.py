"""A pybind11 object's C property and `type(obj).__dict__` read in compiled code, under
the default backend (issue 26): the inductor twin of
packages/bytecode_tracer/tests/tracer/test_object_reads.py."""

from __future__ import annotations

import pytest
import torch

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")


class _Table:
    offset = 2.0


_TABLE = _Table()


def test_pybind_property_and_class_dict_under_inductor():
    def fn(x, info):
        attrs = type(_TABLE).__dict__
        extra = attrs.get("offset", 0.0) + ("offset" in attrs)
        return (x.sin() + extra) * (info.num_guards_executed if info.result else -1)

    info = torch._C._dynamo.guards.GuardDebugInfo(True, ["a"], 3)
    x = torch.randn(8)
    compiled = ember.compile(fn, backend="inductor", fullgraph=True)
    torch.testing.assert_close(compiled(x, info), fn(x, info))
    assert ember.counters["inductor"]["forward_runs"] >= 1, dict(ember.counters["inductor"])
    assert ember.counters["inductor"]["forward_graphs"] == 1
