"""`ember.export(fn)(*args)`: the whole function as one graph with its guards."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ember.compile_api import trace_once
from ember.exc import EmberError
from ember_bytecode_tracer.convert_frame import FrameCompiler, FrameRecord


class ExportGuardError(EmberError):
    """Arguments that do not satisfy the guards the export was traced under."""


@dataclass
class Exported:
    """One graph for the whole function, its guards, and a way to call it."""

    graph_module: torch.fx.GraphModule
    record: FrameRecord
    signature: inspect.Signature
    closure: dict[str, Any]
    bound_self: Any = None  # the module, when a module's forward was exported

    @property
    def guards(self):
        return self.record.guards

    def __call__(self, *args, **kwargs):
        if self.bound_self is not None:
            args = (self.bound_self, *args)
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        f_locals = {**dict(bound.arguments), **self.closure}
        if not self.record.guards(f_locals):
            reason = self.record.guards.failure_reason(f_locals)
            raise ExportGuardError(f"arguments do not match the exported program: {reason}")
        return self.record.runner(*(f_locals[name] for name in self.record.input_names))

    def __str__(self) -> str:
        guards = "\n".join(f"  {g.describe()}" for g in self.record.guards.guards)
        return f"{self.graph_module.code.strip()}\n\nguards:\n{guards}"


def export(fn: Callable) -> Callable[..., Exported]:
    """Traces `fn` on the given arguments with fullgraph=True; the result is runnable."""
    if not callable(fn):
        raise EmberError(f"ember.export expects a function or nn.Module, got {type(fn).__name__}")

    def run(*args, **kwargs) -> Exported:
        target = fn.forward if isinstance(fn, torch.nn.Module) else fn
        graphs: list[torch.fx.GraphModule] = []

        def backend(gm, example_inputs):
            graphs.append(gm)
            return gm.forward

        compiler = FrameCompiler(backend, fullgraph=True)
        trace_once(fn, compiler, args, kwargs)
        records = [r for r in compiler.records if r.code is target.__code__]
        if not records or not graphs:
            raise EmberError(
                f"{getattr(target, '__qualname__', target)} produced no graph to export"
            )
        record = records[0]
        signature = inspect.signature(target)
        free = target.__code__.co_freevars
        closure = {n: c.cell_contents for n, c in zip(free, target.__closure__ or (), strict=True)}
        bound_self = None
        if isinstance(fn, torch.nn.Module):
            signature, bound_self = inspect.signature(target.__func__), fn
        graph = record.graphs[0] if record.graphs else graphs[-1]
        return Exported(graph, record, signature, closure, bound_self)

    return run
