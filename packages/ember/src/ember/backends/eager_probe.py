"""Does a torch-level graph raise when eager PyTorch runs it? Asked when a stage failed on it.

A stage that fails on a graph may be failing on the user's own error: an op eager refuses by
dtype (a float matrix times a double vector, softmax of int64), which a decomposition or meta
kernel refuses too, with its own words, at compile time. Eager is the oracle: the graph runs
once, eagerly, on clones of the example inputs (and of its own tensor constants), under the
caller's grad mode, with the RNG state restored afterwards, so that nothing the user can see
changes. If eager raises as well the error is the user's (the backend runs the graph eagerly
so that the call raises exactly as eager does); if it runs, the stage has a bug.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx


def _clone(value: Any) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    copy = value.detach().clone()
    return copy.requires_grad_() if value.requires_grad and copy.is_floating_point() else copy


class _IsolatedRun(torch.fx.Interpreter):
    """The graph's own tensors (get_attr constants, parameters) are read as clones: a graph
    that writes them in place (an optimizer step) leaves the originals untouched."""

    def get_attr(self, target: Any, args: Any, kwargs: Any) -> Any:
        return _clone(super().get_attr(target, args, kwargs))


def _devices(values: Sequence[Any]) -> list[int]:
    return sorted(
        {v.device.index or 0 for v in values if isinstance(v, torch.Tensor) and v.is_cuda}
    )


def eager_error(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Exception | None:
    """The exception eager PyTorch raises running `gm` on clones of `example_inputs`, or None
    when it runs (then a stage failing on `gm` has a bug of its own)."""
    inputs = [_clone(v) for v in example_inputs]
    with torch.random.fork_rng(devices=_devices(example_inputs)):
        try:
            _IsolatedRun(gm).run(*inputs)
        except Exception as error:  # any exception eager raises is the user's to see
            return error
    return None
