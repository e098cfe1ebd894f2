"""How a kernel group's loops and nodes are laid out, on either target: its loop sizes
(`loop_sizes`), and its nodes in *segments* for each outer point.
An ``outer`` segment runs its nodes once; a ``loop`` segment runs its ``reduction``/``full``
nodes inside the reduction loop(s). A new loop segment starts when a node reads a reduction
finished in the current one (softmax: max, then sum, then normalize)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy

from ember_inductor_ir import ReadWriteHandler, ScheduledNode


@dataclass
class Segment:
    kind: str  # "outer" | "loop"
    nodes: list[ScheduledNode] = field(default_factory=list)
    reduced: set[str] = field(default_factory=set)


def _reads(node: ScheduledNode) -> set[str]:
    rw = ReadWriteHandler()
    node.run(rw)
    return {name for name, _ in rw.reads}


def plan_segments(nodes: list[ScheduledNode]) -> list[Segment]:
    segments: list[Segment] = []
    for node in nodes:
        kind = "outer" if node.placement == "outer" else "loop"
        current = segments[-1] if segments else None
        if current is None or current.kind != kind or (_reads(node) & current.reduced):
            current = Segment(kind)
            segments.append(current)
        current.nodes.append(node)
        if node.placement == "reduction":
            current.reduced.add(node.buffer.name)
    return segments


def loop_sizes(values: Sequence[Any]) -> list[Any]:
    """Loop sizes: ints, or sympy expressions over size symbols (kernel arguments)."""
    out = []
    for v in values:
        v = sympy.sympify(v)
        out.append(int(v) if v.is_Integer else v)
    return out
