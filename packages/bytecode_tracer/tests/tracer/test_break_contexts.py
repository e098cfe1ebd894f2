"""Graph breaks around context managers (issue 26): a context object made before a break
and entered after it, a break inside grad-mode blocks, profiler blocks, and a bound
`__exit__` of a context passed in. Each matches eager, with as many graphs as there are
pieces of tensor work (no graph made of grad-mode switches alone)."""

from __future__ import annotations

import contextlib

import torch

from conftest import Compiled, same
from ember_bytecode_tracer.directives import graph_break


def test_set_grad_enabled_made_before_a_break_is_entered_after_it():
    def fn(x):
        x = x * 3
        switch = torch.set_grad_enabled(False)  # switches now, and back when the block ends
        graph_break()
        with switch:
            y = x + 1
        return y, torch.is_grad_enabled()

    x = torch.randn(4, requires_grad=True)
    compiled = Compiled(fn)
    got, mode = compiled(x)
    want, eager_mode = fn(x)
    assert same(got, want) and got.requires_grad == want.requires_grad
    assert mode == eager_mode and torch.is_grad_enabled()
    assert compiled.backend.graph_count == 2


def test_no_grad_object_and_nullcontext_live_across_a_break():
    def fn(x):
        quiet, plain = torch.no_grad(), contextlib.nullcontext(7)
        x = x.sin()
        graph_break()
        with quiet:
            a = x * 2
        with plain as seven:
            b = x + seven
        return a, b

    x = torch.randn(3, requires_grad=True)
    compiled = Compiled(fn)
    got, want = compiled(x), fn(x)
    assert same(got[0], want[0]) and same(got[1], want[1])
    assert [t.requires_grad for t in got] == [t.requires_grad for t in want] == [False, True]
    assert compiled.backend.graph_count == 2


def test_breaks_inside_nested_grad_blocks_make_no_switch_only_graphs():
    def fn(x):
        with torch.no_grad():
            graph_break()  # nothing traced before it but the switch
            with torch.enable_grad():
                x = x * 5
                graph_break()
                x = x.exp()
            inside = torch.is_grad_enabled()
        return x, inside

    x = torch.randn(3, requires_grad=True)
    compiled = Compiled(fn)
    got, inside = compiled(x)
    want, eager_inside = fn(x)
    assert same(got, want) and got.requires_grad and inside == eager_inside is False
    assert torch.is_grad_enabled()
    assert compiled.backend.graph_count == 2


def test_profiler_blocks_are_no_ops_a_break_inside_splits_the_graph():
    def fn(x):
        y = x.cos()
        with torch.profiler.profile(), torch.autograd.profiler.record_function("inner"):
            y = y * 4
            graph_break()
            y = y - 1
        return y

    x = torch.randn(5)
    compiled = Compiled(fn)
    assert same(compiled(x), fn(x))
    assert compiled.backend.graph_count == 2


def test_profiler_object_used_after_the_block_runs_the_frame_as_python():
    def fn(x):
        with torch.profiler.profile() as prof:
            y = x * 2
        return y, len(prof.key_averages()) >= 0

    x = torch.randn(2)
    compiled = Compiled(fn)
    got, ok = compiled(x)
    assert same(got, x * 2) and ok


def test_bound_exit_of_a_context_passed_in_breaks_and_resumes():
    log = []

    @contextlib.contextmanager
    def tracked(x):
        try:
            log.append("enter")
            yield x.sum()
        finally:
            log.append("exit")

    def fn(x, ctx):
        ctx.__exit__(None, None, None)
        return x.tan()

    x = torch.randn(3)
    ctx = tracked(x)
    ctx.__enter__()
    compiled = Compiled(fn)
    assert same(compiled(x, ctx), x.tan())
    assert log == ["enter", "exit"]
    assert compiled.backend.graph_count == 1


def test_grad_mode_objects_passed_in_are_entered_in_the_graph_and_guarded():
    def fn(x, ctx):
        with ctx:
            y = x * 2
        return y

    x = torch.randn(3, requires_grad=True)
    compiled = Compiled(fn, fullgraph=True)
    assert not compiled(x, torch.no_grad()).requires_grad
    assert compiled(x, torch.enable_grad()).requires_grad  # another class: retraced
    assert compiled.backend.graph_count == 2
    modes = []
    for run in (fn, compiled):
        with torch.no_grad():
            switch = torch.set_grad_enabled(True)  # made under no_grad: restores it on exit
        torch.set_grad_enabled(True)
        got = run(x, switch)
        modes.append((got.requires_grad, torch.is_grad_enabled()))
        torch.set_grad_enabled(True)
        assert same(got, x * 2)
    assert modes[0] == modes[1] == (True, False)


