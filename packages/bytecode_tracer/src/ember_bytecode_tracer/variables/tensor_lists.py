"""`torch.tensor([a, b, ...])` where items are tensors or ndarrays of the trace (and Python
numbers).

Eager reads each tensor item as a Python scalar (it must hold exactly one element, whatever
its shape), infers the dtype by promoting the items' own (a tensor's dtype; bool, int64 or
the default float dtype for Python numbers) unless `dtype=` names one, and builds a new
tensor on the default device that does not require grad. In the graph that is: each item
reshaped to a 0-d tensor and converted to the dtype, nested lists stacked, the result
detached. The tensors' values stay in the graph (nothing is read into Python, nothing is
guarded on them); only their sizes are fixed (static, one element each), as the trace saw
them. Anything else (a ragged nesting, a symbolic or multi-element item, other keywords)
is left to the general path. NumPy arrays of the trace (held as tensors) are sequences to
eager: a list of arrays of one shape and dtype kind is their stack, in the promoted dtype.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.lists import BaseListVariable
from ember_bytecode_tracer.variables.numpy_arrays import NumpyArrayVariable
from ember_bytecode_tracer.variables.sym_values import SymNodeVariable
from ember_bytecode_tracer.variables.tensor import TensorVariable, as_node_arg

if TYPE_CHECKING:
    from ember_bytecode_tracer.variables.base import Translator, VariableTracker

_PYTHON_DTYPES = {bool: torch.bool, int: torch.int64}


def tensor_of_tensors(tx: Translator, args, kwargs) -> VariableTracker | None:
    """The graph form of `torch.tensor(items)` with tensor items, or None: not this case."""
    if len(args) != 1 or not isinstance(args[0], BaseListVariable) or set(kwargs) - _KEYWORDS:
        return None
    dtype_arg = kwargs.get("dtype")
    if dtype_arg is not None and not _is_constant(dtype_arg, torch.dtype | None):
        return None
    device = kwargs.get("device")
    if device is not None and not _on_cpu(device):
        return None
    if torch.get_default_device().type != "cpu":
        return None
    given = dtype_arg.as_python_constant() if dtype_arg is not None else None
    leaves = _leaves(args[0], given)
    if leaves is None or not any(isinstance(v, _GRAPH_VALUES) for v in leaves):
        return None
    dtype = dtype_arg.as_python_constant() if dtype_arg is not None else None
    dtype = dtype or _inferred_dtype(leaves)
    if dtype is None:
        return None
    node, example = _build(tx, args[0], dtype)
    node, example = tx.output.create_node("call_method", "detach", (node,), {})
    return TensorVariable(node, example)


_KEYWORDS = {"dtype", "device"}
_HELD = (TensorVariable, NumpyArrayVariable)  # items whose values are graph tensors
# items whose values only the graph has: its tensors, and symbolic scalars (an item())
_GRAPH_VALUES = (*_HELD, SymNodeVariable)


def _on_cpu(device: VariableTracker) -> bool:
    if not _is_constant(device, str | torch.device | None):
        return False
    value = device.as_python_constant()
    return value is None or torch.device(value) == torch.device("cpu")


def _is_constant(value: VariableTracker, kind: Any) -> bool:
    return isinstance(value, ConstantVariable) and isinstance(value.as_python_constant(), kind)


def _leaves(items: BaseListVariable, dtype: torch.dtype | None) -> list[VariableTracker] | None:
    """The items of a regular nesting (every list of one level the same length), or None.
    NumPy scalars of the trace (`a[0]`) with Python numbers where the dtype is given (eager
    infers another dtype from NumPy scalars than from the 0-d arrays they are here)."""
    out: list[VariableTracker] = []
    level = [items]
    while level and isinstance(level[0], BaseListVariable):
        lengths = {len(v.items) for v in level if isinstance(v, BaseListVariable)}
        if len(lengths) != 1 or not all(isinstance(v, BaseListVariable) for v in level):
            return None
        level = [item for v in level for item in v.items]
        if not level:
            return None
    if any(isinstance(leaf, NumpyArrayVariable) for leaf in level):
        if dtype is not None and all(_numpy_scalar_or_number(leaf, dtype) for leaf in level):
            return level
        return level if _same_arrays(level) else None
    for leaf in level:
        if isinstance(leaf, TensorVariable):
            if not _one_static_element(leaf.example):
                return None
        elif not (_is_constant(leaf, bool | int | float) or isinstance(leaf, SymNodeVariable)):
            return None
        out.append(leaf)
    return out


def _numpy_scalar_or_number(leaf: VariableTracker, dtype: torch.dtype) -> bool:
    """A Python number, or a NumPy scalar that eager converts to `dtype` as `.to(dtype)`
    does: any real one into a float dtype; into int64 a signed or narrow unsigned integer
    (eager raises TypeError for np.float32 or np.bool_ there, and checks ranges into
    narrower integer dtypes: not known at trace time)."""
    if not isinstance(leaf, NumpyArrayVariable):
        return _is_constant(leaf, bool | int | float)
    if not leaf.scalar or leaf.example.device.type != "cpu":
        return False
    source = leaf.example.dtype
    if dtype.is_floating_point:
        return not source.is_complex
    integer = not source.is_floating_point and not source.is_complex and source != torch.bool
    return dtype == torch.int64 and integer and source != torch.uint64


def _same_arrays(leaves: list[VariableTracker]) -> bool:
    """Arrays only (not NumPy scalars), of one static shape, on the CPU."""
    if not all(isinstance(v, NumpyArrayVariable) and not v.scalar for v in leaves):
        return False
    shapes = {tuple(v.example.shape) for v in leaves}
    sizes = next(iter(shapes))
    return len(shapes) == 1 and all(isinstance(s, int) for s in sizes) and _cpu(leaves)


def _cpu(leaves: list[VariableTracker]) -> bool:
    return all(v.example.device.type == "cpu" for v in leaves)


def _one_static_element(example: torch.Tensor) -> bool:
    sizes = example.shape
    return all(isinstance(s, int) for s in sizes) and example.numel() == 1 and example.is_cpu


def _inferred_dtype(leaves: list[VariableTracker]) -> torch.dtype | None:
    dtype = None
    for leaf in leaves:
        if isinstance(leaf, _HELD):
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
    if isinstance(value, NumpyArrayVariable):  # a sequence: its own shape
        return output.create_node("call_method", "to", (value.node, dtype), {})
    if isinstance(value, TensorVariable):
        node, _ = output.create_node("call_method", "reshape", (value.node, ()), {})
        return output.create_node("call_method", "to", (node, dtype), {})
    if isinstance(value, SymNodeVariable):
        scalar = as_node_arg(tx, value)
        return output.create_node("call_function", torch.scalar_tensor, (scalar,), {"dtype": dtype})
    constant = value.as_python_constant()
    return output.create_node("call_function", torch.tensor, (constant,), {"dtype": dtype})
