"""Test helpers: prim FX graphs with fake-tensor metadata, the lower -> schedule ->
compile_graph pipeline, and the comparison with eager (values, dtype, shape, strides)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._pytree import tree_map

from ember_codegen import compile_graph
from ember_inductor_ir import lower, schedule


class _MetaPass(torch.fx.Interpreter):
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


def compile_fn(fn: Callable, *inputs: Any, builder: Any) -> tuple[Any, Any]:
    """(schedule, compiled) of the prim function ``fn`` for these example inputs."""
    sched = schedule(lower(prim_graph(fn, *inputs), list(inputs)))
    return sched, compile_graph(sched, builder=builder)


def assert_matches(got: list, expected: list, atol: float | None, rtol: float | None) -> None:
    assert len(got) == len(expected)
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        if not isinstance(e, torch.Tensor):
            assert g == e
            continue
        assert g.dtype == e.dtype and g.shape == e.shape, (k, g.dtype, g.shape, e.dtype, e.shape)
        torch.testing.assert_close(
            g, e, atol=atol, rtol=rtol, equal_nan=True, msg=lambda m, k=k: f"output {k}: {m}"
        )
        if e.numel() > 1:
            assert [s for s, n in zip(g.stride(), g.shape, strict=True) if n > 1] == [
                s for s, n in zip(e.stride(), e.shape, strict=True) if n > 1
            ], (k, g.stride(), e.stride())
