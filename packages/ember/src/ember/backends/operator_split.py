"""A graph calling control-flow operators, compiled around them: the rest of the graph and
every branch or body compiled by the same backend, the operator's choice made at run time.

The tracer (or Dynamo) hands a backend one graph holding `torch.ops.higher_order.cond` or
`map_impl` calls, their bodies as GraphModule attributes. The aot stage traces functions of
tensors, not a choice of function by a tensor's value, so such a graph is cut at each
operator call (`split_at_operators`):

- the nodes between two operator calls form a *piece*: a graph of its own, reading what
  earlier pieces (or the graph's inputs) computed and returning what later ones read;
- each operator call becomes a *runner*: its bodies are graphs as well, each compiled by
  the backend (a body holding an operator is cut the same way), and the runner calls the
  compiled body the operator's semantics pick:
  - `cond(pred, true_graph, false_graph, operands)`: `bool(pred)` (a host read of the
    one-element predicate, as eager's `cond` makes it) picks the compiled branch;
  - `map_impl(body, xs, args)`: the compiled body once per leading index of `xs`, its
    outputs stacked along a new leading dimension (eager's loop).
- a glue graph calls pieces and runners in the original order.

Pieces and bodies are compiled on their first call, with that call's tensors as example
inputs: their placeholders keep the tracer's example values (symbolic sizes included), so a
symbolic graph stays symbolic. A body handed by Dynamo with sizes of its own shape env is
compiled per concrete size signature (size_specialization.py), as its whole graph is. Gradients flow through whichever compiled body ran (each is
differentiable on its own, as aot compiles it). Where one branch differentiates and the
other does not, an output requires grad whichever ran, as the trace's example output does
(eager's operator is one autograd node over both), so the pieces after a runner always see
inputs of the kinds they were compiled for.

Each operator compiled this way is counted in `ember.counters["compiled_operators"]` by
name (`"higher_order.cond"`). Operators without a runner here leave the whole graph to the
eager fallback (eager_fallback.py), as do graphs whose pieces would write in place into a
value computed by another piece (cutting would make that write one piece's input write;
kept whole to stay exact), or that enter autocast inside themselves. A grad-mode switch
inside the graph (`with torch.no_grad():` around a cond) runs in the glue, between pieces.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from ember.backends.foreign_sizes import has_foreign_sizes
from ember.backends.size_specialization import SizeSpecializer
from ember.stats import counters

COND = torch.ops.higher_order.cond
MAP_IMPL = torch.ops.higher_order.map_impl

Compile = Callable[[torch.fx.GraphModule, list[Any]], Callable]


class CompiledOnCall(torch.nn.Module):
    """A graph compiled by `compile_fn` on its first call (that call's values are the
    example inputs)."""

    def __init__(self, gm: torch.fx.GraphModule, compile_fn: Compile) -> None:
        super().__init__()
        self.gm = gm
        self._compile_fn = compile_fn
        self._compiled: Callable | None = None

    def forward(self, *args: Any) -> Any:
        if self._compiled is None:
            examples = [
                n.meta.get("example_value", n.meta.get("val"))
                for n in self.gm.graph.find_nodes(op="placeholder")
            ]
            if has_foreign_sizes(examples):  # a body of Dynamo's: its sizes are not ours
                reason = "a body with sizes of another shape env"
                self._compiled = SizeSpecializer(self.gm, "body", self._compile_fn, 8, reason)
            else:
                self._compiled = self._compile_fn(self.gm, list(args))
        return self._compiled(*args)


def _grad_as_traced(outputs: Any, expects: tuple[bool, ...]) -> tuple:
    """`outputs` requiring grad where the trace's example outputs did (grad mode on): a body
    that did not differentiate, where the other branch does, gives a fresh leaf (its
    gradient is zero, as through eager's operator), so the pieces after the runner always
    get inputs of the kinds they were compiled for."""
    if not torch.is_grad_enabled() or not any(expects):
        return tuple(outputs)
    return tuple(
        t.detach().requires_grad_() if wants and not t.requires_grad else t
        for t, wants in zip(outputs, expects, strict=False)
    )


class CondRunner(torch.nn.Module):
    """`cond(pred, true_graph, false_graph, operands)` over compiled branches."""

    def __init__(self, branches: list[torch.fx.GraphModule], compile_fn: Compile) -> None:
        super().__init__()
        self.expects: tuple[bool, ...] = ()  # per output: whether its example requires grad
        self.true_branch = CompiledOnCall(branches[0], compile_fn)
        self.false_branch = CompiledOnCall(branches[1], compile_fn)

    def forward(self, pred: Any, *operands: Any) -> tuple:
        branch = self.true_branch if bool(pred) else self.false_branch
        return _grad_as_traced(branch(*operands), self.expects)


class MapRunner(torch.nn.Module):
    """`map_impl(body, xs, args)`: the compiled body per leading index, outputs stacked."""

    def __init__(self, bodies: list[torch.fx.GraphModule], compile_fn: Compile, n_xs: int):
        super().__init__()
        self.expects: tuple[bool, ...] = ()  # per output: whether its example requires grad
        self.body = CompiledOnCall(bodies[0], compile_fn)
        self.n_xs = n_xs

    def forward(self, *operands: Any) -> tuple:
        xs, rest = operands[: self.n_xs], operands[self.n_xs :]
        steps = [self.body(*(x[i] for x in xs), *rest) for i in range(xs[0].shape[0])]
        outputs = tuple(torch.stack(list(column)) for column in zip(*steps, strict=True))
        return _grad_as_traced(outputs, self.expects)


def _cond_call(node: torch.fx.Node) -> tuple[list[Any], list[Any], dict]:
    pred, true_graph, false_graph, operands = node.args
    return [true_graph, false_graph], [pred, *operands], {}


def _map_call(node: torch.fx.Node) -> tuple[list[Any], list[Any], dict]:
    body, xs, args = node.args
    return [body], [*xs, *args], {"n_xs": len(xs)}


#: operator -> (how its call reads: bodies, flat operands, runner options; its runner)
RUNNERS: dict[Any, tuple[Callable, type[torch.nn.Module]]] = {
    COND: (_cond_call, CondRunner),
    MAP_IMPL: (_map_call, MapRunner),
}


def _is_operator(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and isinstance(node.target, torch._ops.HigherOrderOperator)


#: grad-mode switches (a `with torch.no_grad()` block in the traced code): run in the glue,
#: in order, so that the pieces and runners between them run in the block's mode, as eager
GLUE_SWITCHES = frozenset({torch._C._set_grad_enabled})
#: autocast blocks: a graph holding one is kept whole (pieces would be traced without it)
WHOLE_SWITCHES = frozenset(
    {torch.amp.autocast_mode._enter_autocast, torch.amp.autocast_mode._exit_autocast}
)


def _writes(node: torch.fx.Node) -> torch.fx.Node | None:
    """The node an in-place call writes (its first argument), else None."""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if not isinstance(name, str) or not name.endswith("_") or name.endswith("__"):
        return None
    first = node.args[0] if node.args else None
    return first if isinstance(first, torch.fx.Node) else None


def _pieces(gm: torch.fx.GraphModule) -> list[Any] | None:
    """The graph's nodes in order as pieces (lists of nodes) and operator calls; None when
    the graph cannot be cut (an operator without a runner, a write across pieces)."""
    piece: list[torch.fx.Node] = []  # the piece being filled
    out: list[Any] = [piece]
    owner: dict[torch.fx.Node, int] = {}
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if node.op == "call_function" and node.target in WHOLE_SWITCHES:
            return None
        if node.op == "call_function" and node.target in GLUE_SWITCHES and not node.users:
            piece = []
            out.extend([node, piece])
        elif _is_operator(node):
            if node.target not in RUNNERS:
                return None
            piece = []
            out.extend([node, piece])
        elif node.op == "get_attr" and node.users and all(_is_operator(u) for u in node.users):
            continue  # a body: the runner holds it
        elif node.target is operator.getitem and _is_operator(node.args[0]):
            out.insert(len(out) - 1, node)  # an operator's output, read in the glue
        else:
            written = _writes(node)
            if written is not None and owner.get(written, id(piece)) != id(piece):
                return None
            owner[node] = id(piece)
            piece.append(node)
    return out
    return out


def _piece_module(gm, nodes, env) -> tuple[torch.fx.GraphModule, list, list]:
    """`nodes` as a graph of their own: its inputs (glue nodes) and its outputs (nodes read
    after it)."""
    graph = torch.fx.Graph()
    inside = set(nodes)
    local: dict[torch.fx.Node, torch.fx.Node] = {}
    inputs: list[torch.fx.Node] = []

    def read(node: torch.fx.Node) -> torch.fx.Node:
        if node not in local:
            local[node] = graph.placeholder(f"in{len(inputs)}")
            local[node].meta.update(node.meta)
            inputs.append(env[node])
        return local[node]

    for node in nodes:
        local[node] = graph.node_copy(node, read)
    outputs = [n for n in nodes if any(user not in inside for user in n.users)]
    graph.output(tuple(local[n] for n in outputs))
    return torch.fx.GraphModule(gm, graph), inputs, outputs


def _add_piece(gm, nodes, env, glue, compile_fn, index: int) -> None:
    if not nodes:
        return
    piece, inputs, outputs = _piece_module(gm, nodes, env)
    name = f"piece_{index}"
    glue.owning_module.add_module(name, CompiledOnCall(piece, compile_fn))
    call = glue.graph.call_module(name, tuple(inputs))
    for i, node in enumerate(outputs):
        env[node] = glue.graph.call_function(operator.getitem, (call, i))
        env[node].meta.update(node.meta)


def _add_runner(gm, node, env, glue, compile_fn, index: int) -> None:
    reads, runner_type = RUNNERS[node.target]
    bodies, operands, options = reads(node)
    modules = [getattr(gm, body.target) for body in bodies]
    name = f"{node.target.name()}_{index}"
    runner = runner_type(modules, compile_fn, **options)
    examples = node.meta.get("example_value")
    if isinstance(examples, tuple | list):
        runner.expects = tuple(
            isinstance(e, torch.Tensor) and e.requires_grad and e.is_floating_point()
            for e in examples
        )
    glue.owning_module.add_module(name, runner)
    args = tuple(env[o] if isinstance(o, torch.fx.Node) else o for o in operands)
    env[node] = glue.graph.call_module(name, args)
    env[node].meta.update(node.meta)
    counters["compiled_operators"][f"higher_order.{node.target.name()}"] += 1


class _Glue:
    def __init__(self) -> None:
        self.owning_module = torch.nn.Module()
        self.graph = torch.fx.Graph()


def split_at_operators(gm: torch.fx.GraphModule, compile_fn: Compile) -> Callable | None:
    """`gm` as a glue graph over compiled pieces and runners (see the module's docstring);
    None when it cannot be cut."""
    parts = _pieces(gm)
    if parts is None:
        return None
    glue = _Glue()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in gm.graph.find_nodes(op="placeholder"):
        env[node] = glue.graph.node_copy(node)
    for index, part in enumerate(parts):
        if isinstance(part, list):
            _add_piece(gm, part, env, glue, compile_fn, index)
        elif _is_operator(part):
            _add_runner(gm, part, env, glue, compile_fn, index)
        else:  # an operator's output, a grad-mode switch
            env[part] = glue.graph.node_copy(part, lambda n: env[n])
    output = next(iter(gm.graph.find_nodes(op="output")))
    glue.graph.node_copy(output, lambda n: env[n])
    return torch.fx.GraphModule(glue.owning_module, glue.graph).forward
