"""options={"guard_filter_fn": ...}: the guards a user drops are not checked, as under
torch.compile (whose behaviour on the same code is the reference: the trade is unsafe by
design, a dropped guard's value is baked in)."""

from __future__ import annotations

import pytest
import torch

import ember
from ember.exc import EmberError

OFFSET = 1


def _add_offset(x: torch.Tensor) -> torch.Tensor:
    return x + OFFSET


def _run_twice(compile_fn, options) -> list[torch.Tensor]:
    global OFFSET
    compiled = compile_fn(_add_offset, fullgraph=True, options=options)
    x = torch.ones(3)
    OFFSET = 1
    first = compiled(x)
    OFFSET = 2
    try:
        return [first, compiled(x)]
    finally:
        OFFSET = 1


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_dropped_global_guard_bakes_the_global_in_as_torch_compile_does(backend) -> None:
    ember.reset()
    options = {"guard_filter_fn": torch.compiler.skip_guard_on_globals_unsafe}
    got = _run_twice(lambda f, **kw: ember.compile(f, backend=backend, **kw), options)
    torch._dynamo.reset()
    want = _run_twice(lambda f, **kw: torch.compile(f, backend="eager", **kw), options)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
    torch.testing.assert_close(got[1], torch.full((3,), 2.0))  # stale: OFFSET was 1
    if backend == "inductor":
        assert ember.counters["inductor"]["forward_graphs"] == 1


def test_without_a_filter_the_global_is_guarded() -> None:
    ember.reset()
    got = _run_twice(lambda f, **kw: ember.compile(f, backend="inductor", **kw), None)
    torch.testing.assert_close(got[1], torch.full((3,), 3.0))
    assert ember.counters["inductor"]["forward_graphs"] == 2


class _Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(4)
        self.c = 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) * self.c


def test_module_guards_dropped_by_torch_compilers_helper_keep_one_graph() -> None:
    ember.reset()
    module = _Scaled()
    compiled = ember.compile(
        module, options={"guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe}
    )
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), module(x))
    module.c = 3  # not rechecked: the graph of c == 2 runs on
    torch.testing.assert_close(compiled(x), module.norm(x) * 2)
    assert ember.counters["inductor"]["forward_graphs"] == 1


def test_a_guard_filter_that_is_not_a_function_is_refused() -> None:
    with pytest.raises(EmberError, match="guard_filter_fn"):
        ember.compile(_add_offset, options={"guard_filter_fn": 3})
