"""One wrapper for every binding of a graph's size symbols.

The kernels take the size symbols as int64 arguments; this wrapper reads the symbols from
the call's inputs into locals named after them (``s0 = args[0].shape[1]``) and prints every
size, stride, offset, storage size, view and kernel size argument as a Python expression
over those locals (size_bindings.PySize), so one ``exec`` of one source serves every size.
Planning decisions (held layouts, storage takeovers, view elision) are made only where they
hold for every binding; where one would depend on the values (NeedsConcreteSizes), the graph
keeps the per-binding wrapper (ember_codegen/wrapper/dynamic_wrapper.py), logged and counted
in WRAPPER_STATS.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ember_codegen.wrapper.dynamic_wrapper import SizeBinder, symbolic_wrapper_call
from ember_codegen.wrapper.size_bindings import SymbolicSizes
from ember_codegen.wrapper.symbolic_reads import SymbolicReads
from ember_codegen.wrapper.writer import WrapperCode
from ember_inductor_ir import Schedule

from .kernel import KernelSource
from .launch_runs import LaunchRun
from .wrapper import CppWrapperBuilder


class SymbolicWrapperBuilder(SymbolicReads, CppWrapperBuilder):
    """The C++ wrapper with sizes as expressions: called with every graph input (size
    inputs included), it reads the symbols it uses first (SymbolicReads)."""

    def __init__(
        self,
        sched: Schedule,
        kernels: dict[str, KernelSource],
        binder: SizeBinder,
        sizes: SymbolicSizes,
        *,
        trusted_inputs: bool = False,
        runs: Sequence[LaunchRun] = (),
    ) -> None:
        """Build it inside `symbolic(env)`, whose SymbolicSizes is `sizes`."""
        self.sizes = sizes
        self.binder = binder
        super().__init__(sched, kernels, trusted_inputs=trusted_inputs, runs=runs)


def symbolic_call(
    sched: Schedule,
    kernels: Sequence[KernelSource],
    namespace: dict[str, Any],
    binder: SizeBinder,
    trusted_inputs: bool,
    runs: Sequence[LaunchRun] = (),
) -> tuple[Callable, WrapperCode] | None:
    """`call(args)` serving every binding and its wrapper, or None where the wrapper needs
    concrete sizes (logged and counted; the caller writes it per binding)."""
    by_name = {k.name: k for k in kernels}

    def build(sizes: SymbolicSizes) -> WrapperCode:
        return SymbolicWrapperBuilder(
            sched, by_name, binder, sizes, trusted_inputs=trusted_inputs, runs=runs
        ).build()

    return symbolic_wrapper_call(sched, build, namespace, "wrapper")
