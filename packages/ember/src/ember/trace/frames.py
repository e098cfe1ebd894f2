"""A compiled frame's record (the tracer's FrameRecord) as trace events."""

from __future__ import annotations

from typing import Any

from ember.trace.writer import TraceWriter
from ember_bytecode_tracer.bytecode import decode, format_instructions
from ember_bytecode_tracer.guards import describe_guard


def _guards(guards: Any) -> tuple[list[dict], list[dict]]:
    """(ordinary guards, shape guards), each with the user line that added it."""
    plain = [
        {"kind": g.kind.name, "text": describe_guard(g), "where": g.user_location or ""}
        for g in getattr(guards, "guards", ())
    ]
    shapes = [
        {"code": g.code, "text": g.expr, "where": g.where or ""}
        for g in getattr(guards, "rendered", ())
    ]
    return plain, shapes


def write_frame(writer: TraceWriter, record: Any) -> None:
    """The frame, its bytecode, guards and recompile reason; its graphs were written when
    the backend received them (linked here by id), its graph break when the tracer emitted
    it (`graph_break`, with this frame's id)."""
    graphs = [gid for gid in map(writer.graph_id, record.graphs) if gid is not None]
    writer.write(
        "frame",
        code=record.code,
        graphs=graphs,
        breaks=len(record.breaks),
        recompile=record.recompile_reason is not None,
    )
    writer.write(
        "bytecode",
        original=writer.blob(format_instructions(decode(record.code)), "bytecode"),
        rewritten=writer.blob(format_instructions(decode(record.new_code)), "bytecode")
        if record.new_code is not None
        else None,
    )
    if record.guards is not None:
        plain, shapes = _guards(record.guards)
        writer.write("guards", guards=plain, shape_guards=shapes,
                     symbols=list(getattr(record.guards, "symbols", ())),
                     source=writer.blob(record.guards.source_code, "python"))  # fmt: skip
    if record.recompile_reason:
        writer.write("recompile", reason=record.recompile_reason)
    writer.frame_end()
