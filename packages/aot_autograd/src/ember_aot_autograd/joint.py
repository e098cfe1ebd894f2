"""The joint trace: forward and backward (through autograd) in one functional graph.

Placeholders are the primals (the tensor inputs) then one tangent per differentiable forward
output; outputs are the forward outputs (new values of written inputs, then the function's
tensor outputs) followed by one gradient per input that requires grad (None when unused).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from ember_aot_autograd.saved_values import SavedValues
from ember_aot_autograd.session import TraceInfo, TraceSession
from ember_aot_autograd.tracer import DecompositionTable


@dataclass
class JointGraph:
    gm: torch.fx.GraphModule
    info: TraceInfo
    tangent_outputs: list[int]  # forward outputs (by position) that receive a tangent
    grad_inputs: list[int]  # function inputs whose gradients the joint graph returns
    # (bitmask of tangents, message): eager's backward raises `message` when one of those
    # tangents is present (a saved tensor was written in place; saved_values.py)
    stale_saved: tuple[tuple[int, str], ...] = ()

    @property
    def num_primals(self) -> int:
        return len(self.info.tensor_inputs)

    @property
    def num_fw_outputs(self) -> int:
        return self.info.num_fw_outputs


def _differentiable(tensor: torch.Tensor) -> bool:
    if not isinstance(tensor, torch.Tensor):  # a scalar output read from a tensor (item())
        return False
    return tensor.requires_grad and (tensor.is_floating_point() or tensor.is_complex())


def trace_joint(
    fn: Callable,
    example_inputs: Sequence[Any],
    decompositions: DecompositionTable | None = None,
    *,
    strict: bool = False,
    requires_grad: Sequence[bool] | None = None,
    shape_env: Any = None,
) -> JointGraph:
    """Traces forward and backward of `fn(*example_inputs)` into one joint graph.

    `requires_grad` says which inputs get gradients (default: the example inputs' own flags).
    """
    if requires_grad is None:
        requires_grad = [isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs]
    session = TraceSession(decompositions, strict, shape_env)
    tracer = session.tracer
    inputs = session.make_inputs(example_inputs, requires_grad, "primals")
    saved = SavedValues(tracer)
    with session.fake_mode, session.dispatch():
        with tracer, torch.enable_grad(), saved.hooks():
            output = fn(*inputs)
        collected = session.collect(output)
        # forward outputs: the new values of written inputs (differentiable when the write
        # involved values requiring grad), then the function's tensor outputs
        forward_tensors = [*(inputs[i] for i in collected.mutated_inputs), *collected.user_tensors]
        # a written input whose history is still its entry alias was written under no_grad
        # (an optimizer step): its new value is no differentiable output
        written_under_no_grad = {
            k
            for k, i in enumerate(collected.mutated_inputs)
            if i in session.entry_grad_fns and inputs[i].grad_fn is session.entry_grad_fns[i]
        }
        tangent_outputs = [
            k
            for k, t in enumerate(forward_tensors)
            if _differentiable(t) and k not in written_under_no_grad
        ]
        grad_inputs = [i for i in session.grad_leaves if _differentiable(inputs[i])]
        anchor = [n for n in tracer.graph.nodes if n.op == "placeholder"][-1]
        tangents = []
        for number, position in enumerate(tangent_outputs):
            out = forward_tensors[position]
            tangent = torch.empty(out.shape, dtype=out.dtype, device=out.device)
            anchor = tracer.add_placeholder_after(tangent, f"tangents_{number}", anchor)
            tangents.append(tangent)
        grads: Sequence[torch.Tensor | None] = [None] * len(grad_inputs)
        if tangents and grad_inputs:
            with tracer:
                grads = torch.autograd.grad(
                    [forward_tensors[p] for p in tangent_outputs],
                    [session.grad_leaves[i] for i in grad_inputs],
                    tangents,
                    allow_unused=True,
                )
        grad_nodes = [tracer.read(g) if g is not None else None for g in grads]
        stale = saved.stale_masks([forward_tensors[p] for p in tangent_outputs])
    outputs = [*collected.mutation_nodes, *collected.user_nodes, *grad_nodes]
    gm = session.build_module(outputs)
    return JointGraph(gm, session.info(collected), tangent_outputs, grad_inputs, stale)
