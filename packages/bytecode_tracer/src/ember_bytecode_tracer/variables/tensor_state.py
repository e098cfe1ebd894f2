"""Python state of tensors in a trace: attributes the code sets on them (`t.tag = ...`,
`t.grad = g`) and reads back, and `.grad` of tensors the trace made.

A tensor the frame was given (a graph input) is a real object: a write to it is replayed
after the graph through its source, as for any object (`SideEffects.attributes`). A tensor
made by the graph exists only once the graph ran: its writes are kept per tensor (by its
example value, which every tracker of the same tensor shares, in-place results included)
and set on the graph's output that carries it, when the tensor leaves the trace at all
(returned, stored, kept by a resume function). Reads later in the trace see the writes.

Only plain instance attributes (names that torch.Tensor does not define) and `.grad` are
modeled; any other name (`requires_grad`, `data`, `names`, hooks) is a graph break.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource
from ember_bytecode_tracer.rebuild_codegen import emits_write
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.object_identity import record_write

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator, VariableTracker
    from ember_bytecode_tracer.variables.tensor import TensorVariable

_MISSING = object()


def is_instance_attribute(name: str) -> bool:
    """A name that lives in a tensor's own `__dict__` (torch.Tensor defines no such attribute)."""
    return not name.startswith("__") and (
        inspect.getattr_static(torch.Tensor, name, _MISSING) is _MISSING
    )


def input_source(tx: Translator, tensor: TensorVariable) -> Source | None:
    """The source of the graph input `tensor` is (the first one it was reached through),
    also for the result of an in-place op on it; None for a tensor the graph made."""
    output = tx.output
    node = tensor.node
    if node.op == "placeholder" and not output.is_drawn(node.meta.get("source", tensor.source)):
        return node.meta.get("source", tensor.source)
    for graph_input in output.inputs:
        node = graph_input.node
        if node.meta.get("example_value") is tensor.example and not output.is_drawn(
            graph_input.source
        ):
            return node.meta.get("source", graph_input.source)
    return None


def _made_attributes(tx: Translator, tensor: TensorVariable) -> dict[str, VariableTracker]:
    return tx.output.side_effects.tensor_attributes.get(id(tensor.example), (None, {}))[1]


def store_tensor_attribute(
    tx: Translator, tensor: TensorVariable, name: str, value: VariableTracker
) -> None:
    """`tensor.name = value`."""
    if name == "grad":
        _check_grad_assignment(tensor, value)
    elif not is_instance_attribute(name):
        raise Unsupported(f"setting Tensor.{name} inside a traced region")
    source = input_source(tx, tensor)
    if source is not None:
        record_write(tx, _SourceOnly(source), name, value)
        return
    table = tx.output.side_effects.tensor_attributes
    table.setdefault(id(tensor.example), (tensor.example, {}))[1][name] = value


def load_tensor_attribute(
    tx: Translator, tensor: TensorVariable, name: str
) -> VariableTracker | None:
    """`tensor.name` for a name written in the trace, a plain attribute of an input tensor,
    or `.grad` of a tensor the graph made; None where the tensor's own rules answer."""
    if name != "grad" and not is_instance_attribute(name):
        return None  # torch.Tensor's own attributes and methods
    source = input_source(tx, tensor)
    if source is None:
        written = _made_attributes(tx, tensor).get(name)
        if written is not None:
            return written
        # A tensor made by the graph is a fresh object: no gradient was ever stored on it.
        return ConstantVariable(None) if name == "grad" else None
    written = tx.output.side_effects.attributes.get((source, name))
    if written is not None:
        return written
    if name == "grad" or not is_instance_attribute(name):
        return None
    real = tx.output.real_value(source)
    value = vars(real).get(name, _MISSING) if real is not None else _MISSING
    if value is _MISSING:
        return None
    return tx.wrap(value, AttrSource(source, name))


def has_written_attribute(tx: Translator, tensor: TensorVariable, name: str) -> bool:
    """Whether the trace set `tensor.name` (hasattr and getattr with a default see it)."""
    source = input_source(tx, tensor)
    if source is None:
        return name in _made_attributes(tx, tensor)
    return (source, name) in tx.output.side_effects.attributes


def _check_grad_assignment(tensor: TensorVariable, value: VariableTracker) -> None:
    """Eager's checks of `t.grad = g`: None, or a dense tensor of t's dtype, device, size."""
    if isinstance(value, ConstantVariable) and value.as_python_constant() is None:
        return
    example, grad = tensor.example, getattr(value, "example", None)
    if not isinstance(grad, torch.Tensor) or grad.layout != torch.strided:
        raise Unsupported("Tensor.grad set to a value other than a dense tensor or None")
    same = grad.dtype == example.dtype and grad.device == example.device
    if not same or tuple(grad.shape) != tuple(example.shape) or example.layout != torch.strided:
        raise Unsupported("Tensor.grad set to a tensor eager refuses (dtype, device or size)")


class _SourceOnly:
    """What record_write needs of a tracker: the source its writes are keyed by."""

    def __init__(self, source: Source) -> None:
        self.source = source


def tensor_attribute_writes(table: dict[int, tuple[Any, dict]], builder: Any) -> list:
    """For each graph output carrying a tensor the graph made and the trace gave
    attributes: the write that sets them on it (reconstruct.Write with its code form)."""
    writes = []
    index = 0
    while index < len(builder.outputs):  # recipes of the values may add outputs
        entry = table.get(id(builder.outputs[index].meta.get("example_value")))
        if entry is not None and entry[0] is builder.outputs[index].meta.get("example_value"):
            parts = {name: builder.recipe(v) for name, v in entry[1].items()}

            def read(outs, L, G, index=index, parts=parts):
                target = outs[index]
                new = {name: p(outs, L, G) for name, p in parts.items()}
                return lambda: [setattr(target, n, v) for n, v in new.items()]

            def emit(code, index=index, parts=parts):
                new = {n: code.temp(code.value(p)) for n, p in parts.items()}
                return [f"setattr(outs[{index}], {code.const(n)}, {v})" for n, v in new.items()]

            writes.append(emits_write(read, emit))
        index += 1
    return writes
