"""Typed errors of symbolic shape reasoning. Each carries the user's location when known."""

from __future__ import annotations


class SymbolicShapeError(Exception):
    """Base of every error this package raises."""


class ConstraintViolationError(SymbolicShapeError, RuntimeError):
    """The program contradicts a dimension the user asked to keep dynamic.

    A RuntimeError too, as torch.compile's counterpart is: code that catches the failure
    of a compiled call as a RuntimeError catches this one.

    Raised when a guard would force a symbol created with `DimDynamic.DYNAMIC` (what
    `mark_dynamic` asks for) to a constant, or, for one marked with a min/max, when a guard
    fails some size of that range. `where` names the line that forced it.
    """

    def __init__(self, message: str, *, source: object = None, where: str = "") -> None:
        self.source = source
        self.where = where
        super().__init__(f"{message} (at {where})" if where else message)


class DataDependentError(SymbolicShapeError):
    """A condition on an unbacked symbol (a size only known when the graph runs) was asked
    for a concrete answer that no range or earlier fact decides."""

    def __init__(self, expr: object, *, where: str = "") -> None:
        self.expr = expr
        self.where = where
        text = f"cannot decide {expr} at trace time: it depends on data (unbacked size)"
        super().__init__(f"{text} (at {where})" if where else text)


class InvalidSizeError(SymbolicShapeError, ValueError):
    """A bad argument to the public API (a negative size, min > max, a value outside the
    range the caller declared)."""
