"""Host scalar reads (``t.item()``: ``aten._local_scalar_dense``) and run-time assertions on
them (``aten._assert_scalar``, from ``torch._check``).

A read binds its unbacked symbol in the wrapper, before any kernel runs: the tensor read is
a graph input or a strided view of one (``ScalarRead``: its input position and element
offset), so the value is known on the host from the call's arguments. Kernels then take the
symbol as an argument: an int one as any size symbol (loop bounds, buffer sizes, index
math), a float one as a float scalar argument where the target declares
``float_scalar_args``. An assertion becomes a host check in the wrapper, after the reads
(``ScalarAssert``), raising RuntimeError as eager's ``torch._check`` does. Any other read
(of a computed value, of a bool) raises ScalarReadUnsupported: the caller runs the graph
eagerly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy
import torch

from ..errors import ScalarReadUnsupported
from ..nodes import InputBuffer
from ..views import storage_view
from .registry import register_lowering


@dataclass(frozen=True)
class ScalarRead:
    """``symbol = args[position][index].item()``: the input's element at ``index`` (a
    logical index: whatever strides the call's input has), as a Python scalar;
    ``is_float``: a float (else an int)."""

    symbol: sympy.Symbol
    position: int
    #: None: the graph input is the scalar itself (a read saved for the backward graph)
    index: tuple[int, ...] | None
    is_float: bool


@dataclass(frozen=True)
class ScalarAssert:
    """A host check: ``condition`` (a sympy boolean over read symbols) else RuntimeError."""

    condition: Any
    message: str


def _symbol_of(node: Any) -> sympy.Symbol:
    return _symbol_of_value(node.meta.get("val"))


def _symbol_of_value(val: Any) -> sympy.Symbol:
    expr = getattr(getattr(val, "node", None), "expr", None)
    if not isinstance(expr, sympy.Symbol):
        raise ScalarReadUnsupported(f"a scalar read whose value is not a fresh symbol ({val!r})")
    if isinstance(val, torch.SymBool):
        raise ScalarReadUnsupported("a bool read from a tensor (item() of a bool tensor)")
    return expr


def _element_index(offset: Any, layout: Any) -> tuple[int, ...]:
    """The logical index of the element at storage ``offset`` of an input of ``layout``."""
    values = [sympy.sympify(v) for v in (offset, *layout.size, *layout.stride)]
    if not all(v.is_Integer for v in values):
        raise ScalarReadUnsupported(f"a scalar read at offset {offset} of a symbolic layout")
    rest, size, stride = int(offset), list(map(int, layout.size)), list(map(int, layout.stride))
    index = [0] * len(size)
    for dim in sorted(range(len(size)), key=lambda d: -stride[d]):
        if stride[dim] > 0 and size[dim] > 1:
            index[dim], rest = divmod(rest, stride[dim])
    if rest or any(not 0 <= i < n for i, n in zip(index, size, strict=True)):
        raise ScalarReadUnsupported(f"a scalar read at offset {offset} of an overlapping layout")
    return tuple(index)


@register_lowering("aten::_local_scalar_dense")
def lower_scalar_read(ctx: Any, tensor: Any) -> sympy.Symbol:
    symbol = _symbol_of(ctx.current_node)
    view = storage_view(tensor)
    if view is None or not isinstance(view[0], InputBuffer):
        raise ScalarReadUnsupported("a scalar read of a computed tensor (only inputs are read)")
    buffer, layout = view
    index = _element_index(layout.offset, buffer.layout)
    is_float = tensor.get_dtype().is_floating_point
    if is_float and not ctx.target.float_scalar_args:
        raise ScalarReadUnsupported(f"the {ctx.target.name} target takes no float scalar arguments")
    if tensor.get_dtype().is_complex or tensor.get_dtype() == torch.bool:
        raise ScalarReadUnsupported(f"a scalar read of a {tensor.get_dtype()} tensor")
    if ctx.shape_env is None:  # a graph of static inputs: the read's env owns its symbol
        ctx.shape_env = ctx.current_node.meta["val"].node.shape_env
    ctx.scalar_reads[symbol] = ScalarRead(symbol, buffer.position, index, is_float)
    return symbol


@register_lowering("aten::_assert_scalar")
def lower_scalar_assert(ctx: Any, condition: Any, message: str = "") -> None:
    if condition is True or condition is sympy.true:
        return None
    if condition is False or condition is sympy.false:
        raise ScalarReadUnsupported(f"an assertion that never holds: {message}")
    backed = set(getattr(ctx.shape_env, "var_to_val", ()))
    missing = {s for s in condition.free_symbols if s not in ctx.scalar_reads and s not in backed}
    if missing:
        raise ScalarReadUnsupported(f"an assertion on {sorted(map(str, missing))}, not read")
    ctx.scalar_asserts.append(ScalarAssert(condition, str(message)))
    return None


def scalar_input(ctx: Any, val: Any, position: int) -> sympy.Symbol:
    """A float graph input that is a symbol read on the host in the forward graph (the
    backward graph takes the saved value): bound from the argument itself."""
    symbol = _symbol_of_value(val)
    if not ctx.target.float_scalar_args:
        raise ScalarReadUnsupported(f"the {ctx.target.name} target takes no float scalar arguments")
    if ctx.shape_env is None:
        ctx.shape_env = val.node.shape_env
    ctx.scalar_reads[symbol] = ScalarRead(symbol, position, None, True)
    return symbol


def is_float_symbol(symbol: Any, reads: dict) -> bool:
    read = reads.get(symbol)
    return read is not None and read.is_float


__all__ = ["ScalarAssert", "ScalarRead", "is_float_symbol"]
