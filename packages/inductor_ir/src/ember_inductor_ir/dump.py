"""The readable dump of a lowered graph (logged on ``ember.ir``; ``EMBER_LOGS=ir``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .extern import ExternKernel
from .handlers.printer import PrinterHandler
from .indexing import index_vars
from .nodes import ComputedBuffer, ConstantBuffer, InputBuffer, Reduction

if TYPE_CHECKING:
    from .graph import GraphLowering

log = logging.getLogger("ember.ir")


def format_body(buf: ComputedBuffer, indent: str = "    ") -> list[str]:
    printer = PrinterHandler(indent)
    buf.store_body(
        printer, index_vars("i", len(buf.ranges)), index_vars("r", len(buf.reduction_ranges))
    )
    return printer.lines


def describe_buffer(buf: ComputedBuffer) -> str:
    ranges = ", ".join(map(str, buf.ranges))
    if isinstance(buf.data, Reduction):
        rranges = ", ".join(map(str, buf.reduction_ranges))
        kind = f"Reduction {buf.data.reduction_type} over [{rranges}]"
        if buf.data.welford_part is not None:
            kind += f" part {buf.data.welford_part}"
        head = f"{kind}, loops [{ranges}]"
    else:
        head = f"Pointwise, loops [{ranges}]"
    origins = f"  # {', '.join(buf.origins)}" if buf.origins else ""
    return f"{buf.name}: {buf.layout.describe()} = {head}{origins}"


def dump_lowering(lowering: GraphLowering) -> str:
    """The whole lowered graph as text: inputs, each operation with its body, outputs."""
    lines = ["# inputs"]
    for name in lowering.graph_inputs:
        buf = lowering.buffers[name]
        assert isinstance(buf, InputBuffer)
        lines.append(f"{name}: {buf.layout.describe()} (input {buf.position})")
    for name, buf in lowering.buffers.items():
        if isinstance(buf, ConstantBuffer):
            lines.append(f"{name}: {buf.layout.describe()} (constant)")
    lines.append("# operations")
    for op in lowering.operations:
        if isinstance(op, ExternKernel):
            outs = ", ".join(f"{o.name}: {o.layout.describe()}" for o in op.outputs)
            tag = "Fallback" if op.fallback else "Extern"
            lines.append(f"{outs} = {tag} {op.describe()}")
            continue
        lines.append(describe_buffer(op))
        lines.extend(format_body(op))
    lines.append("# outputs")
    for spec in lowering.graph_outputs:
        if spec.name is None:
            lines.append(f"constant {spec.constant!r}")
        else:
            assert spec.layout is not None
            lines.append(f"{spec.name} as {spec.layout.describe()}")
    if lowering.fallback_counts:
        counts = ", ".join(f"{k} x{v}" for k, v in sorted(lowering.fallback_counts.items()))
        lines.append(f"# fallbacks: {counts}")
    return "\n".join(lines)


def log_lowering(lowering: GraphLowering) -> None:
    if log.isEnabledFor(logging.INFO):
        log.info("lowered graph:\n%s", dump_lowering(lowering))
    if lowering.fallback_counts:
        log.info("fallback kernels (prims with no lowering): %s", dict(lowering.fallback_counts))
