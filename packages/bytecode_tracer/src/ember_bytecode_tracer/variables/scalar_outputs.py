"""`Tensor.item()` and `Tensor.tolist()` as graph values (config.capture_scalar_outputs).

Off (the default, as torch.compile), reading a tensor's value into Python is a graph break
(tensor.py's DATA_DEPENDENT_METHODS). On, `t.item()` is an `item` node whose example value
is an unbacked symbol of the trace's ShapeEnv (FakeTensorMode makes it, since the env allows
scalar outputs): a SymInt for integer tensors (any sign), a SymFloat for floating ones, a
SymBool for bool ones. Python arithmetic on it stays symbolic and becomes graph nodes where
a tensor op or the frame's result needs it (sym_values.py); as a size (`torch.empty(n)`) it
is an unbacked size; `torch._check(n > 0)` on it is a deferred runtime assertion. A branch
on its value cannot be decided at trace time: a graph break (sym_values._decide), never a
guessed answer. `t.tolist()` is one `item` per element of a tensor of known shape.
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING

import sympy
import torch

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.variables.builtins import RULES, BuiltinVariable, constant_fold, rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.lists import ListVariable
from ember_bytecode_tracer.variables.sym_values import (
    SymNodeVariable,
    fx_of,
    has_symbolic,
    wrap_scalar,
)
from ember_bytecode_tracer.variables.tensor import METHOD_RULES, TensorVariable, wrap_graph_value
from ember_bytecode_tracer.variables.torch_functions import TorchFunctionVariable

_ASSERT = torch.ops.aten._assert_scalar.default

if TYPE_CHECKING:
    from ember_bytecode_tracer.variables.base import Translator, VariableTracker


def _captures(tx: Translator, tensor: TensorVariable) -> bool:
    """Whether this trace keeps `tensor`'s value in the graph (else: the usual break)."""
    example = tensor.example
    if not tx.output.dynamic.policy.capture_scalar_outputs:
        return False
    if example.is_complex() or example.is_quantized or example.is_sparse:
        return False  # no symbolic complex scalars: a break, as before
    return all(isinstance(s, int) or s.node.has_hint() for s in example.shape)


def _shape(tensor: TensorVariable) -> tuple[int, ...]:
    """The sizes, made constants: a symbolic size specializes (its guard recorded), as the
    number of Python values read out of the tensor is fixed in the trace."""
    return tuple(int(s) for s in tensor.example.shape)


def _item_of(tx: Translator, node: torch.fx.Node) -> VariableTracker:
    """An `item` node on the one-element tensor `node`, and its unbacked scalar."""
    item, value = tx.output.create_node("call_method", "item", (node,), {})
    result = wrap_graph_value(tx, item, value)
    if isinstance(result, SymNodeVariable):  # where later expressions read the symbol
        tx.output.dynamic.scalar_nodes.setdefault(value.node.expr, item)
    return result


def _item(tx: Translator, tensor: TensorVariable, args: list, kwargs: dict):
    if args or kwargs or not _captures(tx, tensor):
        return None
    if _shape(tensor) != (1,) * tensor.example.dim():
        return None  # eager raises its own error: the break runs it there
    return _item_of(tx, tensor.node)


def _tolist(tx: Translator, tensor: TensorVariable, args: list, kwargs: dict):
    if args or kwargs or not _captures(tx, tensor):
        return None
    shape = _shape(tensor)
    if math.prod(shape) > 4096:
        raise Unsupported(f"Tensor.tolist() of {math.prod(shape)} elements in the graph")
    if not shape:
        return _item_of(tx, tensor.node)
    return _nested(tx, tensor.node, shape)


def _nested(tx: Translator, node: torch.fx.Node, shape: tuple[int, ...]) -> VariableTracker:
    """The nested lists of `tolist()`: a row is indexed out of `node` for each level."""
    items = []
    for i in range(shape[0]):
        row, _ = tx.output.create_node("call_function", operator.getitem, (node, i), {})
        items.append(_nested(tx, row, shape[1:]) if len(shape) > 1 else _item_of(tx, row))
    return ListVariable(items)


def _new_tensor(tx: Translator, tensor: TensorVariable, args: list, kwargs: dict):
    """`t.new_tensor(data)` with symbolic numbers in `data` (sizes, items): torch.tensor of
    the same data with t's dtype and device unless named (what new_tensor is), which keeps
    the numbers graph values; constant data is left to the usual call."""
    if len(args) != 1 or not set(kwargs) <= {"dtype", "device", "requires_grad"}:
        return None
    if not has_symbolic(args[0]):
        return None
    example = tensor.example
    options = {"dtype": ConstantVariable(example.dtype), "device": ConstantVariable(example.device)}
    options.update(kwargs)
    return TorchFunctionVariable(torch.tensor).call_function(tx, [args[0]], options)


METHOD_RULES["item"] = _item
METHOD_RULES["tolist"] = _tolist
METHOD_RULES["new_tensor"] = _new_tensor


