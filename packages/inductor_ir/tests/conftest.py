"""Test helpers: FX graphs of prims with fake-tensor metadata, and the eager oracle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_map

from ember_inductor_ir import lower, run_scheduled, schedule


class _MetaPass(torch.fx.Interpreter):
    """Run the graph on fake tensors and record each node's value in meta['val']."""

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        n.meta["val"] = result
        return result


def prim_graph(fn: Callable, *inputs: Any) -> torch.fx.GraphModule:
    gm = torch.fx.symbolic_trace(fn)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        fakes = tree_map(
            lambda x: mode.from_tensor(x) if isinstance(x, torch.Tensor) else x, list(inputs)
        )
        _MetaPass(gm).run(*fakes)
    return gm


def compile_and_run(fn: Callable, *inputs: Any) -> tuple[Any, Any, list[Any]]:
    gm = prim_graph(fn, *inputs)
    lowering = lower(gm, list(inputs))
    sched = schedule(lowering)
    return lowering, sched, run_scheduled(sched, list(inputs))


def check_against_eager(fn: Callable, *inputs: Any, atol: float = 1e-5, rtol: float = 1e-5):
    """Lower, schedule and interpret ``fn``; compare every output with eager (values, dtype,
    shape and strides). Returns (lowering, schedule)."""
    expected = fn(*inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    lowering, sched, got = compile_and_run(fn, *inputs)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=False):
        torch.testing.assert_close(g, e, atol=atol, rtol=rtol, equal_nan=True)
        if e.numel() > 1:
            assert [s for s, n in zip(g.stride(), g.shape, strict=False) if n > 1] == [
                s for s, n in zip(e.stride(), e.shape, strict=False) if n > 1
            ], (g.stride(), e.stride())
    return lowering, sched


@pytest.fixture
def check():
    return check_against_eager
