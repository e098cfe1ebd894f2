"""Global-state queries and context managers in compiled code (issue 26, PyTorch's
test_ctx_manager.py): compiled under `inductor` (and `aot_eager`), compared with eager,
with graph counts checked so that a silent fallback fails."""

from __future__ import annotations

import contextlib

import pytest
import torch

import ember
from ember_bytecode_tracer.directives import graph_break

BACKENDS = ["aot_eager", "inductor"]


pytestmark = pytest.mark.usefixtures("fresh_ember")


def _graphs(backend: str) -> int:
    return ember.counters[backend]["forward_graphs"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_profiler_state_query_retraces_under_the_profiler(backend):
    def fn(x):
        if torch.autograd._profiler_enabled():
            return x * 3
        return x - 1

    compiled = ember.compile(fn, backend=backend, fullgraph=True)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), fn(x))
    with torch.autograd.profiler.profile():
        torch.testing.assert_close(compiled(x), fn(x))
    torch.testing.assert_close(compiled(x), fn(x))
    assert ember.counters[backend]["forward_runs"] >= 3, dict(ember.counters[backend])
    assert _graphs(backend) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_deterministic_mode_query_retraces(backend):
    def fn(x):
        return x + 1 if torch.are_deterministic_algorithms_enabled() else x.sin()

    compiled = ember.compile(fn, backend=backend, fullgraph=True)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), fn(x))
    torch.use_deterministic_algorithms(True)
    try:
        torch.testing.assert_close(compiled(x), fn(x))
    finally:
        torch.use_deterministic_algorithms(False)
    assert _graphs(backend) == 2


class ModeSwitch:
    def __init__(self, mode):
        self.saved = torch.is_grad_enabled()
        self.mode = mode

    def __enter__(self):
        torch._C._set_grad_enabled(self.mode)

    def __exit__(self, kind, value, tb):
        torch._C._set_grad_enabled(self.saved)


@contextlib.contextmanager
def mode_switch(mode):
    saved = torch.is_grad_enabled()
    try:
        yield torch._C._set_grad_enabled(mode)
    finally:
        torch._C._set_grad_enabled(saved)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("switch", [ModeSwitch, mode_switch], ids=["class", "generator"])
def test_users_grad_switching_contexts_in_one_graph(backend, switch):
    def fn(x):
        with switch(False):
            y = x.sin() * 2 if not torch.is_grad_enabled() else x
        z = x.cos() * y
        return z + 1

    x = torch.randn(6, requires_grad=True)
    expected = fn(x)
    got = ember.compile(fn, backend=backend, fullgraph=True)(x)
    torch.testing.assert_close(got, expected)
    got.sum().backward()
    grad, x.grad = x.grad, None
    expected.sum().backward()
    torch.testing.assert_close(grad, x.grad)
    assert _graphs(backend) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_context_managers_as_decorators_in_one_graph(backend):
    def fn(x):
        @torch.no_grad()
        def frozen(a):
            return a * 3

        @torch.autograd.graph.disable_saved_tensors_hooks("not here")
        def plain(a, b):
            return a + b

        with torch.set_grad_enabled(False):

            @torch.set_grad_enabled(True)
            def tracked(a):
                return a.exp()

        return plain(frozen(x), tracked(x))

    x = torch.randn(6, requires_grad=True)
    expected = fn(x)
    got = ember.compile(fn, backend=backend, fullgraph=True)(x)
    torch.testing.assert_close(got, expected)
    assert got.requires_grad == expected.requires_grad
    assert _graphs(backend) == 1


@torch.compiler.disable
def _run_as_is(x):
    return x * 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiler_directives_split_the_graph(backend):
    def fn(x):
        y = x.sin()
        graph_break()
        y = _run_as_is(y.cos())
        return y + 1

    x = torch.randn(6)
    torch.testing.assert_close(ember.compile(fn, backend=backend)(x), fn(x))
    assert _graphs(backend) == 3  # sin | cos | add: none for _run_as_is's own frame


@contextlib.contextmanager
def _tally_on_exit(log):
    try:
        yield len(log)
    finally:
        log.append("exit")


@pytest.mark.parametrize("backend", BACKENDS)
def test_generator_finally_with_effects_around_graph_ops(backend):
    def fn(x, log):
        with _tally_on_exit(log) as n:
            y = x.sin() + n
        return y * 2

    log: list[str] = []
    compiled = ember.compile(fn, backend=backend, fullgraph=True)
    x = torch.randn(5)
    torch.testing.assert_close(compiled(x, log), fn(x, []))
    assert log == ["exit"]
    assert _graphs(backend) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_disable_saved_tensors_hooks_in_the_graph_and_across_a_break(backend):
    # The switches are graph nodes; the AOT stage traces without them (they would refuse
    # its own saved-tensor hooks) and the runner keeps the state across the break.
    from ember_bytecode_tracer.directives import graph_break

    def fn(x):
        with torch.autograd.graph.disable_saved_tensors_hooks("off"):
            y = x.sin() * x
            graph_break()
            return y.cos()

    x = torch.randn(6, requires_grad=True)
    expected = fn(x)
    out = ember.compile(fn, backend=backend)(x)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    grad = x.grad.clone()
    x.grad = None
    expected.sum().backward()
    torch.testing.assert_close(grad, x.grad)
    assert torch._C._autograd._saved_tensors_hooks_get_disabled_error_message() is None
    assert _graphs(backend) == 2
