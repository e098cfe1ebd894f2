"""``compile_graph(scheduled, target)``: a scheduled loop-IR graph -> a callable.

Targets are registered by name; "cpp" compiles C++/OpenMP kernels for the CPU, "triton"
Triton kernels (CUDA; CPU tensors under TRITON_INTERPRET=1). Triton is an optional extra,
imported when a graph is compiled for it. Each target's capability record (what the loop IR
lowers for) is declared beside its op table (targets.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember_codegen.cpp.emit.compiled import compile_cpp
from ember_codegen.exc import CodegenError
from ember_codegen.triton import compile_triton
from ember_inductor_ir import Schedule, Target

TARGETS: dict[str, Callable[..., Any]] = {}


def register_target(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        TARGETS[name] = fn
        return fn

    return register


@register_target("cpp")
def _cpp(scheduled: Schedule, **options: Any) -> Any:
    return compile_cpp(scheduled, **options)


@register_target("triton")
def _triton(scheduled: Schedule, **options: Any) -> Any:
    return compile_triton(scheduled, **options)  # triton itself is imported lazily


def compile_graph(scheduled: Schedule, target: str | Target = "cpp", **options: Any) -> Any:
    """Compile ``scheduled`` (from ``ember_inductor_ir.schedule``) for ``target`` (a name or
    its capability record).

    Returns ``compiled(inputs: list[Tensor]) -> list[Tensor]``, with ``target`` (the name)
    and ``source`` (the kernels' source) attributes. Options of the cpp target:
    ``builder`` (a :class:`ember_codegen.CppBuilder`, e.g. over a private cache directory).
    Options of the triton target: ``autotune`` (bool) or ``mode="max-autotune"``.
    """
    if not isinstance(scheduled, Schedule):
        raise CodegenError(
            f"compile_graph needs a Schedule from ember_inductor_ir.schedule(lower(gm, inputs)), "
            f"got {type(scheduled).__name__}"
        )
    name = target.name if isinstance(target, Target) else target
    if name not in TARGETS:
        raise CodegenError(
            f"unknown compile_graph target {name!r}; known targets: {', '.join(TARGETS)}"
        )
    return TARGETS[name](scheduled, **options)
