"""Ember loop IR: prim graphs -> loop-IR nodes, scheduling and fusion. See README.md.

Public surface:

* ``lower(gm, example_inputs, target=...) -> GraphLowering`` and
  ``schedule(lowering) -> Schedule`` (a list of :class:`KernelGroup` plus the inputs/outputs
  mapping and memory plan);
* ``Target``, the capability record of a code generator that lowering reads, and its
  registry (``register_target``, ``resolve_target``, ``target_for_device``,
  ``registered_targets``; ``REFERENCE``), with ``ChannelsLastPolicy`` and
  ``OUT_VARIANT_PRIMS`` for the records' fields;
* ``run_scheduled(schedule, inputs)``: the torch reference executor of a schedule;
* ``OpsHandler`` (the ``ops`` protocol) and the handlers ``PrinterHandler``,
  ``DtypeHandler``, ``ReadWriteHandler``, ``InterpretHandler``;
* ``register_lowering``, ``verify``, ``dump_lowering``.
"""

from .channels_last import ChannelsLastPolicy
from .dump import dump_lowering
from .errors import (
    DynamicShapeUnsupported,
    InterpretError,
    LoopIRError,
    LoweringError,
    ScalarReadUnsupported,
    SchedulingError,
    VerificationError,
)
from .extern import OUT_VARIANT_PRIMS
from .graph import GraphLowering, OutputSpec
from .handlers.dtypes import DtypeHandler
from .handlers.interpret import InterpretHandler
from .handlers.printer import PrinterHandler
from .handlers.readwrite import ReadWriteHandler
from .lowering import LOWERINGS, register_lowering
from .lowering.scalar_reads import ScalarAssert, ScalarRead
from .ops import OP_NAMES, OpsHandler
from .run import run_scheduled
from .scheduler import (
    CombinePolicy,
    KernelGroup,
    Schedule,
    ScheduledNode,
    combine_runs,
    schedule,
)
from .stage import lower
from .target import (
    REFERENCE,
    Target,
    register_target,
    registered_targets,
    resolve_target,
    target_for_device,
)
from .verifier import verify

__all__ = [
    "LOWERINGS",
    "OP_NAMES",
    "OUT_VARIANT_PRIMS",
    "REFERENCE",
    "ChannelsLastPolicy",
    "CombinePolicy",
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
    "ScalarAssert",
    "ScalarRead",
    "ScalarReadUnsupported",
    "Schedule",
    "ScheduledNode",
    "SchedulingError",
    "Target",
    "VerificationError",
    "combine_runs",
    "dump_lowering",
    "lower",
    "register_lowering",
    "register_target",
    "registered_targets",
    "resolve_target",
    "run_scheduled",
    "schedule",
    "target_for_device",
    "verify",
]
