"""ember.counters["graph_break"]: how many graph breaks compiled code took, by reason.

Each break is counted once, when the tracer decides on it (the `graph_break` event of
ember_events), under the reason the logs and explain() show; a frame that then cannot be
rebuilt at the break (and runs as it is) still shows why. A break at a with-statement whose
context manager the trace refuses keeps the graph before it, and names the manager's class.
"""

from __future__ import annotations

import contextlib
import io
import sys

import pytest
import torch

import ember
from conftest import RecordingBackend
from ember_events import subscribe, unsubscribe

BACKENDS = ["eager", "inductor"]


def two_breaks(x):
    y = x.cos() + 1
    ember.graph_break()
    y = y * x
    ember.graph_break()
    return y.sum()


def graph_count(compiled) -> int:
    return sum(len(r.graphs) for r in compiled._ember_compiler.records)


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_break_is_counted_under_its_reason(backend):
    compiled = ember.compile(two_breaks, backend=backend)
    x = torch.randn(5)
    torch.testing.assert_close(compiled(x), two_breaks(x))
    assert graph_count(compiled) == 3
    (reason,) = ember.counters["graph_break"]
    assert "graph_break" in reason
    assert ember.counters["graph_break"][reason] == 2
    # a call that reuses the compiled code breaks no new trace: nothing more is counted
    torch.testing.assert_close(compiled(x), two_breaks(x))
    assert ember.counters["graph_break"][reason] == 2
    ember.reset()
    assert not ember.counters["graph_break"]


def test_a_subscriber_sees_each_break_as_it_is_decided():
    seen = []

    def listen(reason, location, user_stack):
        seen.append((reason, location, len(ember.counters["graph_break"])))

    subscribe("graph_break", listen)
    try:
        ember.compile(two_breaks, backend="eager")(torch.randn(3))
    finally:
        unsubscribe("graph_break", listen)
    assert len(seen) == 2
    first, second = seen
    assert first[1].endswith(f":{two_breaks.__code__.co_firstlineno + 2}")
    assert second[1].endswith(f":{two_breaks.__code__.co_firstlineno + 4}")
    ember.compile(two_breaks, backend="eager")(torch.randn(3, 2))  # unsubscribed: not seen
    assert len(seen) == 2


def redirected(x, sink):
    y = x.sin()
    with contextlib.redirect_stdout(sink):  # sets sys.stdout: the trace refuses it
        print("inside")
        y = y + x.cos()
    return y.tanh()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_refused_context_manager_keeps_the_graph_before_it(backend):
    recorder = RecordingBackend()
    compiled = ember.compile(redirected, backend=recorder if backend == "eager" else backend)
    x = torch.randn(6)
    sink, expected_sink = io.StringIO(), io.StringIO()
    expected = redirected(x, expected_sink)
    torch.testing.assert_close(compiled(x, sink), expected)
    assert sink.getvalue() == expected_sink.getvalue() == "inside\n"
    # the graph before the with-statement is compiled (it was all eager before); the rest
    # of the frame, from the with-statement on, runs as Python
    assert graph_count(compiled) == 1
    if backend == "eager":
        (gm,) = recorder.graphs
        assert [n.target for n in gm.graph.nodes if n.op == "call_method"] == ["sin"]
    (reason,) = ember.counters["graph_break"]
    assert "<class 'contextlib.redirect_stdout'> not supported" in reason
    # a second call runs the compiled code: eager's output again, no new break
    sink = io.StringIO()
    torch.testing.assert_close(compiled(x, sink), expected)
    assert sink.getvalue() == "inside\n"
    assert ember.counters["graph_break"][reason] == 1


def raises_in_refused_block(x, sink):
    y = x * 3
    with contextlib.redirect_stdout(sink):
        raise ValueError(f"bad {y.shape[0]}")


def test_an_exception_in_the_block_after_the_break_leaves_as_in_eager():
    compiled = ember.compile(raises_in_refused_block, backend="inductor")
    before = sys.stdout
    with pytest.raises(ValueError, match="bad 4"):
        compiled(torch.randn(4), io.StringIO())
    assert sys.stdout is before  # the with-statement's __exit__ ran
    assert graph_count(compiled) == 1


def profiled_then_read(x):
    with torch.profiler.profile() as prof:
        pass
    prof.key_averages()  # the profiler traced as a no-op cannot be used after the block
    return x + 1


def test_a_break_whose_frame_then_runs_as_python_is_still_counted():
    compiled = ember.compile(profiled_then_read, backend="inductor")
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x + 1)
    assert graph_count(compiled) == 0  # the frame ran as Python (and profiled)
    (reason,) = ember.counters["graph_break"]
    assert "profiler" in reason
