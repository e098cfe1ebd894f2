"""Typed errors raised by the loop IR stage."""


class LoopIRError(Exception):
    """Base class of every error this package raises."""


class LoweringError(LoopIRError):
    """A prim-level graph could not be turned into loop IR (names the node and what to do)."""


class VerificationError(LoopIRError):
    """The loop IR broke one of its invariants (see verifier.py for the list)."""


class SchedulingError(LoopIRError):
    """The scheduler was given IR it cannot order or place."""


class InterpretError(LoopIRError):
    """The reference interpreter was given inputs that do not match the lowered graph."""


class DynamicShapeUnsupported(LoweringError):
    """A graph with symbolic sizes reached a part of the stage that needs static ones (the
    caller may compile one static specialization per concrete size instead)."""


class ScalarReadUnsupported(LoweringError):
    """A graph reads a tensor's value into a host scalar (``aten._local_scalar_dense``) in a
    way the loop IR does not bind yet (a read of a computed buffer, a bool, a float operand
    for a target without float scalar arguments), or has a result whose size is read from
    its data (nonzero's length): a declared limitation, the caller runs the graph eagerly."""

    #: the op refused, as the backend counts graph fallbacks
    op = "aten._local_scalar_dense.default"

    def __init__(self, message: str, op: str | None = None) -> None:
        super().__init__(message)
        if op is not None:
            self.op = op
