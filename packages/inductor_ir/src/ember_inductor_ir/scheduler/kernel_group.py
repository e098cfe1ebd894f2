"""Kernel groups: what ``schedule`` hands to code generators.

A loops group has an iteration space: outer ``sizes`` (parallel) and ``reduction_sizes``.
For each outer point the group runs its nodes in order; a node is placed as
``reduction`` (loops over the reduction space and combines), ``full`` (a pointwise over
outer x reduction space, run in its own pass over the reduction loops) or ``outer`` (a
pointwise over the outer space only, run once per outer point). Group variables are
``i0, i1, ...`` (outer) and ``r0, r1, ...`` (reduction); each node carries the index
expressions, in those variables, to call its body with.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Literal

import sympy
import torch

from ..extern import ExternKernel
from ..indexing import Expr, index_vars
from ..layout import Layout
from ..nodes import Buffer, ComputedBuffer
from .peak import live_bytes_bound, plan_peak_bytes

Placement = Literal["reduction", "full", "outer"]


@dataclass(eq=False)
class ScheduledNode:
    buffer: ComputedBuffer
    placement: Placement
    index: list[Expr]
    rindex: list[Expr]

    def run(self, ops: Any) -> None:
        """Run the node's body (compute and store) with ``ops``, in the group's variables."""
        self.buffer.store_body(ops, self.index, self.rindex)


@dataclass(eq=False)
class KernelGroup:
    name: str
    device: torch.device
    sizes: list[Expr] = field(default_factory=list)
    reduction_sizes: list[Expr] = field(default_factory=list)
    nodes: list[ScheduledNode] = field(default_factory=list)
    extern: ExternKernel | None = None
    #: Buffers the group reads that other groups (or the graph's inputs) provide.
    reads: set[str] = field(default_factory=set)
    #: Buffers the group writes that later groups or graph outputs read.
    writes: set[str] = field(default_factory=set)
    #: Buffers written and read only inside this group (a generator may keep them local).
    internal: set[str] = field(default_factory=set)

    @property
    def is_extern(self) -> bool:
        return self.extern is not None

    def index_vars(self) -> tuple[list[sympy.Symbol], list[sympy.Symbol]]:
        return index_vars("i", len(self.sizes)), index_vars("r", len(self.reduction_sizes))

    def var_ranges(self) -> dict[sympy.Symbol, Expr]:
        outer, red = self.index_vars()
        return dict(zip([*outer, *red], [*self.sizes, *self.reduction_sizes], strict=False))

    def buffer_names(self) -> list[str]:
        if self.extern is not None:
            return [o.name for o in self.extern.outputs]
        return [n.buffer.name for n in self.nodes]

    def register_only(self) -> set[str]:
        """Internal buffers of one value per output point (or per row's result): every
        generator keeps them in registers, never in storage. An internal full-row buffer may
        still be stored (a generator decides)."""
        return {
            n.buffer.name
            for n in self.nodes
            if n.placement in ("outer", "reduction") and n.buffer.name in self.internal
        }

    def describe(self) -> str:
        if self.extern is not None:
            return f"{self.name}: extern {self.extern.describe()}"
        space = f"[{', '.join(map(str, self.sizes))}]"
        if self.reduction_sizes:
            space += f" x reduce [{', '.join(map(str, self.reduction_sizes))}]"
        members = ", ".join(f"{n.buffer.name}({n.placement})" for n in self.nodes)
        return f"{self.name}: loops {space}: {members}"


@dataclass(frozen=True)
class Allocation:
    """Where a buffer's storage comes from: fresh, or the storage of a dead buffer, or
    (``in_place``) the storage of a buffer its own kernel reads last, at the elements it
    writes: another buffer of the graph (a pointwise kernel writing over its input), or the
    graph input the buffer's value is written back to (reuse.py's donations). An in-place
    buffer and its donor are one tensor while the kernel runs; the donor's name is freed
    after it."""

    buffer: str
    reuses: str | None
    in_place: bool = False


#: the value heuristics assume for a size read on the host (``t.item()``: the example has
#: none); a heuristic input only, never a correctness decision
UNBACKED_SIZE_HINT = 64


class Schedule(list):  # list[KernelGroup]
    """The ordered kernel groups plus what a wrapper needs around them."""

    def __init__(
        self,
        groups: list[KernelGroup],
        *,
        buffers: dict[str, Buffer],
        graph_inputs: list[str],
        graph_outputs: list[Any],
        constants: dict[str, torch.Tensor],
        allocations: dict[str, Allocation],
        frees: dict[str, list[str]],
        fallback_counts: dict[str, int],
        shape_env: Any = None,
        size_inputs: dict | None = None,
        scalar_reads: dict | None = None,
        scalar_asserts: list | None = None,
        releases_inputs: bool = False,
    ) -> None:
        super().__init__(groups)
        #: the caller hands the inputs over in a list the wrapper empties; the plan drops
        #: each after its last use (schedule's release_inputs)
        self.releases_inputs = releases_inputs
        #: symbolic sizes: the env owning their symbols (hints for code generators'
        #: heuristics, ranges), and the size symbols passed as graph inputs -> position
        self.shape_env = shape_env
        self.size_inputs = dict(size_inputs or {})
        #: unbacked symbols the wrapper reads from input elements (symbol -> ScalarRead),
        #: and its host checks on them (ScalarAssert), before any kernel
        self.scalar_reads = dict(scalar_reads or {})
        self.scalar_asserts = list(scalar_asserts or [])
        self.buffers = buffers
        self.graph_inputs = graph_inputs
        self.graph_outputs = graph_outputs
        self.constants = constants
        self.allocations = allocations
        #: group name -> buffers whose storage is dead after that group
        self.frees = frees
        self.fallback_counts = fallback_counts

    def layout(self, name: str) -> Layout:
        return self.buffers[name].layout

    def size_hint(self, expr: Any) -> int:
        """A size's value on the example inputs (what heuristics decide with; never a
        correctness decision)."""
        expr = sympy.sympify(expr)
        if expr.is_Integer:
            return int(expr)
        reads = {s: sympy.Integer(UNBACKED_SIZE_HINT) for s in self.scalar_reads}
        if reads and expr.free_symbols & reads.keys():  # a size read on the host: no example
            expr = sympy.sympify(expr.xreplace(reads))
            if expr.is_Integer:
                return int(expr)
        return int(self.shape_env.size_hint(expr))

    def nbytes(self, buf: Buffer) -> int:
        """The bytes of ``buf``'s storage on the example inputs."""
        return self.size_hint(buf.layout.storage_numel()) * buf.get_dtype().itemsize

    def peak_bytes(
        self, at_peak: dict[str, int] | None = None, unstored: AbstractSet[str] = frozenset()
    ) -> int:
        """The most bytes of storage the memory plan holds at once (scheduler/peak.py:
        ``at_peak`` receives the storages then held; ``unstored``, buffers a generator kept
        in registers)."""
        return plan_peak_bytes(
            self, self.buffers, self.allocations, self.frees, self.nbytes, at_peak, unstored
        )

    def live_bytes_bound(self) -> int:
        """The least a plan without in-place writes could hold (scheduler/peak.py)."""
        keep = {spec.name for spec in self.graph_outputs if spec.name is not None}
        return live_bytes_bound(self, self.buffers, keep, self.nbytes)

    def describe(self) -> str:
        lines = [g.describe() for g in self]
        reused = [a for a in self.allocations.values() if a.reuses is not None]
        lines += [
            f"{'in place' if a.in_place else 'reuse'}: {a.buffer} takes the storage of {a.reuses}"
            for a in reused
        ]
        return "\n".join(lines)
