"""Compiled graphs with symbolic sizes, on either target: the size symbols are read from
each call's inputs (SizeBinder), and either one wrapper serves every binding
(`symbolic_wrapper_call`) or the wrapper written for each binding (DynamicWrapper, cached)
calls the kernels compiled once for all sizes, passing the symbols' values as their size
arguments."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ember_inductor_ir import DynamicShapeUnsupported, Schedule

from .size_bindings import WRAPPER_STATS, NeedsConcreteSizes, SymbolicSizes, bound, symbolic
from .writer import WrapperCode

log = logging.getLogger("ember.output_code")

#: wrappers kept per compiled graph (one per distinct binding of its size symbols); past
#: this the oldest is dropped (a wrapper is ~1 ms of Python to write, no C++ build)
MAX_WRAPPERS = 64


def _reader(kind: str, position: int, dim: Any) -> Callable[[Sequence[Any]], int]:
    if kind == "size":
        return lambda args: args[position].shape[dim]
    if kind == "stride":
        return lambda args: args[position].stride(dim)
    if kind == "scalar":
        return lambda args: args[position]
    if kind == "item":
        return lambda args: args[position][dim].item()
    return lambda args: int(args[position])


class SizeBinder:
    """Where each size symbol is read from: a graph input's size or stride, or a size input."""

    def __init__(self, sched: Schedule, kernels: Sequence[Any]) -> None:
        """`kernels`: each with `size_params` (the size symbols it takes as arguments)."""
        self.env = sched.shape_env
        sources: dict[str, tuple[str, int, int]] = {}
        self.tensor_positions = []
        for name in sched.graph_inputs:
            buffer = sched.buffers[name]
            position = buffer.position
            self.tensor_positions.append(position)
            layout = buffer.layout
            for kind, values in (("size", layout.size), ("stride", layout.stride)):
                for dim, value in enumerate(values):
                    if getattr(value, "is_Symbol", False):
                        sources.setdefault(value.name, (kind, position, dim))
        for symbol, position in sched.size_inputs.items():
            sources.setdefault(symbol.name, ("int", position, 0))
        for symbol, read in sched.scalar_reads.items():  # t.item() of an input's element
            kind = "scalar" if read.index is None else "item"
            sources.setdefault(symbol.name, (kind, read.position, read.index))
        needed = {n for k in kernels for n in k.size_params}
        needed |= {s.name for s in sched.scalar_reads}  # read even where only returned
        for buffer in sched.buffers.values():
            layout = buffer.layout
            for value in (*layout.size, *layout.stride, layout.offset):
                needed |= {s.name for s in getattr(value, "free_symbols", ())}
        missing = needed - set(sources)
        if missing:
            raise DynamicShapeUnsupported(
                f"size symbols {sorted(missing)} are not a size of any graph input"
            )
        self.scalar_reads = dict(sched.scalar_reads)
        #: symbol name -> where it is read: ("size" | "stride" | "int", position, dim)
        self.sources = sources
        self.names = sorted(needed, key=lambda n: (len(n), n))
        self.readers = [_reader(*sources[n]) for n in self.names]

    def read(self, args: Sequence[Any]) -> tuple[int, ...]:
        return tuple(read(args) for read in self.readers)

    def hints(self) -> dict[str, int]:
        by_name = {str(s): int(v) for s, v in self.env.var_to_val.items()}
        # a value read on the host (t.item()) has no example: any stands in, the wrapper
        # written under these hints only shows the code (the symbolic one reads the value)
        by_name.update({str(s): 1.0 if r.is_float else 1 for s, r in self.scalar_reads.items()})
        return {n: by_name[n] for n in self.names if n in by_name}


class DynamicWrapper:
    """`call(args)` of a compiled graph with symbolic sizes (args: every graph input, ints
    for size inputs). `build()` writes the wrapper (WrapperCode) for the current binding
    with the target's wrapper builder."""

    def __init__(
        self,
        sched: Schedule,
        build: Callable[[], WrapperCode],
        namespace: dict[str, Any],
        binder: SizeBinder,
    ) -> None:
        if sched.scalar_reads or sched.scalar_asserts:
            # a wrapper per binding has no host checks, and would key on float values
            raise DynamicShapeUnsupported(
                "scalars read on the host (t.item()) need the wrapper of every binding"
            )
        self.sched = sched
        self.build = build
        self.namespace = namespace
        self.binder = binder
        self.calls: dict[tuple[int, ...], Callable] = {}
        positions = binder.tensor_positions
        self.select = lambda args: [args[p] for p in positions]

    def __call__(self, args: Sequence[Any]) -> list[torch.Tensor]:
        key = self.binder.read(args)
        call = self.calls.get(key)
        if call is None:
            call = self._write(key)
        return call(self.select(args))

    def _write(self, key: tuple[int, ...]) -> Callable:
        with bound(dict(zip(self.binder.names, key, strict=True))):
            wrapper = self.build()
        namespace = {**self.namespace, **wrapper.namespace}
        exec(compile(wrapper.source, f"<ember wrapper {key}>", "exec"), namespace)
        WRAPPER_STATS["wrapper_execs"] += 1
        if len(self.calls) >= MAX_WRAPPERS:
            self.calls.pop(next(iter(self.calls)))
        call = self.calls[key] = namespace["call"]
        return call


def symbolic_wrapper_call(
    sched: Schedule,
    build: Callable[[SymbolicSizes], WrapperCode],
    namespace: dict[str, Any],
    what: str,
) -> tuple[Callable, WrapperCode] | None:
    """`call(args)` serving every binding and its wrapper, or None where the wrapper needs
    concrete sizes (logged and counted; the caller writes it per binding). `build(sizes)`
    writes the wrapper inside `symbolic(env)`; `what` names it in the log and as the
    source's file name ("wrapper", "triton wrapper")."""
    try:
        with symbolic(sched.shape_env) as sizes:
            wrapper = build(sizes)
    except NeedsConcreteSizes as reason:
        WRAPPER_STATS["per_binding_fallback"] += 1
        log.info("%s written per binding of the size symbols: %s", what, reason)
        return None
    scope = {**namespace, **wrapper.namespace}
    exec(compile(wrapper.source, f"<ember symbolic {what}>", "exec"), scope)
    WRAPPER_STATS["symbolic"] += 1
    WRAPPER_STATS["wrapper_execs"] += 1
    return scope["call"], wrapper
