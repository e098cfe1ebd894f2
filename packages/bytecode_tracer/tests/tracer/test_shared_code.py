"""Compiled code is shared by FrameCompilers with the same backend and options.

Oracle: torch.compile reuses a cache entry for a second wrapper with the same backend (the
cache lives on the code object); eager gives the values.
"""

from __future__ import annotations

import torch

import ember_frame_hook as fh
from conftest import CountingBackend
from ember_bytecode_tracer.convert_frame import FrameCompiler


def step(x, w):
    y = torch.relu(x @ w) + 1
    if y.sum() > 0:  # a graph break: the resume function's code is shared too
        y = y * 2
    return y.sin()


def run(compiler, *args):
    with fh.eval_frame(compiler):
        return step(*args)


def inputs(n=4):
    g = torch.Generator().manual_seed(n)
    return torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)


def test_same_backend_and_options_compile_once():
    backend = CountingBackend()
    first, second = FrameCompiler(backend), FrameCompiler(backend)
    args = inputs()
    torch.testing.assert_close(run(first, *args), step(*args))
    compiled = backend.graph_count
    assert compiled >= 2 and len(first.records) >= 2  # the frame and its resume function
    torch.testing.assert_close(run(second, *args), step(*args))
    assert backend.graph_count == compiled, "the second compiler traced again"
    assert second.records == [] and len(second.reused) == len(first.records)
    # each runs its own entries from then on: no further compiles, guards still checked
    torch.testing.assert_close(run(second, *args), step(*args))
    torch.testing.assert_close(run(first, *args), step(*args))
    assert backend.graph_count == compiled
    other = inputs(6)  # new sizes: the guards fail, one compiler compiles, the other reuses
    torch.testing.assert_close(run(second, *other), step(*other))
    torch.testing.assert_close(run(first, *other), step(*other))
    assert len(second.records) >= 1 and len(first.reused) == len(second.records)


def test_torch_compile_shares_as_well():
    calls = []

    def backend(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    def add(x):
        return torch.cos(x) + 1

    torch._dynamo.reset()
    x = torch.randn(3)
    torch.compile(add, backend=backend)(x)
    torch.compile(add, backend=backend)(x)
    assert len(calls) == 1
    torch._dynamo.reset()


def test_other_backend_or_options_compile_again():
    backend, other = CountingBackend(), CountingBackend()
    args = inputs()
    run(FrameCompiler(backend), *args)
    compiled = backend.graph_count
    torch.testing.assert_close(run(FrameCompiler(other), *args), step(*args))
    assert other.graph_count == compiled
    for options in ({"dynamic": True}, {"dynamic": False}, {"suppress_errors": True}):
        counting = CountingBackend()
        compiler = FrameCompiler(backend, **options)
        compiler.backend = counting  # same key as `backend`'s, counted apart
        torch.testing.assert_close(run(compiler, *args), step(*args))
        assert counting.graph_count == compiled, options


def test_fullgraph_never_takes_code_with_breaks():
    backend = CountingBackend()
    args = inputs()
    run(FrameCompiler(backend), *args)
    strict = FrameCompiler(backend, fullgraph=True)
    try:
        run(strict, *args)
    except Exception as exc:  # the branch on a value is a graph break: refused
        assert "fullgraph" in str(exc) or "branch" in str(exc), exc
    else:
        raise AssertionError("fullgraph=True ran another compiler's code with a break")


def test_equal_backends_of_one_type_share():
    class Configured:
        def __init__(self, level):
            self.level, self.graphs = level, []

        def __eq__(self, other):
            return self.level == other.level

        __hash__ = None

        def __call__(self, gm, example_inputs):
            self.graphs.append(gm)
            return gm.forward

    a, b, c = Configured(1), Configured(1), Configured(2)
    args = inputs()
    run(FrameCompiler(a), *args)
    torch.testing.assert_close(run(FrameCompiler(b), *args), step(*args))
    torch.testing.assert_close(run(FrameCompiler(c), *args), step(*args))
    assert len(a.graphs) >= 2 and b.graphs == [] and len(c.graphs) == len(a.graphs)
