"""Checks on graphs handed to compilers, and the clean-up passes that precede them."""

from __future__ import annotations

import os
from collections.abc import Callable

import torch
import torch.fx
from torch._ops import OpOverload

from ember_aot_autograd.cse import eliminate_common_subexpressions
from ember_aot_autograd.errors import GraphNotFunctionalError, MissingMetadataError
from ember_aot_autograd.printable import keyword_safe

aten = torch.ops.aten

# ops whose schema does not say they mutate, keyed by op: predicate(node) -> mutates
_HIDDEN_MUTATIONS: dict[OpOverload, Callable[[torch.fx.Node], bool]] = {
    aten.native_batch_norm.default: lambda node: bool(node.args[5]) and node.args[3] is not None,
}

# ops that only forward their input (autograd bookkeeping): dropped before compilers see them
_PASSTHROUGH = {aten.detach.default, aten.alias.default}


def mutating_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    found = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, OpOverload):
            continue
        hidden = _HIDDEN_MUTATIONS.get(node.target)
        if node.target._schema.is_mutable or (hidden is not None and hidden(node)):
            found.append(node)
    return found


def assert_functional(gm: torch.fx.GraphModule) -> None:
    """Raises GraphNotFunctionalError naming each node that mutates its arguments."""
    found = mutating_nodes(gm)
    if found:
        names = ", ".join(f"{n.name} ({n.target})" for n in found)
        raise GraphNotFunctionalError(f"graph is not functional: {names}")


def assert_has_val(gm: torch.fx.GraphModule) -> None:
    """Raises MissingMetadataError naming each node without node.meta['val']."""
    missing = [n.name for n in gm.graph.nodes if n.op != "output" and "val" not in n.meta]
    if missing:
        raise MissingMetadataError(f"nodes without meta['val']: {', '.join(missing)}")


def drop_passthrough(graph: torch.fx.Graph) -> None:
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target in _PASSTHROUGH:
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)


def _writes_hidden(node: torch.fx.Node) -> bool:
    hidden = _HIDDEN_MUTATIONS.get(node.target)  # type: ignore[arg-type]
    return hidden is not None and hidden(node)


def clean(graph: torch.fx.Graph) -> None:
    """Drops autograd bookkeeping, computes common subexpressions once (cse.py), drops dead
    nodes, then lints."""
    drop_passthrough(graph)
    if os.environ.get("EMBER_AOT_CSE", "1") != "0":  # 0: keep every repeated computation
        eliminate_common_subexpressions(graph, writes=_writes_hidden)
    graph.eliminate_dead_code()
    graph.lint()
    keyword_safe(graph)  # `aten.random.from` printed as a call that compiles
