"""Typed errors: each names the op or input at fault and says what to do."""

from __future__ import annotations


class AotAutogradError(Exception):
    """Base class of every error this package raises on purpose."""


class UnsupportedOpError(AotAutogradError):
    """An aten op the tracer or functionalization cannot handle."""

    def __init__(self, op: object, why: str, hint: str = "") -> None:
        self.op = op
        hint = hint or "run this graph eagerly (or with another backend), or report the op"
        super().__init__(f"{op}: {why}; {hint}")


class UndecomposedOpError(AotAutogradError):
    """strict=True and an op had no entry in the decomposition table."""

    def __init__(self, op: object) -> None:
        self.op = op
        super().__init__(
            f"{op} has no decomposition in the table and strict=True; add a decomposition "
            "for it or trace with strict=False (it then stays an aten op and is counted in "
            "the trace report)"
        )


class InputMutationError(UnsupportedOpError):
    """A write to a graph input that the runtime wrapper cannot replay faithfully (inputs
    sharing storage where none covers the others, or one requires grad): a declared
    limitation, like any UnsupportedOpError."""

    def __init__(self, index: int, why: str) -> None:
        self.index = index
        super().__init__(
            "aliased_input_write", f"input {index}: {why}", "pass non-overlapping tensors"
        )


class GraphNotFunctionalError(AotAutogradError):
    """A graph handed to a compiler still contains a mutating op."""


class MissingMetadataError(AotAutogradError):
    """A node of a graph handed to a compiler lacks node.meta['val']."""


class BadArgumentError(AotAutogradError, TypeError):
    """A public function was called with an argument of the wrong kind."""
