"""A function traced into a subgraph of its own: the body of a control-flow operator.

`trace_body(tx, fn, args)` calls `fn` on the trackers `args` the way any call is traced
(its ops land in the frame's graph), then moves what the call added into a standalone
`torch.fx.Graph`:

- its parameters are the nodes of `args`, in order, then every node from outside the call
  that it reads (a tensor from the enclosing function, a parameter of a module): those are
  *lifted*, and the operator's call passes them as extra operands;
- the nodes are taken out of the frame's graph again (the operator's one call stands for
  them there);
- an output that is an input, or a view of one, is cloned: the operator's outputs are new
  tensors.

A body whose trace changes anything outside itself is refused (a graph break, the operator
then runs as it is): Python state (containers, attributes, closure cells, globals: compared
before and after through the trackers that reach them), an in-place write to a tensor from
outside (but to the arguments a caller names `writable`: vmap's batched ones), a random op (the generator's state would advance whichever branch runs). A body
that cannot be traced at all raises its own `Unsupported` the same way.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.fx

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import LocalSource
from ember_bytecode_tracer.output_graph import is_mutating
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.dicts import ConstDictVariable
from ember_bytecode_tracer.variables.lazy import LazyLocal
from ember_bytecode_tracer.variables.lists import ListVariable, TupleVariable
from ember_bytecode_tracer.variables.tensor import TensorVariable


@dataclasses.dataclass
class Body:
    """A traced body: its graph takes `len(args)` parameters, then one per `lifted` node."""

    graph: torch.fx.Graph
    params: list[torch.fx.Node]  # the graph's placeholders, args first
    lifted: list[torch.fx.Node]  # outer nodes read by the body, in first-read order
    outputs: list[Any]  # example values of the flat outputs
    spec: Any  # how the flat outputs nest (see flatten_result)


def flatten_result(value: VariableTracker) -> tuple[list[TensorVariable], Any]:
    """A tensor or a (nested) tuple/list of tensors: its tensors and its nesting."""
    if isinstance(value, TensorVariable):
        return [value], None
    if isinstance(value, TupleVariable | ListVariable) and type(value) in (
        TupleVariable,
        ListVariable,
    ):
        flat, specs = [], []
        for item in value.items:
            leaves, spec = flatten_result(item)
            flat.extend(leaves)
            specs.append((len(leaves), spec))
        return flat, (type(value), specs)
    raise Unsupported(
        f"a control-flow body returned {type(value).__name__}: only tensors and tuples/lists "
        "of tensors are captured"
    )


def unflatten_result(items: list[VariableTracker], spec: Any) -> VariableTracker:
    if spec is None:
        return items[0]
    kind, specs = spec
    out, at = [], 0
    for count, sub in specs:
        out.append(unflatten_result(items[at : at + count], sub))
        at += count
    return kind(out)


def same_layout(spec_a: Any, spec_b: Any) -> bool:
    if spec_a is None or spec_b is None:
        return spec_a is spec_b
    return (
        spec_a[0] is spec_b[0]
        and len(spec_a[1]) == len(spec_b[1])
        and all(
            na == nb and same_layout(sa, sb)
            for (na, sa), (nb, sb) in zip(spec_a[1], spec_b[1], strict=True)
        )
    )


# ---- the state a body must leave alone --------------------------------------------------


def _fingerprint(roots: list[Any]) -> dict[int, tuple]:
    """What the trackers reachable from `roots` hold (by identity): a mutation by the trace
    changes it. Private attributes (caches, pending guards) are not state, nor are the
    real Python values trackers keep (a function's globals): only trackers and the
    containers between them are followed. A frame local not read yet (LazyLocal) is the
    same value once read (it is then its tracker): both are named by their source."""
    seen: set[int] = set()
    out: dict[int, tuple] = {}
    stack = list(roots)
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, VariableTracker):
            members = [(k, v) for k, v in vars(value).items() if not k.startswith("_")]
        elif isinstance(value, dict):
            members = [(id(k), v) for k, v in value.items()]
            stack.extend(k for k in value if isinstance(k, VariableTracker))
        elif isinstance(value, list | tuple | set):
            members = list(enumerate(value))
        else:
            continue
        members = [(k, v) for k, v in members if isinstance(v, _FOLLOWED)]
        out[id(value)] = tuple((k, _identity(v)) for k, v in members)
        stack.extend(v for _, v in members if not isinstance(v, LazyLocal))
    return out


_FOLLOWED = (VariableTracker, list, tuple, set, dict)


def _identity(value: Any) -> Any:
    if isinstance(value, LazyLocal) or (
        isinstance(value, VariableTracker) and isinstance(value.source, LocalSource)
    ):
        return value.source
    return id(value)


def _state(tx, roots: list[Any]) -> tuple[tuple, dict[int, tuple]]:
    output = tx.output
    frames, frame = [], tx
    while frame is not None:
        frames.extend((frame.symbolic_locals, frame.stack))
        frame = frame.parent
    effects = vars(output.side_effects)
    counts = (
        len(output.runtime_checks),
        len(output.graph_leaves),
        len(output.made_parameters),
        len(output.draws),
        len(output.warnings_blocks),
        len(output.graph_free_contexts),
        len(output.dynamic.unbacked_nodes),  # a size only the run knows, read from a node
    )
    return counts, _fingerprint([*roots, *frames, *effects.values()])


def _unchanged(before: tuple, after: tuple) -> bool:
    """Every tracker and container reached before holds what it held (newly reached ones
    are new values, or frame locals read for the first time)."""
    return before[0] == after[0] and all(after[1].get(k) == v for k, v in before[1].items())


# ---- moving the call's nodes into a graph of their own -----------------------------------


def storage_of(value: Any) -> Any:
    """An id of a strided tensor's storage (fake ones included); None for others."""
    if not isinstance(value, torch.Tensor) or value.layout != torch.strided:
        return None
    try:
        return value.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None


def _check_region(region: list[torch.fx.Node], writable: list[torch.fx.Node]) -> None:
    inside = set(region) | set(writable)  # a write to a `writable` node is the body's own
    outer_storages = {
        storage_of(read.meta.get("example_value"))
        for node in region
        for read in node.all_input_nodes
        if read not in inside
    } - {None}
    outer_storages -= {storage_of(n.meta.get("example_value")) for n in writable}
    for node in region:
        if node.meta.get("draws_random"):
            raise Unsupported("a random op inside a control-flow body")
        target = node.args[0] if node.args else None
        if not (is_mutating(node) and isinstance(target, torch.fx.Node)):
            continue
        # a write to an outer tensor, directly or through a view of it made in the body
        if target not in inside or storage_of(target.meta.get("example_value")) in outer_storages:
            raise Unsupported(
                "an in-place write inside a control-flow body to a tensor from outside it"
            )


def _extract(
    region: list[torch.fx.Node],
    arg_nodes: list[torch.fx.Node],
    out_nodes: list[torch.fx.Node],
) -> tuple[torch.fx.Graph, list[torch.fx.Node], list[torch.fx.Node]]:
    """The standalone graph of `region`, its placeholders, and the outer nodes it lifts."""
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    params = []
    for i, node in enumerate(arg_nodes):
        if node in env:  # one tensor passed twice: one parameter reads as both
            params.append(graph.placeholder(f"arg{i}"))
            continue
        env[node] = graph.placeholder(f"arg{i}")
        env[node].meta.update(node.meta)
        params.append(env[node])
    lifted: list[torch.fx.Node] = []

    def read(node: torch.fx.Node) -> torch.fx.Node:
        if node not in env:  # from outside the body: lifted as one more parameter
            if not isinstance(node.meta.get("example_value"), torch.Tensor):
                raise Unsupported(f"a control-flow body reads the non-tensor value {node.name}")
            env[node] = graph.placeholder(f"lifted{len(lifted)}")  # order: `params`
            env[node].meta.update(node.meta)
            lifted.append(node)
            params.append(env[node])
        return env[node]

    for node in region:
        env[node] = graph.node_copy(node, read)
    outputs = []
    arg_storages = {storage_of(n.meta.get("example_value")) for n in env if n not in region}
    for node in out_nodes:
        value = read(node)
        example = node.meta.get("example_value")
        if node not in region or storage_of(example) in arg_storages - {None}:
            value = graph.call_function(torch.clone, (value,))  # an input is no output
            value.meta["example_value"] = example
        outputs.append(value)
    graph.output(tuple(outputs))
    return graph, params, lifted


def operand_leaves(value: VariableTracker) -> list[TensorVariable]:
    """The tensors of an operand: a tensor, or tuples, lists and dicts nesting tensors."""
    if isinstance(value, TensorVariable):
        return [value]
    if type(value) in (TupleVariable, ListVariable):
        return [leaf for item in value.items for leaf in operand_leaves(item)]
    if type(value) is ConstDictVariable and value.python_type() is dict:
        return [leaf for item in value.items.values() for leaf in operand_leaves(item)]
    raise Unsupported(
        f"a control-flow operand of type {value.python_type().__name__}: only tensors "
        "(nested in tuples, lists, dicts) are captured"
    )


def trace_body(
    tx, fn: VariableTracker, args: list[VariableTracker], writable: list[torch.fx.Node] = ()
) -> Body:
    """`fn(*args)` traced into a graph of its own (see the module's docstring); the graph's
    parameters are the tensors of `args` (operand_leaves), then the lifted ones. The body
    may write in place the nodes of `writable` (of `args`: vmap's batched arguments)."""
    leaves = [leaf for arg in args for leaf in operand_leaves(arg)]
    outer = tx.output.graph
    before_nodes = set(outer.nodes)
    before = _state(tx, [fn, *args])
    result = fn.call_function(tx, list(args), {})
    if not _unchanged(before, _state(tx, [fn, *args])):
        raise Unsupported(
            "a control-flow body changes state outside itself (Python objects, closure "
            "variables, globals): torch.cond and map bodies must be functional"
        )
    flat, spec = flatten_result(result)
    new = [n for n in outer.nodes if n not in before_nodes]
    region = [n for n in new if n.op != "placeholder"]  # new graph inputs stay outside
    _check_region(region, list(writable))
    graph, params, lifted = _extract(region, [a.node for a in leaves], [t.node for t in flat])
    for node in reversed(region):
        if any(user not in region for user in node.users):
            raise Unsupported("a control-flow body's value is used outside it")
        outer.erase_node(node)
    tx.output.op_count -= sum(1 for n in region if n.op.startswith("call"))
    return Body(graph, params, lifted, [t.example for t in flat], spec)


def with_lifted(body: Body, lifted: list[torch.fx.Node], n_args: int) -> torch.fx.Graph:
    """`body`'s graph taking `n_args` parameters, then one per node of `lifted` (a superset
    of the body's own lifted nodes, in the order the operator's call passes them)."""
    graph = torch.fx.Graph()
    val_map: dict[torch.fx.Node, torch.fx.Node] = {}
    for i, param in enumerate(body.params[:n_args]):
        val_map[param] = graph.placeholder(f"arg{i}")
        val_map[param].meta.update(param.meta)
    own = dict(zip(body.lifted, body.params[n_args:], strict=True))
    for i, node in enumerate(lifted):
        placeholder = graph.placeholder(f"lifted{i}")
        placeholder.meta.update(node.meta)
        if node in own:
            val_map[own[node]] = placeholder
    result = graph.graph_copy(body.graph, val_map)
    graph.output(result)
    return graph


def union(*lists: list[torch.fx.Node]) -> list[torch.fx.Node]:
    out: list[torch.fx.Node] = []
    for nodes in lists:
        out.extend(n for n in nodes if n not in out)
    return out
