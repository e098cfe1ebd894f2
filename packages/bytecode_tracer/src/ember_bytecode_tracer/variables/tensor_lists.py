"""`torch.tensor([a, b, ...])` where items are tensors of the trace (and Python numbers).

Eager reads each tensor item as a Python scalar (it must hold exactly one element, whatever
its shape), infers the dtype by promoting the items' own (a tensor's dtype; bool, int64 or
the default float dtype for Python numbers) unless `dtype=` names one, and builds a new
tensor on the default device that does not require grad. In the graph that is: each item
reshaped to a 0-d tensor and converted to the dtype, nested lists stacked, the result
detached. The tensors' values stay in the graph (nothing is read into Python, nothing is
guarded on them); only their sizes are fixed (static, one element each), as the trace saw
them. Anything else (a ragged nesting, a symbolic or multi-element item, other keywords)
is left to the general path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.lists import BaseListVariable
from ember_bytecode_tracer.variables.sym_values import SymNodeVariable
from ember_bytecode_tracer.variables.tensor import TensorVariable, as_node_arg

if TYPE_CHECKING:
    from ember_bytecode_tracer.variables.base import Translator, VariableTracker

_PYTHON_DTYPES = {bool: torch.bool, int: torch.int64}


def tensor_of_tensors(tx: Translator, args, kwargs) -> VariableTracker | None:
    """The graph form of `torch.tensor(items)` with tensor items, or None: not this case."""
    if len(args) != 1 or not isinstance(args[0], BaseListVariable) or set(kwargs) - {"dtype"}:
        return None
    dtype_arg = kwargs.get("dtype")
    if dtype_arg is not None and not _is_constant(dtype_arg, torch.dtype | None):
        return None
    if torch.get_default_device().type != "cpu":
        return None
    leaves = _leaves(args[0])
    if leaves is None or not any(isinstance(v, TensorVariable) for v in leaves):
        return None
    dtype = dtype_arg.as_python_constant() if dtype_arg is not None else None
    dtype = dtype or _inferred_dtype(leaves)
    if dtype is None:
        return None
    node, example = _build(tx, args[0], dtype)
    node, example = tx.output.create_node("call_method", "detach", (node,), {})
    return TensorVariable(node, example)


def _is_constant(value: VariableTracker, kind: Any) -> bool:
    return isinstance(value, ConstantVariable) and isinstance(value.as_python_constant(), kind)


def _leaves(items: BaseListVariable) -> list[VariableTracker] | None:
    """The items of a regular nesting (every list of one level the same length), or None."""
    out: list[VariableTracker] = []
    level = [items]
    while level and isinstance(level[0], BaseListVariable):
        lengths = {len(v.items) for v in level if isinstance(v, BaseListVariable)}
        if len(lengths) != 1 or not all(isinstance(v, BaseListVariable) for v in level):
            return None
        level = [item for v in level for item in v.items]
        if not level:
            return None
    for leaf in level:
        if isinstance(leaf, TensorVariable):
            if not _one_static_element(leaf.example):
                return None
        elif not (_is_constant(leaf, bool | int | float) or isinstance(leaf, SymNodeVariable)):
            return None
        out.append(leaf)
    return out


def _one_static_element(example: torch.Tensor) -> bool:
    sizes = example.shape
    return all(isinstance(s, int) for s in sizes) and example.numel() == 1 and example.is_cpu


def _inferred_dtype(leaves: list[VariableTracker]) -> torch.dtype | None:
    dtype = None
    for leaf in leaves:
        if isinstance(leaf, TensorVariable):
            own = leaf.example.dtype
        else:
            kind = leaf.python_type()
            own = _PYTHON_DTYPES.get(kind, torch.get_default_dtype() if kind is float else None)
        if own is None:
            return None
        dtype = own if dtype is None else torch.promote_types(dtype, own)
    return dtype


def _build(tx: Translator, value: VariableTracker, dtype: torch.dtype) -> tuple[Any, Any]:
    output = tx.output
    if isinstance(value, BaseListVariable):
        parts = [_build(tx, item, dtype)[0] for item in value.items]
        return output.create_node("call_function", torch.stack, (parts,), {})
    if isinstance(value, TensorVariable):
        node, _ = output.create_node("call_method", "reshape", (value.node, ()), {})
        return output.create_node("call_method", "to", (node, dtype), {})
    if isinstance(value, SymNodeVariable):
        scalar = as_node_arg(tx, value)
        return output.create_node("call_function", torch.scalar_tensor, (scalar,), {"dtype": dtype})
    constant = value.as_python_constant()
    return output.create_node("call_function", torch.tensor, (constant,), {"dtype": dtype})
