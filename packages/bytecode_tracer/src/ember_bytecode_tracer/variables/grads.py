"""`tensor.grad` of a tensor read from the frame: a guarded graph input (or None).

The gradient is read through the tensor's own source (`<source>.grad`), so its presence
and metadata are guarded like any input. A write made earlier in the trace (an optimizer's
`zero_grad` setting it to None) is seen through any source that reaches the same tensor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource

if TYPE_CHECKING:
    from ember_bytecode_tracer.translator.core import InstructionTranslator
    from ember_bytecode_tracer.variables.base import VariableTracker
    from ember_bytecode_tracer.variables.tensor import TensorVariable


def read_grad(tx: InstructionTranslator, tensor: TensorVariable) -> VariableTracker:
    from ember_bytecode_tracer.variables.builder import wrap_value

    output = tx.output
    real = output.real_value(tensor.source) if tensor.source is not None else None
    if real is None or tensor.node.op != "placeholder":
        raise Unsupported("Tensor.grad of a tensor computed inside the traced region")
    for (source, name), written in output.side_effects.attributes.items():
        if name == "grad" and output.real_value(source) is real:
            return written
    return wrap_value(tx, real.grad, AttrSource(tensor.source, "grad"))
