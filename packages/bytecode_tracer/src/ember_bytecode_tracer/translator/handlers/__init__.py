"""Opcode handlers, one module per family; importing this package registers them all."""

from ember_bytecode_tracer.translator.handlers import (  # noqa: F401
    calls,
    classes,
    containers,
    control_flow,
    exceptions,
    loads_stores,
    operators,
    stack,
)
