"""``compile_graph(scheduled, target)``: a scheduled loop-IR graph -> a callable.

Targets are registered by name; "cpp" compiles C++/OpenMP kernels for the CPU, "triton"
Triton kernels (CUDA; CPU tensors under TRITON_INTERPRET=1). Triton is an optional extra.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ember_codegen.exc import CodegenError

if TYPE_CHECKING:  # imported lazily: the build layer alone must not need the loop IR
    from ember_inductor_ir import Schedule

TARGETS: dict[str, Callable[..., Any]] = {}


def register_target(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        TARGETS[name] = fn
        return fn

    return register


@register_target("cpp")
def _cpp(scheduled: Schedule, **options: Any) -> Any:
    from ember_codegen.cpp.emit.compiled import compile_cpp

    return compile_cpp(scheduled, **options)


@register_target("triton")
def _triton(scheduled: Schedule, **options: Any) -> Any:
    from ember_codegen.triton import compile_triton  # triton itself is imported lazily

    return compile_triton(scheduled, **options)


def compile_graph(scheduled: Schedule, target: str = "cpp", **options: Any) -> Any:
    """Compile ``scheduled`` (from ``ember_inductor_ir.schedule``) for ``target``.

    Returns ``compiled(inputs: list[Tensor]) -> list[Tensor]``. Options of the cpp target:
    ``builder`` (a :class:`ember_codegen.CppBuilder`, e.g. over a private cache directory).
    Options of the triton target: ``autotune`` (bool) or ``mode="max-autotune"``.
    """
    from ember_inductor_ir import Schedule

    if not isinstance(scheduled, Schedule):
        raise CodegenError(
            f"compile_graph needs a Schedule from ember_inductor_ir.schedule(lower(gm, inputs)), "
            f"got {type(scheduled).__name__}"
        )
    if target not in TARGETS:
        raise CodegenError(
            f"unknown compile_graph target {target!r}; known targets: {', '.join(TARGETS)}"
        )
    return TARGETS[target](scheduled, **options)
