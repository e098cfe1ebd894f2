"""A compiled guard as the frame hook's guard: hits reuse the entry, misses call back."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ember_bytecode_tracer.guards import (
    CompiledGuard,
    Guard,
    GuardKind,
    LocalSource,
    compile_guards,
)

fh = pytest.importorskip("ember_frame_hook")


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


def test_compiled_guard_drives_the_cache() -> None:
    compiled: list[CompiledGuard] = []
    reasons: list[str | None] = []

    def callback(frame: Any, cache: Any) -> Any:
        if frame.f_code is not add.__code__:
            return None
        for entry in cache.entries:  # every cached guard just failed: say why
            reasons.append(entry.compiled_guard.failure_reason(frame.f_locals))
        guards = [
            Guard.from_value(LocalSource(name), GuardKind.TENSOR_MATCH, value)
            for name, value in frame.f_locals.items()
        ]
        guard = compile_guards(guards, frame.f_globals, f_locals=frame.f_locals)
        compiled.append(guard)
        entry = fh.GuardedCode(frame.f_code, guard.check)
        entry.compiled_guard = guard
        return entry

    a, b = torch.randn(2, 3), torch.randn(2, 3)
    previous = fh.set_eval_frame(callback)
    try:
        assert torch.equal(add(a, b), a + b)
        add(torch.zeros(2, 3), b)  # same metadata: a hit
        assert len(compiled) == 1
        add(a.double(), b.double())  # a miss: recompile
        assert len(compiled) == 2
        add(a, b)  # the first entry still matches
        assert len(compiled) == 2
    finally:
        fh.set_eval_frame(previous)
        fh.reset()
    assert reasons == [
        "tensor 'x' dtype mismatch. expected float32, actual float64; "
        "L['x'] is a tensor float32[2, 3] stride (3, 1) cpu requires_grad=False; "
        "got dtype: expected float32, got float64"
    ]
