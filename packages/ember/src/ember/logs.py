"""EMBER_LOGS=graph,guards,...,ir,fusion,output_code: what compiles show, on `logging`."""

from __future__ import annotations

import logging
import os

from ember.config import config
from ember.exc import ConfigurationError
from ember_bytecode_tracer.bytecode import decode, format_instructions

# Artifacts the umbrella formats itself (from the frame compiler's records) ...
TRACER_ARTIFACTS = ("graph", "guards", "bytecode", "graph_breaks", "recompiles")
# ... and artifacts the lower stages log on `ember.<name>` themselves: the umbrella only sets
# those loggers' levels, so a stage installed alone logs through plain `logging`.
STAGE_ARTIFACTS = ("aot", "ir", "fusion", "output_code", "perf", "dynamic", "autotune")
ARTIFACTS = TRACER_ARTIFACTS + STAGE_ARTIFACTS
log = logging.getLogger("ember")
_enabled: set[str] = set()


def _names(value: str) -> set[str]:
    """The artifact names in an EMBER_LOGS value; a leading `+` (more detail) is dropped."""
    return {n.strip().lstrip("+") for n in value.split(",") if n.strip()}


def full_tracebacks() -> bool:
    """Errors shown to users keep Ember's internal frames: config.verbose or EMBER_LOGS=+all."""
    value = os.environ.get("EMBER_LOGS", "")
    return config.verbose or "+all" in {n.strip() for n in value.split(",")}


def configure_from_env() -> None:
    """Reads EMBER_LOGS; unknown names raise so typos don't go unnoticed."""
    value = os.environ.get("EMBER_LOGS", "")
    names = _names(value)
    unknown = names - set(ARTIFACTS) - {"all"}
    if unknown:
        raise ConfigurationError(
            f"EMBER_LOGS: unknown {sorted(unknown)}; choose from {', '.join(ARTIFACTS)} or all (+all: "
            "with Ember's internal frames in tracebacks)"
        )
    _enabled.clear()
    _enabled.update(ARTIFACTS if "all" in names else names)
    for name in STAGE_ARTIFACTS:
        level = logging.INFO if name in _enabled else logging.WARNING
        log.getChild(name).setLevel(level)
    if _enabled and not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[ember %(name)s] %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def log_record(record) -> None:
    """Called by the frame compiler for each compiled frame."""
    code = record.code
    where = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
    if "bytecode" in _enabled:
        log.getChild("bytecode").info(
            "ORIGINAL BYTECODE %s\n%s\nMODIFIED BYTECODE %s\n%s", where,
            format_instructions(decode(code)), where, format_instructions(decode(record.new_code)),
        )  # fmt: skip
    if "guards" in _enabled and record.guards is not None:
        log.getChild("guards").info("GUARDS %s\n%s", where, record.guards.source_code)
    if "graph" in _enabled:
        for gm in record.graphs:
            log.getChild("graph").info("GRAPH %s\n%s", where, graph_table(gm))
    if "recompiles" in _enabled and record.recompile_reason:
        log.getChild("recompiles").info("RECOMPILING %s because %s", where, record.recompile_reason)
    if "graph_breaks" in _enabled:
        for brk in record.breaks:
            stack = ""
            if config.verbose and brk.user_stack:
                stack = "\n  user stack (outermost first):\n    " + "\n    ".join(brk.user_stack)
            log.getChild("graph_breaks").info(
                "GRAPH BREAK in %s: %s at %s%s", where, brk.reason, brk.location, stack
            )


def graph_table(gm) -> str:
    """The graph as a table: opcode, name, target, args, kwargs."""
    rows = [("opcode", "name", "target", "args", "kwargs")]
    for node in gm.graph.nodes:
        target = getattr(node.target, "__name__", str(node.target))
        rows.append((node.op, node.name, target, str(node.args), str(node.kwargs)))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
