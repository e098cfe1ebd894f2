"""Schedule -> C++ source + wrapper -> compiled, loaded, callable graph."""

from __future__ import annotations

import ctypes
import logging
import time
from collections.abc import Sequence
from typing import Any

import torch

from ember_codegen.cache import atomic_write, content_key
from ember_codegen.cpp.build import CppBuilder, default_builder
from ember_codegen.cpp.loader import ERROR_MESSAGES, LoadedKernelLibrary
from ember_codegen.exc import KernelRuntimeError
from ember_codegen.wrapper.dynamic_wrapper import DynamicWrapper, SizeBinder
from ember_codegen.wrapper.runtime import call_without_autocast
from ember_codegen.wrapper.size_bindings import bound
from ember_inductor_ir import DynamicShapeUnsupported, Schedule

from .kernel import KernelSource, build_kernel
from .launch_runs import LaunchRun, plan_runs
from .source import TranslationUnit, split_units
from .symbolic_wrapper import symbolic_call
from .wrapper import CppWrapperBuilder, check_cpu, runtime_namespace

output_code_log = logging.getLogger("ember.output_code")
perf_log = logging.getLogger("ember.perf")

#: error codes of ember_kernels_extra.h on top of the runtime's
KERNEL_ERRORS = {**ERROR_MESSAGES, 2: "IndexError: index out of range in a gather/index kernel"}


