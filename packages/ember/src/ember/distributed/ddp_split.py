"""Graphs traced inside a DDP forward are compiled as one piece per DDP bucket.

`split_for_ddp(backend)` wraps a backend. When the tracer hands it a graph while a
`DistributedDataParallel` forward is running (`DistributedDataParallel._get_active_ddp_module()`,
set by DDP around its inner module's call, both for `ember.compile(DDP(m))` and
`DDP(ember.compile(m))`), the graph is split along DDP's buckets (buckets.py) with
`torch.fx.passes.split_module`, each piece is compiled by the wrapped backend on its own
(its own autograd function, so its backward hands DDP's hooks its parameters' gradients as
soon as it finishes), and the pieces run in order from a small FX parent graph.

Everything else about DDP stays DDP's: its forward, `no_sync()`, `find_unused_parameters`
and the reducer's hooks run eagerly around the compiled pieces. What was split is counted
in `ember.counters["ddp"]` (`split_graphs`, `pieces`) and logged on `ember.ddp`.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable

import torch
from torch.fx.passes.split_module import split_module

from ember.distributed.buckets import BucketCaps, assign_buckets
from ember.stats import counters

log = logging.getLogger("ember.ddp")

Backend = Callable[[torch.fx.GraphModule, list], Callable]


def active_ddp_module() -> torch.nn.Module | None:
    """The DDP module whose forward is running (DDP's own hook for compilers), if any."""
    if not torch.distributed.is_available():
        return None
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel._get_active_ddp_module()


def split_for_ddp(backend: Backend) -> Backend:
    """`backend`, splitting graphs traced under a DDP forward at DDP's bucket boundaries."""

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        ddp = active_ddp_module()
        if ddp is None:
            return backend(gm, example_inputs)
        return DDPSplitter(ddp, backend).compile(gm, example_inputs)

    compile_graph._ember_wrapped_backend = backend
    return compile_graph


class DDPSplitter:
    def __init__(self, ddp: torch.nn.Module, backend: Backend) -> None:
        self.ddp = ddp
        self.backend = backend
        self.caps = BucketCaps.of(ddp)

    def compile(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        params = self._parameter_placeholders(gm, example_inputs)
        sizes = _bind_size_symbols(gm)
        example_inputs = [*example_inputs, *(example_inputs[i].size(d) for i, d in sizes)]
        pieces, buckets = assign_buckets(gm, params, self.caps)
        count = max(pieces.values(), default=0) + 1
        counters["ddp"]["graphs_seen"] += 1
        if count == 1:
            return self.backend(gm, example_inputs)
        split = split_module(gm, gm, lambda node: pieces[node], keep_original_order=True)
        _pieces_return_tuples(split)
        counters["ddp"]["split_graphs"] += 1
        counters["ddp"]["pieces"] += count
        log.info(
            "graph split into %d pieces for DDP buckets of %s bytes (caps %s)",
            count, [b.nbytes for b in buckets], self.caps.caps,
        )  # fmt: skip
        _compile_pieces(split, example_inputs, self.backend)
        if not sizes:
            return split.forward
        run = split.forward

        def with_sizes(*args):
            return run(*args, *(args[i].size(d) for i, d in sizes))

        return with_sizes

    def _parameter_placeholders(
        self, gm: torch.fx.GraphModule, example_inputs: list
    ) -> dict[torch.fx.Node, int]:
        """Placeholders fed DDP's own parameters that take gradients (by identity)."""
        owned = {id(p) for p in self.ddp.parameters() if p.requires_grad}
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        return {
            node: value.numel() * value.element_size()
            for node, value in zip(placeholders, example_inputs, strict=True)
            if isinstance(value, torch.Tensor) and id(value) in owned
        }


def _bind_size_symbols(gm: torch.fx.GraphModule) -> list[tuple[int, int]]:
    """Size symbols that only an input tensor's shape carries become int inputs of their own.

    The tracer reads a size where an op needs it; split_module needs an input binding every
    size symbol a piece's tensors mention, to hand it to that piece. Returns, per added
    input, (index of the tensor input, dim) to read it from at call time."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    bound = {
        value.node.expr
        for n in placeholders
        if isinstance(value := n.meta.get("example_value"), torch.SymInt)
    }
    sources: list[tuple[int, int]] = []
    anchor = placeholders[-1] if placeholders else None
    for index, node in enumerate(placeholders):
        value = node.meta.get("example_value")
        if not isinstance(value, torch.Tensor):
            continue
        for dim, size in enumerate(value.shape):
            expr = getattr(getattr(size, "node", None), "expr", None)
            if not isinstance(size, torch.SymInt) or not getattr(expr, "is_Symbol", False):
                continue
            if expr in bound:
                continue
            with gm.graph.inserting_after(anchor):
                anchor = gm.graph.placeholder(f"ember_size_{index}_{dim}")
            anchor.meta["example_value"] = size
            bound.add(expr)
            sources.append((index, dim))
    if sources:
        gm.recompile()
    return sources


def _pieces_return_tuples(split: torch.fx.GraphModule) -> None:
    """A piece with one output returns it bare; backends take graphs returning a tuple
    (the tracer's convention), so such a piece returns a 1-tuple unpacked in the parent."""
    for node in list(split.graph.nodes):
        if node.op != "call_module":
            continue
        piece = getattr(split, node.target)
        output = next(n for n in piece.graph.nodes if n.op == "output")
        if isinstance(output.args[0], (tuple, list)):
            continue
        output.args = ((output.args[0],),)
        piece.recompile()
        with split.graph.inserting_after(node):
            first = split.graph.call_function(operator.getitem, (node, 0))
        node.replace_all_uses_with(first, delete_user_cb=_other_than(first))
        first.meta = dict(node.meta)
    split.recompile()


def _other_than(node: torch.fx.Node) -> Callable[[torch.fx.Node], bool]:
    return lambda user: user is not node


def _compile_pieces(split: torch.fx.GraphModule, example_inputs: list, backend: Backend) -> None:
    """Compiles each piece with the values reaching it: the pieces run once, eagerly, on the
    example inputs (real tensors, so each piece's backend sees what a call gives it)."""
    env: dict[torch.fx.Node, object] = {}
    inputs = iter(example_inputs)
    for node in split.graph.nodes:
        if node.op == "placeholder":
            env[node] = next(inputs)
        elif node.op == "call_module":
            piece = getattr(split, node.target)
            args = torch.fx.node.map_arg(node.args, env.__getitem__)
            env[node] = piece(*args)  # in the grad mode the graph was traced under
            compiled = backend(piece, list(args))
            setattr(split, node.target, _CompiledPiece(compiled))
        elif node.op == "call_function":
            args = torch.fx.node.map_arg(node.args, env.__getitem__)
            kwargs = torch.fx.node.map_arg(node.kwargs, env.__getitem__)
            env[node] = node.target(*args, **kwargs)
    split.recompile()


class _CompiledPiece(torch.nn.Module):
    """A compiled piece in the parent graph's module slot."""

    def __init__(self, compiled: Callable) -> None:
        super().__init__()
        self.compiled = compiled

    def forward(self, *args):
        return self.compiled(*args)
