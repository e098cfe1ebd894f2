"""Helpers of the Triton target tests: compile prim functions through lower -> schedule ->
compile_graph(target="triton") and compare with eager (values, dtype, shape, strides)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prim_helpers import assert_matches, prim_graph

from ember_codegen import compile_graph
from ember_inductor_ir import lower, schedule


def compile_triton_fn(fn: Callable, *inputs: Any, **options: Any) -> tuple[Any, Any]:
    sched = schedule(lower(prim_graph(fn, *inputs), list(inputs), target="triton"))
    return sched, compile_graph(sched, target="triton", **options)


def check(fn: Callable, *inputs: Any, atol: float | None = None, rtol: float | None = None,
          **options: Any) -> Any:  # fmt: skip
    """Compile ``fn`` for Triton, run it twice, compare every output with eager."""
    expected = fn(*inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    _, compiled = compile_triton_fn(fn, *inputs, **options)
    for _ in range(2):
        assert_matches(compiled(list(inputs)), expected, atol, rtol)
    return compiled
