"""`warnings.warn` in traced code under the default backend (issue 26): the inductor twin
of packages/bytecode_tracer/tests/tracer/test_warning_calls.py; each call warns, at eager's
location, and the function runs compiled in one graph."""

import warnings

import pytest
import torch

import ember

pytestmark = pytest.mark.usefixtures("fresh_ember")


def _deprecated_scale(x):
    warnings.warn("_deprecated_scale is deprecated", DeprecationWarning, stacklevel=2)
    return x * 3


def test_warnings_replayed_after_an_inductor_graph():
    def fn(x):
        with warnings.catch_warnings():
            y = x.cos()
        return _deprecated_scale(x).sin() + y

    x = torch.randn(8)
    compiled = ember.compile(fn, backend="inductor", fullgraph=True)
    for run in (fn, compiled, compiled):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.testing.assert_close(run(x), fn(x))
        assert [(w.category, w.lineno) for w in caught] == [(DeprecationWarning, 24)] * 2
    assert ember.counters["inductor"]["forward_graphs"] == 1
