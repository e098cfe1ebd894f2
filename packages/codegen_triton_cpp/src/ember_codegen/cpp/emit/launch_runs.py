"""One native call per run of kernels: the loops groups between two extern calls run from
one generated C entry point in the graph's shared object.

The wrapper used to call each kernel through its own ctypes call (~0.5 us of argument
conversion and GIL release each, before the kernel does anything). Kernels that follow
each other with no extern call between them need nothing from Python in between: the
buffers they read and write are allocated before the run and freed after it, so one entry
point calls them in order. It takes each distinct buffer pointer once (a buffer written by
one kernel and read by the next is one argument) and each size symbol once; the kernels
themselves, their OpenMP regions included, are unchanged. A kernel that can fail (integer
division by zero, an index out of range) stops the run: the entry returns its position + 1
and the wrapper raises the error eager would, naming that kernel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ember_inductor_ir import Schedule

from .dtypes import cpp_type
from .kernel import KernelSource


@dataclass(frozen=True)
class LaunchRun:
    """An entry point ``name`` calling ``kernels`` in order; its arguments are ``pointers``
    (buffer names, each once) then ``sizes`` (size symbol names, each once)."""

    name: str
    kernels: tuple[KernelSource, ...]
    pointers: tuple[str, ...]
    sizes: tuple[str, ...]

    def size_type(self, name: str) -> str:
        """The C type of size argument ``name`` (double: a float read on the host)."""
        floats = any(name in k.float_params for k in self.kernels)
        return "double" if floats else "int64_t"

    @property
    def may_fail(self) -> bool:
        return any(k.may_fail for k in self.kernels)

    @property
    def kernel_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.kernels)

    def to_data(self) -> dict:
        """Plain data (the umbrella's artifact cache); ``from_data`` reads it back."""
        return {
            "name": self.name,
            "kernels": list(self.kernel_names),
            "pointers": list(self.pointers),
            "sizes": list(self.sizes),
        }

    @classmethod
    def from_data(cls, data: dict, kernels: Mapping[str, KernelSource]) -> LaunchRun:
        return cls(
            data["name"],
            tuple(kernels[name] for name in data["kernels"]),
            tuple(data["pointers"]),
            tuple(data["sizes"]),
        )

    @property
    def code(self) -> str:
        decls = [f"void* {p}" for p in self.pointers]
        decls += [f"const {self.size_type(s)} {s}" for s in self.sizes]
        result = "int" if self.may_fail else "void"
        lines = [
            f"// {self.name}: {', '.join(self.kernel_names)} in one call from the wrapper",
            f"EMBER_KERNEL {result} {self.name}({', '.join(decls)}) {{",
        ]
        for position, kernel in enumerate(self.kernels):
            args = [f"static_cast<{cpp_type(p.dtype).storage}*>({p.buffer})" for p in kernel.params]
            lines.append(f"  {kernel.name}({', '.join([*args, *kernel.size_params])});")
            if kernel.may_fail:  # stop where eager would raise; the wrapper names the kernel
                lines.append(f"  if (ember_error_code) return {position + 1};")
        if self.may_fail:
            lines.append("  return 0;")
        lines.append("}")
        return "\n".join(lines)


#: arguments of one entry point at most: ctypes calls take at most 1024 (an optimizer step
#: over a model's parameters reads and writes thousands of buffers), and fewer stay cheap
MAX_RUN_ARGUMENTS = 512


def _arguments(kernel: KernelSource) -> set[str]:
    return {p.buffer for p in kernel.params} | set(kernel.size_params)


def plan_runs(sched: Schedule, kernels: Mapping[str, KernelSource]) -> list[LaunchRun]:
    """The runs of at least two consecutive loops groups of ``sched`` (a lone kernel is
    called directly: an entry point would only add a C call), each taking at most
    MAX_RUN_ARGUMENTS arguments."""
    runs: list[LaunchRun] = []
    current: list[KernelSource] = []
    arguments: set[str] = set()

    def close() -> None:
        if len(current) >= 2:
            runs.append(_run(current))
        current.clear()
        arguments.clear()

    for group in sched:
        if group.extern is not None:
            close()
            continue
        kernel = kernels[group.name]
        if len(arguments | _arguments(kernel)) > MAX_RUN_ARGUMENTS:
            close()
        current.append(kernel)
        arguments.update(_arguments(kernel))
    close()
    return runs


def _run(kernels: Sequence[KernelSource]) -> LaunchRun:
    pointers: dict[str, None] = {}
    sizes: dict[str, None] = {}
    for kernel in kernels:
        pointers.update(dict.fromkeys(p.buffer for p in kernel.params))
        sizes.update(dict.fromkeys(kernel.size_params))
    return LaunchRun(f"run_{kernels[0].name}", tuple(kernels), tuple(pointers), tuple(sizes))


def runs_source(runs: Sequence[LaunchRun]) -> str:
    """The entry points, after every kernel in the translation unit."""
    return "".join(f"\n{run.code}\n" for run in runs)
