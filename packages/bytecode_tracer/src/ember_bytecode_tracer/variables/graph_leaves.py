"""Autograd leaves made inside one graph, and `.backward()` into them.

`t.requires_grad_()` on a tensor the graph computed without history makes it a leaf. While
nothing that carries autograd history through such a leaf leaves the graph (a compiled graph
hands its outputs back without it), the leaf can live in the graph: a `.backward()` whose
history reaches only such leaves is `torch.autograd.grad` in the graph, accumulated into
each leaf's `.grad` (in place after the first, as autograd's AccumulateGrad does), and what
leaves the graph is the gradients and values computed from them.

Checked when the graph is finished (`check_leaves_stay`): an output that requires grad
through a leaf of the graph (the leaf itself, `y * 3`) restarts the trace with a graph break
at the `requires_grad_()` call, the eager leaf it was before. A `.backward()` reaching a
graph input that requires grad (its gradient belongs to the caller's tensor, with its hooks),
or another argument form, stays a graph break.

`nn.Parameter(t, requires_grad=False)` on a tensor of the trace is what
`Tensor._make_subclass` makes of it: an alias of `t` without autograd history, of class
Parameter. In the graph it is `t.detach()`, its tracker of class Parameter (isinstance,
type). A graph hands its outputs back as plain tensors, so one that leaves the graph
(returned, stored, kept for what follows a break) restarts the trace with a graph break at
the call, as an escaping leaf does.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from torch import nn

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.contexts import _SET_GRAD
from ember_bytecode_tracer.variables.objects import constructor
from ember_bytecode_tracer.variables.tensor import (
    METHOD_RULES,
    TensorVariable,
    wrap_graph_value,
)
from ember_bytecode_tracer.variables.tensor_state import input_source

if TYPE_CHECKING:
    from ember_bytecode_tracer.output_graph import OutputGraph
    from ember_bytecode_tracer.variables.base import Translator


class LeafEscapes(Unsupported):
    """A tensor with history through a leaf made in the graph would leave it: trace again
    with a graph break at the instruction (of the frame itself) that made the leaf."""

    def __init__(self, break_index: int, location: str, reason: str | None = None) -> None:
        super().__init__(
            reason or "Tensor.requires_grad_() makes an autograd leaf inside the traced region",
            location=location,
        )
        self.break_index = break_index


def _frame_instruction(tx: Translator) -> int:
    """The index of the frame's own instruction running now (the call, when inlined)."""
    root = tx
    while getattr(root, "parent", None) is not None:
        root = root.parent
    return root.index_of[id(root.current)]


def _make_leaf(tx: Translator, tensor: TensorVariable, args: list, kwargs: dict):
    flag = args[0] if args else kwargs.get("requires_grad", ConstantVariable(True))
    if len(args) > 1 or set(kwargs) - {"requires_grad"} or not flag.is_python_constant():
        return None
    example = tensor.example
    if flag.as_python_constant() is not True or example.requires_grad:
        return None  # no new leaf: the tensor's own rules
    if not torch.is_grad_enabled() or input_source(tx, tensor) is not None:
        return None  # under no_grad nothing records; an input's flag is the caller's
    output = tx.output
    # graphs traced again under no_grad (the backend's inference trace) record from here on
    output.graph.call_function(_SET_GRAD, (True,))
    node, value = output.create_node("call_method", "requires_grad_", (tensor.node,), {}, leaf=True)
    output.graph_leaves[id(value)] = (value, node, _frame_instruction(tx), tx.location())
    return wrap_graph_value(tx, node, value)


def _history(output: OutputGraph, start: torch.fx.Node) -> tuple[list[torch.fx.Node], bool]:
    """The graph's own leaves the autograd history of `start` reaches, and whether it also
    reaches a graph input (or attribute) that requires grad."""
    leaves, seen, stack, reaches_input = [], set(), [start], False
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        example = node.meta.get("example_value")
        if not _carries_history(example):
            continue
        made = output.graph_leaves.get(id(example))
        if made is not None and made[0] is example:
            if made[1] not in leaves:
                leaves.append(made[1])
            continue
        if node.op in ("placeholder", "get_attr"):
            reaches_input = True
            continue
        stack.extend(node.all_input_nodes)
    return leaves, reaches_input


