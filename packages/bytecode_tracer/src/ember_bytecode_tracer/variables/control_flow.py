"""Control-flow operators captured into the graph: `torch.cond` and `map`.

`torch.cond(pred, true_fn, false_fn, operands)` (traced through, it calls the operator
`torch.ops.higher_order.cond`) and the experimental control-flow `map(f, xs, *args)`
(which calls `torch.ops.higher_order.map_impl`) become one call of their operator in the
frame's graph, its bodies traced into subgraphs (variables/subgraph_capture.py) held as
GraphModule attributes of the graph, as torch.compile captures them:

    cond(pred, true_graph, false_graph, (*operands, *lifted))
    map_impl(body_graph, [*xs], [*args, *lifted])

- A predicate known at trace time (a Python bool, a shape comparison under static shapes)
  picks its branch: the branch is traced inline, no operator (eager's `cond` does the same
  with a Python bool). A comparison of symbolic sizes is decided on the call's sizes under
  a guard (a size on the other side recompiles), where torch.compile keeps both branches.
- A tensor predicate with one element: both branches traced; their outputs must agree in
  nesting, shape, dtype and device, else a graph break (the call runs as it is, and eager
  raises its own error).
- `map`'s body is traced once on the first slice of each `xs` (shape `x.shape[1:]`); its
  outputs are stacked along a new leading dimension of the mapped length.
- A body that cannot be captured (side effects, a graph break inside, non-tensor operands)
  makes the operator's call a graph break: it runs as it is, which is eager's behaviour.

Operators of this table are recognized by identity; any other higher-order operator stays
a graph break (directives.py).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

import ember_symbolic as es
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard_identity, wrap_rule
from ember_bytecode_tracer.variables.subgraph_capture import (
    Body,
    operand_leaves,
    same_layout,
    trace_body,
    unflatten_result,
    union,
    with_lifted,
)
from ember_bytecode_tracer.variables.sym_values import SymNodeVariable
from ember_bytecode_tracer.variables.tensor import TensorVariable, wrap_graph_value

COND = torch.ops.higher_order.cond
MAP_IMPL = torch.ops.higher_order.map_impl


def _bind(name: str, args: list, kwargs: dict, names: tuple[str, ...]) -> list[VariableTracker]:
    bound = list(args) + [kwargs[n] for n in names[len(args) :] if n in kwargs]
    if len(bound) != len(names) or len(args) + len(kwargs) != len(names):
        raise Unsupported(f"{name}() called with arguments other than {', '.join(names)}")
    return bound


def _items(tx, value: VariableTracker, what: str) -> list[VariableTracker]:
    if value.python_type() not in (list, tuple):
        raise Unsupported(f"{what} is a {value.python_type().__name__}, not a list or tuple")
    return value.unpack(tx)


def _call(tx, op: Any, args: tuple, examples: list[Any], spec: Any) -> VariableTracker:
    """The operator's node in the frame's graph, its outputs as trackers nested as `spec`."""
    node = tx.output.graph.create_node("call_function", op, args, {})
    node.meta["example_value"] = tuple(examples)
    tx.output.op_count += 1
    flat = wrap_graph_value(tx, node, tuple(examples))
    return unflatten_result(flat.items, spec)


def _subgraph(tx, prefix: str, body: Body, lifted: list, n_args: int) -> torch.fx.Node:
    name = tx.output.add_subgraph(prefix, with_lifted(body, lifted, n_args))
    node = tx.output.graph.get_attr(name)
    return node


def _fresh(tx, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """An example for one output of the operator: a new tensor (no input's alias) like the
    branches' (differentiable where either branch's is)."""
    pick = a if a.requires_grad or not b.requires_grad else b
    with tx.output.fake_mode:
        return pick.clone()


def _check_agree(true_body: Body, false_body: Body) -> None:
    if not same_layout(true_body.spec, false_body.spec):
        raise Unsupported("the branches of cond return differently nested outputs")
    for i, (a, b) in enumerate(zip(true_body.outputs, false_body.outputs, strict=True)):
        if (a.shape, a.dtype, a.device) != (b.shape, b.dtype, b.device):
            raise Unsupported(
                f"the branches of cond disagree on output {i}: {tuple(a.shape)} {a.dtype} "
                f"{a.device} vs {tuple(b.shape)} {b.dtype} {b.device}"
            )


def _predicate(tx, pred: VariableTracker) -> bool | None:
    """The branch a predicate known at trace time picks; None for a tensor predicate."""
    if pred.is_python_constant():
        return bool(pred.as_python_constant())
    if isinstance(pred, SymNodeVariable) and pred.python_type() is bool:
        return pred.truthiness(tx)  # decided on this call's sizes, under a guard
    if not isinstance(pred, TensorVariable):
        raise Unsupported(f"a cond predicate of type {pred.python_type().__name__}")
    numel = pred.example.numel()
    if not isinstance(numel, int) or numel != 1:
        raise Unsupported("a cond predicate tensor without exactly one element")
    return None


def _cond(tx, args, kwargs) -> VariableTracker:
    pred, true_fn, false_fn, operands = _bind(
        "cond", args, kwargs, ("pred", "true_fn", "false_fn", "operands")
    )
    ops = _items(tx, operands, "cond's operands")
    picked = _predicate(tx, pred)
    if picked is not None:  # known now: that branch, inline
        return (true_fn if picked else false_fn).call_function(tx, ops, {})
    true_body = trace_body(tx, true_fn, ops)
    false_body = trace_body(tx, false_fn, ops)
    _check_agree(true_body, false_body)
    lifted = union(true_body.lifted, false_body.lifted)
    leaves = [leaf.node for op in ops for leaf in operand_leaves(op)]  # passed flat
    true_graph = _subgraph(tx, "cond_true", true_body, lifted, len(leaves))
    false_graph = _subgraph(tx, "cond_false", false_body, lifted, len(leaves))
    operand_nodes = tuple(leaves + lifted)
    examples = [
        _fresh(tx, a, b) for a, b in zip(true_body.outputs, false_body.outputs, strict=True)
    ]
    call_args = (pred.node, true_graph, false_graph, operand_nodes)
    return _call(tx, COND, call_args, examples, true_body.spec)


def _leading_length(xs: list[VariableTracker]) -> Any:
    """The mapped length all `xs` share (an int, or a symbolic size decided equal and
    nonzero under guards, as eager's map checks them)."""
    if not xs or not all(isinstance(x, TensorVariable) and x.example.dim() for x in xs):
        raise Unsupported("map over a value that is not a tensor of at least one dimension")
    length = xs[0].example.shape[0]
    try:
        agree = all(bool(x.example.shape[0] == length) for x in xs) and bool(length > 0)
    except es.DataDependentError as exc:
        raise Unsupported(f"map over a length only the run knows: {exc}") from exc
    if not agree:
        raise Unsupported("map over tensors of different or zero leading lengths")
    return length


def _map_impl(tx, args, kwargs) -> VariableTracker:
    fn, xs_value, rest = _bind("map_impl", args, kwargs, ("f", "xs", "args"))
    xs = _items(tx, xs_value, "map's xs")
    extra = _items(tx, rest, "map's args")
    length = _leading_length(xs)
    output = tx.output
    slices = []  # stand-ins for one slice of each x: the body's first parameters
    for x in xs:
        node, example = output.create_node("call_function", torch.select, (x.node, 0, 0), {})
        slices.append(TensorVariable(node, example))
    body = trace_body(tx, fn, slices + extra)
    for stand_in in reversed(slices):
        output.graph.erase_node(stand_in.node)
        output.op_count -= 1
    body_graph = _subgraph(tx, "map_body", body, body.lifted, len(xs) + len(extra))
    with output.fake_mode:
        examples = [e.unsqueeze(0).expand(length, *e.shape).clone() for e in body.outputs]
    call_args = (body_graph, [x.node for x in xs], [a.node for a in extra] + body.lifted)
    return _call(tx, MAP_IMPL, call_args, examples, body.spec)


_OPERATORS = {COND: _cond, MAP_IMPL: _map_impl}


class ControlFlowOperatorVariable(VariableTracker):
    """A control-flow operator of the table above, called with bodies to capture."""

    def __init__(self, op: Any) -> None:
        super().__init__()
        self.op = op

    def python_type(self) -> type:
        return type(self.op)

    def as_python_constant(self) -> Any:
        return self.op

    def call_function(self, tx, args, kwargs):
        return _OPERATORS[self.op](tx, list(args), dict(kwargs))

    def __repr__(self) -> str:
        return f"ControlFlowOperatorVariable({self.op.name()})"


def _is_captured(tx, value: Any, source) -> bool:
    return any(value is op for op in _OPERATORS)  # by identity: no user __hash__ runs


@wrap_rule("control_flow_operator", when=_is_captured)
def _wrap_operator(tx, value: Any, source) -> VariableTracker:
    guard_identity(tx, value, source)
    return ControlFlowOperatorVariable(value)
