"""Backends that compile for the example inputs they are handed (a user's backend built on an
ahead-of-time tracer, an exporter): given a graph with symbolic sizes they would bake the
example's sizes and ints in. Unless they declare `symbolic_sizes`, Ember compiles such a graph
with them once per concrete size signature: one trace, values equal to eager for every size.
"""

from __future__ import annotations

import functools
import logging

import pytest
import torch
import torch.fx

import ember
from ember.backends import handles_symbolic_sizes, per_size, symbolic_sizes
from ember.exc import BackendCompilerFailed
from ember.stats import counters


class Specializing:
    """Runs the graph on its example inputs and replaces every Python number it computes
    (sizes read from tensors, int inputs) by that constant, in the graph it was given: what
    an ahead-of-time tracer does to a graph it traces with concrete inputs."""

    def __init__(self):
        self.calls = []

    def __call__(self, gm, example_inputs):
        self.calls.append([tuple(e.shape) if torch.is_tensor(e) else e for e in example_inputs])
        values = {}

        class Record(torch.fx.Interpreter):
            def run_node(self, node):
                values[node] = super().run_node(node)
                return values[node]

        Record(gm).run(*example_inputs)
        for node in gm.graph.nodes:
            if node.op != "output" and type(values[node]) in (int, float):
                for user in list(node.users):
                    _bake(user, node, values[node])
        gm.recompile()
        return gm.forward


def _bake(user, node, value):
    def swap(n):
        return value if n is node else n

    user.args = torch.fx.node.map_arg(user.args, swap)
    user.kwargs = torch.fx.node.map_arg(user.kwargs, swap)


def scale_by_length(x):
    return x.reshape(-1, 2).sum(0) * x.shape[0]


def add_alpha(x, a):
    return torch.add(x, x, alpha=a)


class Counting:
    def __init__(self):
        self.calls = 0

    def __call__(self, gm, example_inputs):
        self.calls += 1
        return gm.forward


def _frames(compiled):
    return len(compiled._ember_compiler.records)


@pytest.fixture(autouse=True)
def _untold(monkeypatch):
    monkeypatch.setattr(per_size, "_told", set())  # the once-per-backend log, per test


def test_specializing_backend_is_wrong_without_per_size_compiles():
    """The test backend does bake sizes in: called directly with one size's inputs, its
    callable is wrong at another (what Ember's wrapper protects against)."""
    gm = torch.fx.symbolic_trace(scale_by_length)
    run = Specializing()(gm, [torch.ones(4)])
    assert not torch.equal(run(torch.ones(6)), scale_by_length(torch.ones(6)))


@pytest.mark.parametrize("backend_name", ["user", "inductor"])
def test_sizes_changing_under_default_settings(backend_name):
    user = Specializing()
    compiled = ember.compile(
        scale_by_length, backend=user if backend_name == "user" else "inductor"
    )
    for n in (4, 6, 8, 6, 4, 8, 10):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x), scale_by_length(x))
    assert _frames(compiled) == 2  # static at 4, then one symbolic trace for every size
    if backend_name == "user":
        # 4 (the static graph), then the symbolic graph once per new size: 6, 8, then 4 (the
        # newer symbolic entry is tried first), 10
        assert [c[0] for c in user.calls] == [(4,), (6,), (8,), (4,), (10,)]
        assert counters["per_size"]["graphs"] == 1 and counters["per_size"]["compiles"] == 4
    else:
        assert counters["per_size"]["graphs"] == 0


@pytest.mark.parametrize("backend_name", ["user", "inductor"])
def test_int_alpha_under_dynamic(backend_name):
    user = Specializing()
    backend = user if backend_name == "user" else "inductor"
    compiled = ember.compile(add_alpha, backend=backend, dynamic=True)
    x = torch.randn(3)
    for a in (2, 3, 5, 3, 2):
        torch.testing.assert_close(compiled(x, a), add_alpha(x, a))
    assert _frames(compiled) == 1
    if backend_name == "user":
        assert [c[1] for c in user.calls] == [2, 3, 5]


def test_declared_backend_is_called_once():
    counting = symbolic_sizes(Counting())
    compiled = ember.compile(scale_by_length, backend=counting, dynamic=True)
    for n in (4, 6, 8):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x), scale_by_length(x))
    assert counting.calls == 1 and _frames(compiled) == 1
    assert counters["per_size"]["graphs"] == 0


def test_undeclared_recording_backend_is_called_per_size():
    counting = Counting()
    compiled = ember.compile(scale_by_length, backend=counting, dynamic=True)
    for n in (4, 6, 8, 4):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x), scale_by_length(x))
    assert counting.calls == 3 and _frames(compiled) == 1


