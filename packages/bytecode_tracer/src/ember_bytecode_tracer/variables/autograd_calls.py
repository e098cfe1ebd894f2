"""Calls that run autograd's engine (`torch.autograd.grad`, `torch.autograd.backward`).

They are graph breaks: the graph so far ends with differentiable outputs (the backend
compiles it for training when grad mode is on and an input requires grad), the engine runs
in eager PyTorch over the compiled backward, and the rest of the frame continues in a
traced resume function. `Tensor.backward()` is the same break (variables/tensor.py).
"""

from __future__ import annotations

from typing import Any

import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard_identity, in_rule_table, wrap_rule

AUTOGRAD_FUNCTIONS = {
    torch.autograd.grad: "torch.autograd.grad() runs autograd's engine (a graph break)",
    torch.autograd.backward: "torch.autograd.backward() runs autograd's engine (a graph break)",
}


class AutogradCallVariable(VariableTracker):
    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def as_python_constant(self) -> Any:
        return self.fn

    def call_function(self, tx, args, kwargs):
        raise Unsupported(AUTOGRAD_FUNCTIONS[self.fn])


def autograd_call_tracker(value: Any) -> VariableTracker | None:
    return AutogradCallVariable(value) if in_rule_table(value, AUTOGRAD_FUNCTIONS) else None


# ---- wrapping real values (variables/builder.py) ----------------------------------------
@wrap_rule("autograd_call")
def _wrap_autograd_call(tx, value: Any, source) -> VariableTracker | None:
    tracker = autograd_call_tracker(value)
    if tracker is not None:  # an engine call: a graph break when called
        guard_identity(tx, value, source)
    return tracker
