"""`torch.vmap(fn, in_dims, out_dims)(*args)` captured as one call over a traced body.

`torch.vmap` (the same function as `torch.func.vmap`) is recognized by identity; its
implementation switches a global vmap nesting level, which the trace cannot follow, so
the call is captured whole instead:

- the body `fn` is traced (variables/subgraph_capture.py) on one example of each batched
  argument (`x.select(in_dim, 0)`), unbatched arguments as they are;
- the frame's graph calls `vmap_call(body_graph, in_dims, out_dims, *tensors)`, which runs
  `torch.vmap` over the body graph: eager runs the batching rules, and the aot stage traces
  them into batched aten ops (its dispatch mode sits below vmap's batching layer);
- the call's example outputs come from running that on the fake example values (eager's
  layouts); an output that is a batched argument itself (an in-place method returning its
  tensor, `lambda a: a`) with the same out_dim as in_dim is that argument, as eager returns
  the input object (`y is x`). In-place writes to the batched arguments are allowed (they
  write the caller's tensors, as eager's vmap does).

Refused (a graph break, where eager's vmap runs): `randomness` other than "error" or a
`chunk_size`; in_dims/out_dims other than ints/None (flat, one per argument/output);
keyword arguments; non-tensor arguments; an output aliasing an argument in another way
(eager returns a view there); whatever trace_body refuses (side effects, random ops, writes
to tensors other than the arguments).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard_identity, wrap_rule
from ember_bytecode_tracer.variables.subgraph_capture import (
    storage_of,
    trace_body,
    unflatten_result,
    with_lifted,
)
from ember_bytecode_tracer.variables.tensor import TensorVariable, wrap_graph_value


@torch.fx.node.has_side_effect  # its body may write the batched arguments in place
def vmap_call(body: torch.nn.Module, in_dims: tuple, out_dims: tuple, *args: Any) -> Any:
    """What the graph calls: `torch.vmap` over a captured body (a GraphModule returning a
    tuple)."""
    return torch.vmap(body, in_dims=in_dims, out_dims=out_dims)(*args)


def _constant(value: VariableTracker, what: str) -> Any:
    if not value.is_python_constant():
        raise Unsupported(f"vmap's {what} is not a constant")
    return value.as_python_constant()


_PER = {"in_dims": "argument", "out_dims": "output"}


def _is_dim(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _dims(value: Any, count: int, what: str) -> tuple:
    if _is_dim(value):
        return (value,) * count
    if isinstance(value, tuple | list) and len(value) == count and all(map(_is_dim, value)):
        return tuple(value)
    raise Unsupported(f"vmap's {what} {value!r}: only ints/None, one per {_PER[what]}")


class VmapVariable(VariableTracker):
    """`torch.vmap` itself: calling it gives the vmapped function."""

    def python_type(self) -> type:
        return type(torch.vmap)

    def as_python_constant(self) -> Any:
        return torch.vmap

    def call_function(self, tx, args, kwargs):
        names = ("func", "in_dims", "out_dims", "randomness", "chunk_size")
        bound = dict(zip(names, args, strict=False)) | dict(kwargs)
        if set(bound) - set(names) or "func" not in bound:
            raise Unsupported("torch.vmap called with arguments it does not take")
        options = {k: _constant(v, k) for k, v in bound.items() if k != "func"}
        if options.get("randomness", "error") != "error" or options.get("chunk_size"):
            raise Unsupported("torch.vmap with randomness or chunk_size: runs eagerly")
        return VmappedVariable(bound["func"], options.get("in_dims", 0), options.get("out_dims", 0))


class VmappedVariable(VariableTracker):
    """`torch.vmap(fn, in_dims, out_dims)`, called on tensors: captured (module docstring)."""

    def __init__(self, fn: VariableTracker, in_dims: Any, out_dims: Any) -> None:
        super().__init__()
        self.fn, self.in_dims, self.out_dims = fn, in_dims, out_dims

    def python_type(self) -> type:
        return type(torch.vmap(lambda x: x))

    def call_function(self, tx, args, kwargs):
        if kwargs or not args or not all(isinstance(a, TensorVariable) for a in args):
            raise Unsupported("a vmapped function called on other than positional tensors")
        in_dims = _dims(self.in_dims, len(args), "in_dims")
        if all(d is None for d in in_dims):
            raise Unsupported("vmap with no batched argument")
        output = tx.output
        stand_ins = []
        for arg, dim in zip(args, in_dims, strict=True):
            if dim is None:
                stand_ins.append(arg)
                continue
            node, example = output.create_node(
                "call_function", torch.select, (arg.node, dim, 0), {}
            )
            stand_ins.append(TensorVariable(node, example))
        batched = [s.node for s, a in zip(stand_ins, args, strict=True) if s is not a]
        body = trace_body(tx, self.fn, stand_ins, writable=batched)
        for stand_in, arg in reversed(list(zip(stand_ins, args, strict=True))):
            if stand_in is not arg:
                output.graph.erase_node(stand_in.node)
                output.op_count -= 1
        out_dims = _dims(self.out_dims, len(body.outputs), "out_dims")
        returned = _returned_arguments(body.outputs, stand_ins, args, in_dims, out_dims)
        name = output.add_subgraph("vmap_body", with_lifted(body, body.lifted, len(args)))
        all_in_dims = in_dims + (None,) * len(body.lifted)
        node_args = (output.graph.get_attr(name), all_in_dims, out_dims)
        node_args += tuple(a.node for a in args) + tuple(body.lifted)
        fakes = [n.meta["example_value"] for n in node_args[3:]]
        try:  # the batching rules on the example values: eager's layouts, or its refusal
            with output.fake_mode:
                examples = vmap_call(output.subgraphs[name], all_in_dims, out_dims, *fakes)
        except Exception as exc:  # a break: eager's vmap runs and raises its own error
            raise Unsupported(f"torch.vmap on the example values: {exc}") from exc
        node = output.graph.create_node("call_function", vmap_call, node_args, {})
        node.meta["example_value"] = tuple(examples)
        output.op_count += 1
        flat = wrap_graph_value(tx, node, tuple(examples)).items
        flat = [args[returned[i]] if i in returned else v for i, v in enumerate(flat)]
        return unflatten_result(flat, body.spec)


def _returned_arguments(outputs, stand_ins, args, in_dims, out_dims) -> dict[int, int]:
    """Output index -> argument index, for outputs that are a batched argument itself with
    the same dim (eager returns that tensor); any other alias of an argument is refused."""
    returned: dict[int, int] = {}
    storages = {storage_of(s.example) for s in stand_ins} - {None}
    for i, out in enumerate(outputs):
        same = [j for j, s in enumerate(stand_ins) if s.example is out and in_dims[j] is not None]
        if same and out_dims[i] == in_dims[same[0]]:
            returned[i] = same[0]
        elif storage_of(out) in storages:
            raise Unsupported("a vmapped function returns a view of its argument")
    return returned


def _is_vmap(tx, value: Any, source) -> bool:
    return value is torch.vmap


@wrap_rule("vmap_function", when=_is_vmap)
def _wrap_vmap(tx, value: Any, source) -> VariableTracker:
    guard_identity(tx, value, source)
    return VmapVariable()
