"""Ember loop IR: prim graphs -> loop-IR nodes, scheduling and fusion. See README.md.

Public surface:

* ``lower(gm, example_inputs) -> GraphLowering`` and ``schedule(lowering) -> Schedule``
  (a list of :class:`KernelGroup` plus the inputs/outputs mapping and memory plan);
* ``run_scheduled(schedule, inputs)``: the torch reference executor of a schedule;
* ``OpsHandler`` (the ``ops`` protocol) and the handlers ``PrinterHandler``,
  ``DtypeHandler``, ``ReadWriteHandler``, ``InterpretHandler``;
* ``register_lowering``, ``verify``, ``dump_lowering``.
"""

from .dump import dump_lowering
from .errors import (
    DynamicShapeUnsupported,
    InterpretError,
    LoopIRError,
    LoweringError,
    SchedulingError,
    VerificationError,
)
from .graph import GraphLowering, OutputSpec, lower
from .handlers.dtypes import DtypeHandler
from .handlers.interpret import InterpretHandler
from .handlers.printer import PrinterHandler
from .handlers.readwrite import ReadWriteHandler
from .lowering import LOWERINGS, register_lowering
from .ops import OP_NAMES, OpsHandler
from .run import run_scheduled
from .scheduler import KernelGroup, Schedule, ScheduledNode, schedule
from .verifier import verify

__all__ = [
    "LOWERINGS",
    "OP_NAMES",
    "DtypeHandler",
    "DynamicShapeUnsupported",
    "GraphLowering",
    "InterpretError",
    "InterpretHandler",
    "KernelGroup",
    "LoopIRError",
    "LoweringError",
    "OpsHandler",
    "OutputSpec",
    "PrinterHandler",
    "ReadWriteHandler",
    "Schedule",
    "ScheduledNode",
    "SchedulingError",
    "VerificationError",
    "dump_lowering",
    "lower",
    "register_lowering",
    "run_scheduled",
    "schedule",
    "verify",
]
