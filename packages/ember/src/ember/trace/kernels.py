"""What a compiled graph's kernels are, for the trace: source and the FX nodes each fused."""

from __future__ import annotations

from typing import Any

from ember.trace import active
from ember.trace.hooks import emit


def _origins(group: Any) -> list[str]:
    names: list[str] = []
    if group.extern is not None:
        names += list(getattr(group.extern, "origins", ()))
    for node in group.nodes:
        names += [n for n in node.buffer.origins if n not in names]
    return names


def _kernel_code(compiled: Any) -> dict[str, str]:
    """Kernel name -> its source, for the C++ (`kernels`) and Triton (`groups`) targets."""
    code = {k.name: k.code for k in getattr(compiled, "kernels", ())}
    for group in getattr(compiled, "groups", ()):
        code[group.name] = "\n\n".join(k.code for k in group.kernels)
    return code


def emit_kernels(gm: Any, scheduled: Any, compiled: Any, target: str) -> None:
    """One `kernels` event per compiled prim graph (nothing when no trace is being written);
    `scheduled` is None for code from the artifact cache (no fusion record then)."""
    if active() is None:
        return
    code = _kernel_code(compiled)
    if scheduled is None:  # from the codegen artifact cache: the code, not the schedule
        kernels = [{"name": name, "fused_nodes": [], "language": target, "extern": None,
                    "code": text, "cached": True} for name, text in code.items()]  # fmt: skip
        emit("kernels", prim_graph=gm, target=target, kernels=kernels, source=None,
             wrapper=getattr(compiled, "wrapper_source", None))  # fmt: skip
        return
    kernels = [
        {
            "name": g.name,
            "fused_nodes": _origins(g),
            "language": target,
            "extern": g.extern.kernel_name if g.extern is not None else None,
            "code": code.get(g.name),
        }
        for g in scheduled
    ]
    # the whole source only where per-kernel code is unknown (each text is written once)
    whole = (
        None
        if code
        else getattr(compiled, "cpp_source", None) or getattr(compiled, "triton_source", None)
    )
    emit("kernels", prim_graph=gm, target=target, kernels=kernels, source=whole,
         wrapper=getattr(compiled, "wrapper_source", None))  # fmt: skip


def emit_fallbacks(prims: dict, aten: dict) -> None:
    for op, count in prims.items():
        emit("fallback", kind="prim", op=str(op), count=count)
    for op, count in aten.items():
        emit("fallback", kind="aten", op=str(op), count=count)