@torch.no_grad()
def _scaled_without_grad(x):
    return x * 2


@torch.set_grad_enabled(False)
def _shifted_without_grad(x):
    return x + 1


def test_functions_decorated_outside_the_trace_with_grad_mode_objects():
    # the decorator's wrapper makes a fresh context per call from the object it holds
    # (`self.__class__()`): one graph, the mode as in eager (Llama's rotary embedding)
    def fn(x):
        y = _scaled_without_grad(x) + _shifted_without_grad(x)
        return y, y.requires_grad, (x * 3).requires_grad

    compiled = Compiled(fn, fullgraph=True)
    x = torch.randn(3, requires_grad=True)
    got, expected = compiled(x), fn(x)
    assert same(got[0], expected[0]) and got[1:] == expected[1:] == (False, True)
    assert compiled.backend.graph_count == 1


def _hooks_message():
    return torch._C._autograd._saved_tensors_hooks_get_disabled_error_message()


def test_break_inside_disable_saved_tensors_hooks_resumes_in_the_block():
    seen = []

    def fn(x):
        with torch.autograd.graph.disable_saved_tensors_hooks("hooks off in here"):
            y = x.cos() + 1
            graph_break()
            seen.append(_hooks_message())  # Python after the break: still inside the block
            return y * 2

    x = torch.randn(5)
    expected = fn(x)
    compiled = Compiled(fn)
    for _ in range(2):
        seen.clear()
        assert same(compiled(x), expected)
        assert seen == ["hooks off in here"]
        assert _hooks_message() is None  # the block's exit ran after the resumed graph
    assert compiled.backend.graph_count == 2  # cos/add | mul: not the frame run as it is
    # each graph leaves the block at its end / enters it again at its start
    switches = ["_saved_tensors_hooks_disable", "_saved_tensors_hooks_enable"]
    assert compiled.backend.ops(0) == [switches[0], "cos", "add", switches[1]]
    assert compiled.backend.ops(1) == [switches[0], "mul", switches[1]]


def test_break_inside_disable_saved_tensors_hooks_restores_an_outer_message():
    def fn(x):
        with torch.autograd.graph.disable_saved_tensors_hooks("inner"):
            y = x.sin()
            graph_break()
            return y - 1

    x = torch.randn(5)
    torch._C._autograd._saved_tensors_hooks_disable("outer")
    try:
        expected = fn(x)
        compiled = Compiled(fn)
        assert same(compiled(x), expected)
        assert _hooks_message() == "outer"
    finally:
        torch._C._autograd._saved_tensors_hooks_enable()
    assert compiled.backend.graph_count == 2


class Announcing:
    """A user context manager whose __enter__ prints: the trace breaks at the with."""

    def __init__(self, log):
        self.log = log

    def __enter__(self):
        print("entering")  # output: a graph break inside __enter__
        self.log.append("in")
        return len(self.log)

    def __exit__(self, *exc):
        self.log.append("out")
        return False


def test_a_break_at_a_refused_with_statement_keeps_the_graph_before_it(capsys):
    def fn(x, log):
        scale = 2.0
        y = x.exp() * scale

        def bump(t):
            return t + scale  # a cell of the frame, read after the break

        with Announcing(log) as depth:
            y = bump(y) * depth
        for i in range(2):  # after the break: runs as the original code
            with Announcing(log) as depth:
                y = bump(y) * depth - i
        return y, scale

    x = torch.randn(4)
    compiled = Compiled(fn)
    log, eager_log = [], []
    got = compiled(x, log)
    want = fn(x, eager_log)
    assert same(got, want) and log == eager_log == ["in", "out"] * 3
    assert capsys.readouterr().out == "entering\n" * 6
    # the graph before the first with-statement (exp, mul) is compiled; the rest of the
    # frame runs as the original code from the with-statement on (bump's frame compiled)
    assert compiled.backend.ops(0) == ["exp", "mul"]
    assert compiled.breaks[0].reason.startswith(
        f"{Announcing!r} not supported as a traced context manager"
    )
    assert not any(code is fn.__code__ for code, _ in compiled.compiler.skipped)
