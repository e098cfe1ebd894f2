"""FrameCompiler(guard_fail_fn=...): a recompile hands the callback one GuardFailure (the
frame's code, and the failed guard in the recompile log's words) before it traces again."""

from __future__ import annotations

import pytest
import torch

import ember_frame_hook as fh
from ember_bytecode_tracer.convert_frame import FrameCompiler
from ember_bytecode_tracer.guard_failures import GuardFailure


def _scale(x: torch.Tensor, k: float) -> torch.Tensor:
    return (x + 1) * k


def test_the_callback_sees_each_recompile_and_nothing_else():
    graphs, seen = [], []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiler = FrameCompiler(backend, guard_fail_fn=seen.append)
    args = [(torch.ones(3), 2.0), (torch.ones(3), 2.0), (torch.ones(3, dtype=torch.float64), 2.0)]
    with fh.eval_frame(compiler):
        got = [_scale(*a) for a in args]
    for g, a in zip(got, args, strict=True):
        torch.testing.assert_close(g, _scale(*a))
    assert len(graphs) == 2 and len(compiler.records) == 2
    assert seen == [GuardFailure(compiler.records[1].recompile_reason, _scale.__code__)]
    assert "float32" in seen[0].reason and "float64" in seen[0].reason


def test_a_callback_that_is_not_callable_is_a_type_error():
    with pytest.raises(TypeError, match="guard_fail_fn must be a function"):
        FrameCompiler(lambda gm, inputs: gm.forward, guard_fail_fn=42)