def test_registered_backends_declare_by_name():
    declared, undeclared = Counting(), Counting()
    ember.register_backend("test_declared_sizes", declared, symbolic_sizes=True)
    ember.register_backend("test_undeclared_sizes", undeclared)
    assert handles_symbolic_sizes("test_declared_sizes")
    assert not handles_symbolic_sizes("test_undeclared_sizes")
    for name in ("eager", "aot_eager", "inductor", "autotune"):
        assert handles_symbolic_sizes(name), name
        assert handles_symbolic_sizes(ember.lookup_backend(name)), name  # passed as a callable
    assert handles_symbolic_sizes(declared) and not handles_symbolic_sizes(undeclared)
    assert handles_symbolic_sizes(
        functools.partial(ember.lookup_backend("inductor"), settings=None)
    )
    for name in ("test_declared_sizes", "test_undeclared_sizes"):
        compiled = ember.compile(add_alpha, backend=name, dynamic=True)
        for a in (2, 3, 4):
            torch.testing.assert_close(compiled(torch.ones(3), a), add_alpha(torch.ones(3), a))
    assert declared.calls == 1 and undeclared.calls == 3


def test_register_backend_reads_the_marker():
    marked = symbolic_sizes(Counting())
    ember.register_backend("test_marked_sizes", marked)
    assert handles_symbolic_sizes("test_marked_sizes")
    ember.register_backend("test_marked_sizes", marked, symbolic_sizes=False)  # overrides
    assert not handles_symbolic_sizes("test_marked_sizes")


def test_marker_on_a_bound_method_and_as_decorator():
    class Holder:
        def compile(self, gm, example_inputs):
            return gm.forward

    marked = symbolic_sizes(Holder().compile)  # bound methods take no attributes: a wrapper
    assert handles_symbolic_sizes(marked) and not handles_symbolic_sizes(Holder().compile)

    @symbolic_sizes
    def plain(gm, example_inputs):
        return gm.forward

    assert handles_symbolic_sizes(plain)
    with pytest.raises(ember.exc.InvalidBackendError):
        symbolic_sizes(3)


def test_static_graphs_go_to_the_backend_as_they_are():
    seen = []

    def backend(gm, example_inputs):
        seen.append(gm)
        return gm.forward

    compiled = ember.compile(scale_by_length, backend=backend, dynamic=False)
    for n in (4, 6):
        compiled(torch.randn(n))
    records = compiled._ember_compiler.records
    assert seen == [r.graphs[0] for r in records] and len(seen) == 2
    assert counters["per_size"]["graphs"] == 0


def test_the_compiles_are_a_bounded_lru(monkeypatch, caplog):
    monkeypatch.setattr(per_size, "MAX_SIZE_COMPILES", 2)
    user = Specializing()
    compiled = ember.compile(scale_by_length, backend=user, dynamic=True)
    with caplog.at_level(logging.WARNING, logger="ember.backends"):
        for n in (4, 6, 4, 8, 6, 10, 12):
            x = torch.randn(n)
            torch.testing.assert_close(compiled(x), scale_by_length(x))
    # 4, 6; 4 hit; 8 evicts 6; 6 again evicts 4; 10 evicts 8; 12 evicts 6
    assert [c[0][0] for c in user.calls] == [4, 6, 8, 6, 10, 12]
    assert counters["per_size"]["evictions"] == 4
    warnings = [r for r in caplog.records if "size signatures" in r.getMessage()]
    assert len(warnings) == 1
    assert _frames(compiled) == 1


def test_logs_once_per_backend_how_to_declare(caplog):
    user = Specializing()
    with caplog.at_level(logging.INFO, logger="ember.backends"):
        for fn in (scale_by_length, lambda x: scale_by_length(x) + 1):
            compiled = ember.compile(fn, backend=user, dynamic=True)
            compiled(torch.randn(4))
            compiled(torch.randn(6))
    told = [r for r in caplog.records if "symbolic_sizes" in r.getMessage()]
    assert len(told) == 1 and told[0].levelno == logging.INFO


def test_a_backend_failing_on_a_new_size():
    def fails_on_six(gm, example_inputs):
        if example_inputs[0].shape[0] == 6:
            raise RuntimeError("no kernel for 6")
        return gm.forward

    compiled = ember.compile(scale_by_length, backend=fails_on_six, dynamic=True)
    torch.testing.assert_close(compiled(torch.ones(4)), scale_by_length(torch.ones(4)))
    with pytest.raises(BackendCompilerFailed, match="no kernel for 6"):
        compiled(torch.ones(6))
    ember.reset()
    ember.config.suppress_errors = True
    try:
        compiled = ember.compile(scale_by_length, backend=fails_on_six, dynamic=True)
        compiled(torch.ones(4))
        torch.testing.assert_close(compiled(torch.ones(6)), scale_by_length(torch.ones(6)))
    finally:
        ember.config.suppress_errors = False