class CompiledGraph:
    """``compiled(inputs: list[Tensor]) -> list[Tensor]``; the generated code stays readable
    on ``cpp_source`` (also ``source``) and ``wrapper_source``. A large graph's kernels are
    several translation units (``units``), one library each (``libraries``; ``library`` is
    the first, whose error code the wrapper reads)."""

    #: the code generator that wrote it (its capability record: target.py)
    target = "cpp"

    def __init__(
        self,
        call: Any,
        cpp_source: str,
        wrapper_source: str,
        kernels: Sequence[KernelSource],
        library: LoadedKernelLibrary | None,
        fallback_counts: dict[str, int],
        runs: Sequence[LaunchRun] = (),
        units: Sequence[TranslationUnit] = (),
        libraries: Sequence[LoadedKernelLibrary] = (),
    ) -> None:
        self._call = call
        self.units = list(units) or [TranslationUnit(tuple(kernels), tuple(runs))]
        self.libraries = list(libraries) or ([library] if library is not None else [])
        #: the native entry points that each call a run of kernels (launch_runs.py)
        self.runs = list(runs)
        self.cpp_source = cpp_source
        self.wrapper_source = wrapper_source
        self.kernels = list(kernels)
        self.library = library
        self.fallback_counts = dict(fallback_counts)

    @property
    def source(self) -> str:
        """The kernels' source (the C++ translation units, one after the other)."""
        return self.cpp_source

    @property
    def kernel_count(self) -> int:
        return len(self.kernels)

    @property
    def native_calls(self) -> int:
        """Calls into the shared object per call of the graph: one per run of kernels
        between extern calls (a lone kernel is called directly)."""
        in_runs = sum(len(run.kernels) for run in self.runs)
        return len(self.runs) + len(self.kernels) - in_runs

    def __call__(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return call_without_autocast(self._call, inputs)


#: ctypes of the kernels' size and scalar arguments, by their C type
_C_TYPES = {"int64_t": ctypes.c_int64, "double": ctypes.c_double}


def native_functions(
    library: LoadedKernelLibrary, kernels: Sequence[KernelSource], runs: Sequence[LaunchRun]
) -> dict:
    """The wrapper's names for the raw ctypes functions (pointers are passed as ints
    computed once per call): each kernel's (``_k_<kernel>``) and each run's entry point
    (``_run_<first kernel>``), and the library's error code (``_error``)."""
    functions = {}
    for kernel in kernels:
        fn = library.cdll[kernel.name]
        fn.argtypes = [ctypes.c_void_p] * len(kernel.params) + [
            _C_TYPES[kernel.param_type(n)] for n in kernel.size_params
        ]
        fn.restype = None
        functions[f"_k_{kernel.name}"] = fn
    for run in runs:
        fn = library.cdll[run.name]
        fn.argtypes = [ctypes.c_void_p] * len(run.pointers) + [
            _C_TYPES[run.size_type(n)] for n in run.sizes
        ]
        fn.restype = ctypes.c_int if run.may_fail else None
        functions[f"_{run.name}"] = fn
    functions["_error"] = ctypes.c_int.in_dll(library.cdll, "ember_error_code")
    return functions


def error_raiser(library: LoadedKernelLibrary | None) -> Any:
    def raise_kernel_error(kernel_name: str) -> None:
        code = library.take_error() if library is not None else 0
        message = KERNEL_ERRORS.get(code, f"unknown error code {code}")
        raise KernelRuntimeError(f"kernel {kernel_name}: {message}")

    return raise_kernel_error


def units_source(units: Sequence[TranslationUnit]) -> str:
    """The graph's C++ as one text: its translation units one after the other."""
    return "\n".join(unit.source for unit in units)


def load_units(
    units: Sequence[TranslationUnit], build: Any, namespace: dict
) -> list[LoadedKernelLibrary]:
    """Each unit's library, built (in parallel) or found in the kernel cache by
    ``build(sources)``; the wrapper's native functions bound into ``namespace``, each to the
    library that holds it (the error code and error raiser: the first's, see source.py)."""
    libraries: list[LoadedKernelLibrary] = []
    if any(unit.kernels for unit in units):
        libraries = build([unit.source for unit in units])
        for library, unit in zip(libraries, units, strict=True):
            namespace.update(native_functions(library, unit.kernels, unit.runs))
        namespace["_error"] = ctypes.c_int.in_dll(libraries[0].cdll, "ember_error_code")
    namespace["_raise_kernel_error"] = error_raiser(libraries[0] if libraries else None)
    return libraries


def _emit(sched: Schedule, trusted_inputs: bool) -> tuple:
    """The kernels, their runs, the size binder (or None) and the example's wrapper."""
    try:
        kernels = [build_kernel(g, sched) for g in sched if g.extern is None]
        by_name = {k.name: k for k in kernels}
        runs = plan_runs(sched, by_name)
        binder = SizeBinder(sched, kernels) if sched.shape_env is not None else None
        with bound(binder.hints() if binder is not None else {}):  # the example's binding
            wrapper = CppWrapperBuilder(
                sched, by_name, trusted_inputs=trusted_inputs, runs=runs
            ).build()
    except TypeError as exc:
        # emission that needs a static size met a symbol: declared, so that the caller
        # may compile static specializations instead
        if sched.shape_env is None:
            raise
        raise DynamicShapeUnsupported(f"C++ emission needs static sizes: {exc}") from exc
    return kernels, runs, binder, wrapper


def compile_cpp(
    sched: Schedule, builder: CppBuilder | None = None, *, trusted_inputs: bool = False
) -> CompiledGraph:
    """``trusted_inputs``: the caller guarantees the inputs' sizes and dtypes (see
    WrapperBuilder); the wrapper then checks only their strides."""
    start = time.perf_counter()
    check_cpu(sched)
    kernels, runs, binder, wrapper = _emit(sched, trusted_inputs)
    units = split_units(kernels, runs)
    cpp_source = units_source(units)
    generated = time.perf_counter()
    builder = builder if builder is not None else default_builder()
    namespace = {**runtime_namespace(), **wrapper.namespace}
    libraries = load_units(units, builder.compile_many, namespace)

    def graph(call: Any, wrapper_source: str) -> CompiledGraph:
        return CompiledGraph(
            call, cpp_source, wrapper_source, kernels, libraries[0] if libraries else None,
            sched.fallback_counts, runs, units, libraries,
        )  # fmt: skip

    symbolic = None  # one wrapper for every binding of the size symbols
    if binder is not None:
        symbolic = symbolic_call(sched, kernels, namespace, binder, trusted_inputs, runs)
    if symbolic is not None:
        call, shown = symbolic
        output_code_log.info("C++ kernels (%d, symbolic sizes):\n%s", len(kernels), cpp_source)
        output_code_log.info("wrapper (every size):\n%s", shown.source)
        return graph(call, shown.source)
    if binder is not None:  # the fallback: one wrapper per binding, same kernels
        by_name = {k.name: k for k in kernels}
        call = DynamicWrapper(
            sched,
            lambda: CppWrapperBuilder(
                sched, by_name, trusted_inputs=trusted_inputs, runs=runs
            ).build(),
            namespace,
            binder,
        )
        output_code_log.info("C++ kernels (%d, symbolic sizes):\n%s", len(kernels), cpp_source)
        return graph(call, wrapper.source)
    key = content_key(["ember-cpp-wrapper", cpp_source, wrapper.source])
    path = builder.cache.subdirectory("wrapper") / f"{key}.py"
    if not path.exists():
        atomic_write(path, wrapper.source.encode())
    exec(compile(wrapper.source, str(path), "exec"), namespace)
    output_code_log.info("C++ kernels (%d):\n%s", len(kernels), cpp_source)
    output_code_log.info("wrapper %s:\n%s", path, wrapper.source)
    perf_log.info(
        "compile_graph(cpp): %d kernels in %d units, codegen %.3fs, build+load %.3fs",
        len(kernels), len(units), generated - start, time.perf_counter() - generated,
    )  # fmt: skip
    return graph(namespace["call"], wrapper.source)
