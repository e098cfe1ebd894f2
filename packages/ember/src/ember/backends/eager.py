"""`eager`: runs the captured torch-level graph as is (checks the tracer alone)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ember.backends.registry import register_backend


@register_backend("eager", symbolic_sizes=True)
def eager(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable:
    """Runs the captured graph as is."""
    return gm.forward