def _carries_history(example: Any) -> bool:
    """A tensor requiring grad, or a tuple/list of results holding one (split, unbind)."""
    if isinstance(example, tuple | list):
        return any(_carries_history(item) for item in example)
    return isinstance(example, torch.Tensor) and example.requires_grad


def _backward(tx: Translator, tensor: TensorVariable, args: list, kwargs: dict):
    output = tx.output
    if not output.graph_leaves or len(args) > 2 or set(kwargs) - {"gradient", "retain_graph"}:
        return None
    gradient = args[0] if args else kwargs.get("gradient", ConstantVariable(None))
    retain = args[1] if len(args) > 1 else kwargs.get("retain_graph", ConstantVariable(None))
    if not retain.is_python_constant() or not isinstance(
        gradient, TensorVariable | ConstantVariable
    ):
        return None
    leaves, reaches_input = _history(output, tensor.node)
    if not leaves or reaches_input or tensor.node in leaves:
        return None  # an input's gradient, or a leaf's own backward: autograd's engine
    grad_outputs = (gradient.node,) if isinstance(gradient, TensorVariable) else None
    node, grads = output.create_node(
        "call_function",
        torch.autograd.grad,
        ((tensor.node,), tuple(leaves)),
        {"grad_outputs": grad_outputs, "retain_graph": retain.as_python_constant(),
         "allow_unused": True},
    )  # fmt: skip
    for index, (leaf, grad) in enumerate(zip(leaves, grads, strict=True)):
        if grad is not None:
            _accumulate(tx, leaf, node, index, grad)
    return ConstantVariable(None)


def _accumulate(tx: Translator, leaf: torch.fx.Node, grads: torch.fx.Node, i: int, grad: Any):
    """leaf.grad = the new gradient, or leaf.grad += it (in place, as AccumulateGrad)."""
    output = tx.output
    item = output.graph.call_function(operator.getitem, (grads, i))
    item.meta["example_value"] = grad
    new = TensorVariable(item, grad)
    example = leaf.meta["example_value"]
    attributes = output.side_effects.tensor_attributes.setdefault(id(example), (example, {}))[1]
    held = attributes.get("grad")
    if isinstance(held, TensorVariable):
        added, value = output.create_node("call_method", "add_", (held.node, item), {})
        new = TensorVariable(added, value)
    attributes["grad"] = new


def check_leaves_stay(output: OutputGraph, outputs: list[torch.fx.Node]) -> None:
    """Raises LeafEscapes where a graph output carries history through a leaf of the graph."""
    for node in outputs:
        example = node.meta.get("example_value")
        made = output.made_parameters.get(id(example))
        if made is not None and made[0] is example:
            reason = "an nn.Parameter made inside the traced region would leave it"
            raise LeafEscapes(made[1], made[2], reason)
    if not output.graph_leaves:
        return
    for node in outputs:
        if _carries_history(node.meta.get("example_value")) and _history(output, node)[0]:
            _, _, index, location = min(output.graph_leaves.values(), key=lambda e: e[2])
            raise LeafEscapes(index, location)


@constructor("made_parameter")
def _make_parameter(tx: Translator, kind, args: list, kwargs: dict):
    """nn.Parameter(t, requires_grad=False): `t.detach()` seen as a Parameter."""
    if getattr(kind, "cls", None) is not nn.Parameter:
        return None
    if len(args) > 2 or set(kwargs) - {"data", "requires_grad"}:
        return None
    data = args[0] if args else kwargs.get("data")
    flag = args[1] if len(args) > 1 else kwargs.get("requires_grad")
    if not isinstance(data, TensorVariable) or flag is None or not flag.is_python_constant():
        return None
    if flag.as_python_constant() is not False:
        return None  # a leaf requiring grad: the general refusal stands
    node, value = tx.output.create_node("call_method", "detach", (data.node,), {})
    tracker = TensorVariable(node, value)
    tracker.tensor_type = nn.Parameter
    tx.output.made_parameters[id(value)] = (value, _frame_instruction(tx), tx.location())
    return tracker


METHOD_RULES["requires_grad_"] = _make_leaf
METHOD_RULES["backward"] = _backward
