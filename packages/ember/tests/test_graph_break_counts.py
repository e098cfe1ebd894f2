"""ember.counters["graph_break"]: how many graph breaks compiled code took, by reason.

Each break is counted once, when the tracer decides on it (the `graph_break` event of
ember_events), under the reason the logs and explain() show; a frame that then cannot be
rebuilt at the break (and runs as it is) still shows why.
"""

from __future__ import annotations

import pytest
import torch

import ember
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
