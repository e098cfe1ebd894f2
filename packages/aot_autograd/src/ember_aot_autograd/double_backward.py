"""A backward run under create_graph=True (`torch.autograd.grad(..., create_graph=True)`,
a double backward): gradients that carry autograd history, as eager's do.

The compiled backward graph computes values only: its saved tensors were made by the
compiled forward without history, so its gradients cannot be differentiated again. Under
create_graph the wrapper instead runs the traced function eagerly on the call's own inputs
(with autograd) and differentiates that with create_graph=True: the gradients then hold the
history eager's hold, and their own gradients are eager's second derivatives.

Where that recomputation would differ from the forward that ran, it is refused: a graph that
draws random numbers (the recomputation would draw others), a graph that writes its inputs
(the writes would happen twice), an input written since the forward (eager's backward raises
for a saved tensor so written), or no eager function at hand. A refused backward returns the
compiled gradients marked so that differentiating them raises, naming the reason (as
`once_differentiable` does), never values silently detached from their inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._C import _functions
from torch.utils._pytree import tree_leaves

from ember_aot_autograd.outputs import FromGraph
from ember_aot_autograd.plan import RunnerPlan


class EagerRecompute:
    """The create_graph backward of one training variant; `fn` (the traced function) may
    be given after construction (a variant loaded from an artifact cache)."""

    def __init__(self, plan: RunnerPlan, fn: Callable | None = None) -> None:
        self.plan = plan
        self.fn = fn
        n_mutated = len(plan.mutated_inputs)
        self.graph_outputs = [  # (output leaf position, forward output) per graph output
            (position, n_mutated + leaf.index)
            for position, leaf in enumerate(plan.output_spec.leaves)
            if isinstance(leaf, FromGraph)
        ]

    def refusal(self, primals: Sequence[Any], versions: Sequence[int]) -> str | None:
        if self.fn is None:
            return "the traced function is not at hand (a variant loaded from a cache)"
        if self.plan.draws_random:
            return "the graph draws random numbers (a recomputation would draw others)"
        if self.plan.mutated_inputs:
            return "the graph writes its inputs (a recomputation would write them again)"
        tensors = [p for p in primals if isinstance(p, torch.Tensor)]
        if any(p._version != v for p, v in zip(tensors, versions, strict=True)):
            return "an input of the graph was written in place after the forward ran"
        return None

    def grads(
        self, args: Sequence[Any], primals: Sequence[Any], grad_outputs: Sequence[Any]
    ) -> list[torch.Tensor | None] | None:
        """Gradients for the plan's grad slots, with history; None if the recomputed
        outputs do not line up with the compiled ones."""
        with torch.enable_grad():
            leaves = tree_leaves(self.fn(*args))
        if len(leaves) != len(self.plan.output_spec.leaves):
            return None
        outputs, tangents, seen = [], [], set()
        for position, forward_output in self.graph_outputs:
            value, tangent = leaves[position], grad_outputs[forward_output]
            if forward_output in seen or tangent is None:
                continue
            seen.add(forward_output)
            if isinstance(value, torch.Tensor) and value.requires_grad:
                outputs.append(value)
                tangents.append(tangent)
        inputs = [primals[slot] for slot in self.plan.grad_slots]
        if not outputs:
            return [None] * len(inputs)
        return list(
            torch.autograd.grad(outputs, inputs, tangents, create_graph=True, allow_unused=True)
        )


def differentiating_raises(grads: Sequence[Any], reason: str) -> tuple:
    """`grads` (no history) marked as requiring grad, through a node whose backward raises
    with `reason`: the caller sees eager's requires_grad, never a silent detach."""
    message = (
        "differentiating the gradient of an Ember-compiled graph (create_graph=True) is not "
        f"supported here: {reason}; run this function eagerly for higher-order gradients"
    )
    error = _functions.DelayedError(message.encode(), len(grads))

    def marked(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        value = value.detach()
        value.requires_grad_(True)
        return value

    out = error(*[marked(g) for g in grads])
    return (out,) if isinstance(out, torch.Tensor) else tuple(out)
