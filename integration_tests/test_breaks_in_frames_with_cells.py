"""A graph break in a function whose own variables are cells (closed over by a function it
makes): the rewritten frame keeps its cells, the resume function closes over them, and a
function made before the break is rebuilt over those same cells, so it sees what the frame
assigns after the break, and its writes reach the frame, as in eager. The frame is compiled
in pieces (a graph before the break and one after it), not run uncompiled."""

from __future__ import annotations

import pytest
import torch

import ember
import ember_frame_hook as fh
from ember.backends.registry import lookup_backend

BACKENDS = ["eager", "inductor"]


def _counted(fn, backend):
    graphs = []
    inner = lookup_backend(backend)

    def record(gm, example_inputs):
        graphs.append(gm)
        return inner(gm, example_inputs)

    return ember.compile(fn, backend=record), graphs


def reads_a_cell_assigned_after_the_break(x):
    def late():
        return x * factor

    y = x.sin()
    print(end="")  # a graph break; `factor` is not assigned yet
    factor = 3.0
    return late() + y


def writes_a_cell_on_both_sides_of_a_tensor_branch(x):
    total = x.cos()

    def add(v):
        nonlocal total
        total = total + v

    add(x)
    if total.sum() > 1e6:  # a branch on a tensor: a graph break
        total = total * 0
    total = total - 1
    return total * 2


def returns_a_function_made_before_the_break(x):
    scale = x.abs() + 1

    def apply(v):
        return v * scale

    print(end="")
    scale = scale * 2  # seen by `apply`, which shares the cell
    return apply


def _result(fn, x):
    out = fn(x)
    return out(torch.ones_like(x)) if callable(out) else out


# The graphs each makes: before the break, after it; a function made before the break and
# called after it shares the resume function's own cells, so its call is a break of its
# own (the resume function reads those cells as its locals) and it compiles as a frame.
CASES = {
    reads_a_cell_assigned_after_the_break: 3,
    writes_a_cell_on_both_sides_of_a_tensor_branch: 2,
    returns_a_function_made_before_the_break: 2,
}


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("backend", BACKENDS)
def test_break_in_a_frame_with_cells_matches_eager(fn, backend):
    ember.reset()
    compiled, graphs = _counted(fn, backend)
    x = torch.randn(5)
    for _ in range(2):
        torch.testing.assert_close(_result(compiled, x), _result(fn, x))
    assert len(fh.cache_entries(fn.__code__)) == 1  # the frame compiled, not skipped
    assert len(graphs) == CASES[fn]


@pytest.mark.parametrize("backend", BACKENDS)
def test_closure_made_before_the_break_writes_the_frames_cell(backend):
    def fn(x):
        count = 0

        def bump():
            nonlocal count
            count += 1

        y = x + 1
        print(end="")
        bump()
        bump()
        return y * count

    ember.reset()
    compiled, graphs = _counted(fn, backend)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), fn(x))
    assert len(fh.cache_entries(fn.__code__)) == 1
    # before the break, and the rest (bump writes the resume function's own cell: its
    # calls are breaks, run as frames of their own, not inlined over a stale copy)
    assert len(graphs) == 2
