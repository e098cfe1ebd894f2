"""`ember.explain(fn)(*args)`: what compiling `fn` produced, without keeping it."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ember.backends.registry import lookup_backend
from ember.compile_api import OptimizedModule, trace_once
from ember_bytecode_tracer.convert_frame import FrameCompiler, FrameRecord, GraphBreak


@dataclass
class ExplainOutput:
    graphs: list[torch.fx.GraphModule] = field(default_factory=list)
    breaks: list[GraphBreak] = field(default_factory=list)
    guards: list[Any] = field(default_factory=list)
    records: list[FrameRecord] = field(default_factory=list)

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    @property
    def graph_break_count(self) -> int:
        return len(self.breaks)

    @property
    def ops_per_graph(self) -> list[list[str]]:
        return [
            [
                getattr(n.target, "__name__", str(n.target))
                for n in gm.graph.nodes
                if n.op.startswith("call")
            ]
            for gm in self.graphs
        ]

    def __str__(self) -> str:
        lines = [f"Graph count: {self.graph_count}", f"Graph break count: {self.graph_break_count}"]
        for i, ops in enumerate(self.ops_per_graph):
            lines.append(f"Graph {i}: {len(ops)} ops: {', '.join(ops)}")
        for brk in self.breaks:
            lines.append(f"Break: {brk.reason} at {brk.location}")
        for i, guard in enumerate(self.guards):
            lines.append(f"Guards of frame {i}:")
            lines.extend(f"  {g.describe()}" for g in guard.guards)
        return "\n".join(lines)


def run_as_traced(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    return gm.forward


def uncompiled(fn: Callable) -> Callable:
    """What `ember.compile` wrapped, for a compiled module or function (their own compiler
    and cache would answer the call, and the fresh trace would see nothing); else `fn`."""
    if isinstance(fn, OptimizedModule):
        return fn._orig_mod
    if inspect.ismethod(fn):  # a compiled method, bound: the original bound to the same self
        return types.MethodType(uncompiled(fn.__func__), fn.__self__)
    return getattr(fn, "_ember_original", fn)


def explain(fn: Callable, backend: str | Callable | None = None) -> Callable[..., ExplainOutput]:
    """Returns a function that runs `fn` once under a fresh trace and reports the result.

    `backend` is a registered name or a callable; by default graphs run as traced."""
    chosen = run_as_traced if backend is None else lookup_backend(backend)
    fn = uncompiled(fn)

    def run(*args, **kwargs) -> ExplainOutput:
        compiler = FrameCompiler(chosen)
        trace_once(fn, compiler, args, kwargs)
        out = ExplainOutput(records=compiler.records)
        for record in compiler.records:
            out.graphs.extend(record.graphs)
            out.breaks.extend(record.breaks)
            out.guards.append(record.guards)
        return out

    return run
