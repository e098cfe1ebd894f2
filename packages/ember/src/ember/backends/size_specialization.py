"""Prim graphs with symbolic sizes that the loop IR cannot compile symbolically: one static
specialization per concrete size signature, compiled on first use and cached.

Correct for every size (each specialization is an ordinary static compile of the same
graph, its sizes made concrete), bounded by `InductorSettings.dynamic_specializations`;
past the bound a new signature runs the prim graph as an FX graph. Both are counted in
`ember.counters["inductor"]` (`static_specializations`, `specialization_overflow_runs`)
and logged under `ember.dynamic`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode

from ember.stats import counters

log = logging.getLogger("ember.dynamic")
_SYM = (torch.SymInt, torch.SymFloat, torch.SymBool)


def has_symbolic_sizes(gm: torch.fx.GraphModule) -> bool:
    """Whether any node's meta['val'] holds a SymInt (a size, or a tensor's size/stride)."""
    for node in gm.graph.nodes:
        for leaf in torch.utils._pytree.tree_leaves(node.meta.get("val")):
            if isinstance(leaf, _SYM):
                return True
            if isinstance(leaf, torch.Tensor) and any(
                isinstance(s, torch.SymInt) for s in (*leaf.shape, *leaf.stride())
            ):
                return True
    return False


def signature(args: Sequence[Any]) -> tuple:
    return tuple(
        (tuple(a.shape), a.stride(), a.dtype) if isinstance(a, torch.Tensor) else a for a in args
    )


def static_graph(gm: torch.fx.GraphModule, args: Sequence[Any]) -> torch.fx.GraphModule:
    """A copy of `gm` whose meta['val'] are recomputed on static fakes of `args`: its sizes
    (and its size nodes' values) are the ints of this call. Non-tensor inputs (SymInt
    placeholders) become constants: the copy takes the tensor inputs only."""
    graph = torch.fx.Graph()
    output = graph.graph_copy(gm.graph, {})
    graph.output(output)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    for node, arg in zip(placeholders, args, strict=True):
        if not isinstance(arg, torch.Tensor):
            node.replace_all_uses_with(arg)
            graph.erase_node(node)
    static = torch.fx.GraphModule(gm, graph)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = [mode.from_tensor(a) for a in args if isinstance(a, torch.Tensor)]

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node: torch.fx.Node) -> Any:
            value = super().run_node(node)
            if node.op == "get_attr" and isinstance(value, torch.Tensor):
                value = mode.from_tensor(value)
            if node.op != "output":
                node.meta["val"] = value
                if "example_value" in node.meta:  # a torch-level graph's (the tracer's) too
                    node.meta["example_value"] = value
            return value

    with mode:
        Recorder(static).run(*fakes)
    return static


class SizeSpecializer:
    """`run(*args)`: the static compile for these args' sizes (compiled on first use)."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        kind: str,
        compile_static: Callable[[torch.fx.GraphModule, list], Callable],
        limit: int,
        reason: str,
    ) -> None:
        self.gm = gm
        self.kind = kind
        self.compile_static = compile_static
        self.limit = limit
        self.compiled: dict[tuple, Callable] = {}
        log.warning(
            "%s graph with symbolic sizes compiled per concrete size (at most %d): %s",
            kind,
            limit,
            reason,
        )

    def __call__(self, *args: Any) -> Any:
        key = signature(args)
        run = self.compiled.get(key)
        if run is None:
            run = self._compile(key, args)
        return run(*args)

    def _compile(self, key: tuple, args: Sequence[Any]) -> Callable:
        stats = counters["inductor"]
        if len(self.compiled) >= self.limit:
            if not stats["specialization_overflow_runs"]:
                log.warning(
                    "%s graph: %d size specializations compiled (the limit); sizes %s and "
                    "later new ones run as an FX graph",
                    self.kind,
                    self.limit,
                    key,
                )
            stats["specialization_overflow_runs"] += 1
            return self.gm.forward
        stats["static_specializations"] += 1
        log.info("%s graph: compiling a static specialization for sizes %s", self.kind, key)
        tensors = [k for k, a in enumerate(args) if isinstance(a, torch.Tensor)]
        compiled = self.compile_static(static_graph(self.gm, args), [args[k] for k in tensors])

        def run(*call_args: Any) -> Any:
            return compiled(*[call_args[k] for k in tensors])

        self.compiled[key] = run
        return run
