"""Gradients of outputs the loss did not use: None where eager gives None.

Eager autograd never visits a path from an output whose gradient is absent, so a parameter
that only feeds unused outputs keeps ``grad is None`` (and an optimizer skips it). The
compiled backward is one graph over every tangent; the runtime lets autograd pass None for
absent output gradients (``set_materialize_grads(False)``) and decides per call, from which
tangents are present:

- a gradient whose tangents (those it depends on in the backward graph) are all absent is
  returned as None, as eager would;
- an absent tangent is fed to the graph as zeros of the output's shape (other gradients
  may still read it).

The dependency sets are bitmasks computed once per compiled variant; a call where every
tangent is present pays one pass over the gradients' presence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx

from ember_aot_autograd.partition.common import ancestors


def tangent_masks(bw_gm: torch.fx.GraphModule, num_saved: int) -> tuple[int, ...]:
    """For each output of `bw_gm` (saved values, then tangents -> gradients), the bitmask of
    the tangents it depends on (bit k: the k-th tangent placeholder)."""
    placeholders = [n for n in bw_gm.graph.nodes if n.op == "placeholder"]
    bit = {node: 1 << k for k, node in enumerate(placeholders[num_saved:])}
    (outputs,) = [n.args[0] for n in bw_gm.graph.nodes if n.op == "output"]
    masks = []
    for out in outputs:
        mask = 0
        for node in ancestors([out], set()):
            mask |= bit.get(node, 0)
        masks.append(mask)
    return tuple(masks)


class TangentPresence:
    """Per call: the tangents to feed the backward graph and which gradients to keep."""

    def __init__(self, tangent_outputs: Sequence[int], grad_masks: Sequence[int]) -> None:
        self.tangent_outputs = tuple(tangent_outputs)
        self.grad_masks = tuple(grad_masks)
        self._keep: dict[int, tuple[bool, ...]] = {}  # present-mask -> gradient kept

    def tangents(self, ctx: Any, grad_outputs: Sequence[Any]) -> tuple[list, int]:
        """Contiguous tangents (zeros where absent) and the bitmask of the present ones."""
        tangents = []
        present = 0
        for k, out in enumerate(self.tangent_outputs):
            grad = grad_outputs[out]
            if grad is None:
                meta = ctx._input_metadata[out]  # the forward output's shape, dtype, device
                grad = torch.zeros(meta.shape, dtype=meta.dtype, device=meta.device)
            else:
                present |= 1 << k
                grad = grad.contiguous()
            tangents.append(grad)
        return tangents, present

    def kept(self, present: int) -> tuple[bool, ...]:
        """Whether each gradient has a present tangent (one that depends on none is kept)."""
        keep = self._keep.get(present)
        if keep is None:
            keep = self._keep[present] = tuple(
                mask == 0 or bool(mask & present) for mask in self.grad_masks
            )
        return keep
