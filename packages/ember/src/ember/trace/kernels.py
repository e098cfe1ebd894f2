"""What a compiled graph's kernels are, for the trace: source and the FX nodes each fused."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

from ember.trace import active
from ember.trace.hooks import emit
from ember_aot_autograd import graph_from_source

FUSION_LOG = "ember.fusion"  # the scheduler's decisions (fused, refused and why)


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextlib.contextmanager
def captured_log(name: str, always: bool = False) -> Iterator[list[str] | None]:
    """The INFO lines logged on `name` inside the block, while a trace is written or when
    `always` (None otherwise). Where nobody listens at INFO the lines are captured without
    reaching any other handler; where someone does (EMBER_LOGS) they still reach it."""
    if active() is None and not always:
        yield None
        return
    logger, handler = logging.getLogger(name), _Lines()
    saved = (logger.level, logger.propagate)
    if not logger.isEnabledFor(logging.INFO):
        logger.setLevel(logging.INFO)
        logger.propagate = False
    logger.addHandler(handler)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)
        logger.level, logger.propagate = saved


def kernel_notes(scheduled: Any) -> dict:
    """What the report shows of a schedule, as text kept with the cached code: each kernel's
    fused FX nodes (and extern kernel) and the kernel groups."""
    return {
        "fused": {g.name: _origins(g) for g in scheduled},
        "extern": {g.name: g.extern.kernel_name for g in scheduled if g.extern is not None},
        "kernel_groups": scheduled.describe(),
    }


def emit_loop_ir(gm: Any, notes: dict) -> None:
    """A prim graph's loop IR, its kernel groups and the fusion decisions that made them."""
    if active() is not None and (notes.get("loop_ir") or notes.get("kernel_groups")):
        emit("loop_ir", prim_graph=gm, loop_ir=notes.get("loop_ir", ""),
             kernel_groups=notes.get("kernel_groups", ""),
             fusion=list(notes.get("fusion") or ()))  # fmt: skip


def traced_graph(kind: str, source: Any) -> Any:
    """A prim graph the aot artifact cache stored as source, rebuilt and recorded as an aot
    graph of the trace (a warm start shows its graphs too); None when no trace is written."""
    if active() is None:
        return None
    gm = graph_from_source(source)
    emit("graph", gm=gm, stage=f"aot_{kind}")
    return gm


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


def emit_kernels(
    gm: Any, scheduled: Any, compiled: Any, target: str, notes: dict | None = None
) -> None:
    """One `kernels` event per compiled prim graph (nothing when no trace is being written);
    `scheduled` is None for code from the artifact cache: `notes` (kept with the code) then
    tell each kernel's fused nodes, and its loop IR where it was recorded."""
    if active() is None:
        return
    code = _kernel_code(compiled)
    if scheduled is None:  # from the codegen artifact cache: the code and its notes
        notes = notes or {}
        fused, extern = notes.get("fused") or {}, notes.get("extern") or {}
        kernels = [{"name": name, "fused_nodes": list(fused.get(name, ())), "language": target,
                    "extern": extern.get(name), "code": text, "cached": True}
                   for name, text in code.items()]  # fmt: skip
        emit("kernels", prim_graph=gm, target=target, kernels=kernels, source=None,
             wrapper=getattr(compiled, "wrapper_source", None))  # fmt: skip
        emit_loop_ir(gm, notes)
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
