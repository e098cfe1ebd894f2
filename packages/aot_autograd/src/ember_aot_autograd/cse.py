"""Common subexpressions of a traced graph computed once.

Traced programs repeat work that eager does once per call site: each decoder layer turns the
same attention mask into the same additive bias, each layer's rotary embedding slices the
same cos/sin tables. After decomposition these are identical nodes (same op, same inputs,
same constants); one of them is enough, and the backward then saves or recomputes it once.

A node is merged into an earlier twin when its op is pure: an ATen op (or a prim) whose
schema writes nothing, that draws no random numbers (a seeded random prim given the same
seed tensor and offset is pure, and merges), and that returns something. Constants are
compared with their type (``1``, ``True`` and ``1.0`` differ; so do ``0.0`` and ``-0.0``);
an argument of a kind we cannot compare exactly keeps the node apart.

Two values that eager returns as distinct tensors stay distinct: a node is not merged when
both it and its twin reach the graph's outputs (directly or through views), since the
caller could write one and see the other change.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch._ops import OpOverload

__all__ = ["eliminate_common_subexpressions", "pure_op"]

#: constants compared by their value and type (enum-like torch objects by identity of value)
_CONSTANT_TYPES = (
    int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout,
    torch.memory_format,
)  # fmt: skip


class _NotComparable(Exception):
    """An argument whose equality we cannot decide exactly: its node stays apart."""


def _key(value: Any, merged: dict[torch.fx.Node, torch.fx.Node]) -> Any:
    if isinstance(value, torch.fx.Node):
        return ("node", merged.get(value, value))
    if isinstance(value, float):
        return ("float", value.hex() if value == value else "nan")  # -0.0 is not 0.0
    if isinstance(value, _CONSTANT_TYPES):
        return (type(value).__name__, value)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_key(v, merged) for v in value))
    raise _NotComparable(type(value).__name__)


def pure_op(node: torch.fx.Node) -> bool:
    """An op whose result depends on its arguments alone: it writes nothing, draws no
    random numbers (a seeded random prim given the same seed tensor and offset is pure),
    and returns something. Two such nodes with equal arguments compute equal values."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True  # an element of a (merged) multi-output node
    target = node.target
    if not isinstance(target, OpOverload):
        return False
    schema = target._schema
    if schema.is_mutable or not schema.returns:
        return False
    return torch.Tag.nondeterministic_seeded not in target.tags


def _returns_alias(node: torch.fx.Node) -> bool:
    """Whether the node's result may share storage with one of its inputs (a view)."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    target = node.target
    if not isinstance(target, OpOverload):
        return True  # unknown: assume it may
    return any(r.alias_info is not None for r in target._schema.returns)


def _mark_escaping(nodes: list[torch.fx.Node], escaping: set[torch.fx.Node]) -> None:
    """Adds ``nodes`` and the bases they view (transitively) to ``escaping``."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if node in escaping:
            continue
        escaping.add(node)
        if _returns_alias(node):
            stack.extend(node.all_input_nodes)


def eliminate_common_subexpressions(
    graph: torch.fx.Graph, writes: Callable[[torch.fx.Node], bool] = lambda node: False
) -> int:
    """Replaces each pure node by an earlier identical one; returns how many were replaced.
    ``writes(node)`` names ops that write an input although their schema does not say so
    (they are never merged). The replaced nodes are left for dead-code elimination."""
    escaping: set[torch.fx.Node] = set()
    _mark_escaping(
        [a for n in graph.nodes if n.op == "output" for a in n.all_input_nodes], escaping
    )
    first: dict[Any, torch.fx.Node] = {}
    merged: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in list(graph.nodes):
        if not pure_op(node) or writes(node):
            continue
        try:
            args = _key(node.args, merged)
            kwargs = _key(tuple(sorted(node.kwargs.items())), merged)
        except _NotComparable:
            continue
        key = (node.target, args, kwargs)
        twin = first.get(key)
        if twin is None:
            first[key] = node
            continue
        if node in escaping and twin in escaping:
            continue  # two results the caller sees: eager returns distinct tensors
        node.replace_all_uses_with(twin)
        merged[node] = twin
        if node in escaping:
            _mark_escaping([twin], escaping)
    return len(merged)