def _number_of(kind: type):
    """`float(t)` / `int(t)` of a one-element tensor is Tensor.__float__ / __int__: its
    item() made a Python number, kept in the graph where item() is; otherwise, and for
    anything but a tensor, the builtin on constants (a break when they are not)."""

    def run(tx: Translator, args: list, kwargs: dict) -> VariableTracker:
        if len(args) == 1 and not kwargs and isinstance(args[0], TensorVariable):
            item = _item(tx, args[0], [], {})
            if item is not None:
                return BuiltinVariable(kind).call_function(tx, [item], {})
        return constant_fold(kind, args, kwargs)

    return run


rule(float)(_number_of(float))
rule(int)(_number_of(int))
_PLAIN_BOOL = RULES[bool]


@rule(bool)
def _bool(tx: Translator, args: list, kwargs: dict) -> VariableTracker:
    """`bool(t)` of a one-element tensor is `t.item() != 0` (Tensor.__bool__): a SymBool in
    the graph where item() is captured; otherwise the plain rule (a break, or eager's
    RuntimeError for a tensor of several values)."""
    if len(args) == 1 and not kwargs and isinstance(args[0], TensorVariable):
        item = _item(tx, args[0], [], {})
        if item is not None:
            return BuiltinVariable(bool).call_function(tx, [item], {})
    return _PLAIN_BOOL(tx, args, kwargs)


# ---- torch._check on symbolic conditions ------------------------------------------------
def _assert_at_run_time(tx: Translator, cond: VariableTracker, message: str) -> None:
    """Assume `cond` from here on (the env decides a known one, recording its guard); one
    that only the run can decide is also asserted in the graph (`aten._assert_scalar`), so
    a value breaking it raises as eager's check does instead of flowing on unchecked."""
    if not isinstance(cond, SymNodeVariable):  # decided on the spot: a constant
        if not cond.as_python_constant():
            raise Unsupported("torch._check on a condition that does not hold")
        return
    node = cond.value.node
    decidable = node.has_hint() or node.shape_env.static_value(node.expr) is not None
    if not decidable:  # one assertion per conjunct (`sym_and(a, b)`: a, then b)
        expr = node.shape_env.simplify(node.expr)
        for part in expr.args if isinstance(expr, sympy.And) else (expr,):
            text = f"{message}: Runtime assertion failed for expression {part}"
            tx.output.graph.call_function(_ASSERT, (fx_of(tx.output, part, bool), text))
    node.expect_true()


@rule(torch._check)
def _check(tx: Translator, args: list, kwargs: dict) -> VariableTracker:
    """`torch._check(cond)`: on a symbolic condition the env decides it (a guard where the
    values are known) or, on a value only the run knows (an item()), assumes it and records
    it as a deferred runtime assertion; a constant True is nothing. Anything else (False,
    not a bool) is left to eager, which raises: a graph break."""
    cond = args[0] if args else kwargs.get("cond")
    if isinstance(cond, SymNodeVariable) and cond.python_type() is bool:
        _assert_at_run_time(tx, cond, "torch._check failed")
        return ConstantVariable(None)
    if isinstance(cond, ConstantVariable) and cond.value is True:
        return ConstantVariable(None)
    if isinstance(cond, ConstantVariable) and cond.value is False:
        # eager raises RuntimeError with the caller's message: raised in the trace, so that
        # a `try` around it catches it and, uncaught under fullgraph, it is that RuntimeError
        raise TracedException(RuntimeError, _check_message(tx, args, kwargs))
    raise Unsupported("torch._check on a condition that is not a bool")


def _check_message(tx: Translator, args: list, kwargs: dict) -> str:
    message = args[1] if len(args) > 1 else kwargs.get("message")
    if message is None or (isinstance(message, ConstantVariable) and message.value is None):
        return "Expected cond to be True, but got False."
    text = message.call_function(tx, [], {})  # the message is a callable returning a str
    if not text.is_python_constant():
        raise Unsupported("torch._check with a message not known at trace time")
    return str(text.as_python_constant())


@rule(torch._check_is_size)
def _check_is_size(tx: Translator, args: list, kwargs: dict) -> VariableTracker:
    """`torch._check_is_size(n)`: n >= 0, checked as torch._check does (and, for a symbol
    read from data, its range narrowed to sizes, as torch's helper does)."""
    value = args[0] if args else kwargs.get("i")
    if isinstance(value, SymNodeVariable) and value.python_type() is int:
        node = value.value.node
        if node.expr in node.shape_env.unbacked:
            node.shape_env._constrain_range_for_size(node.expr)
        _assert_at_run_time(tx, wrap_scalar(value.value >= 0), "torch._check_is_size failed")
        return ConstantVariable(None)
    if isinstance(value, ConstantVariable) and isinstance(value.value, int) and value.value >= 0:
        return ConstantVariable(None)
    raise Unsupported("torch._check_is_size on a value that is not a size")
