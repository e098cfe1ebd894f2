"""Symbolic sizes for every Ember stage (see README.md)."""

from ember_symbolic.errors import (
    ConstraintViolationError,
    DataDependentError,
    InvalidSizeError,
    SymbolicShapeError,
)
from ember_symbolic.guards import RenderedGuard, ShapeGuard, compile_guards, failure_reason
from ember_symbolic.printer import to_python
from ember_symbolic.shape_env import DimDynamic, ShapeEnv
from ember_symbolic.sym_node import SymNode, is_ember_symbolic
from ember_symbolic.value_ranges import ValueRange

__all__ = [
    "ConstraintViolationError",
    "DataDependentError",
    "DimDynamic",
    "InvalidSizeError",
    "RenderedGuard",
    "ShapeEnv",
    "ShapeGuard",
    "SymNode",
    "SymbolicShapeError",
    "ValueRange",
    "compile_guards",
    "failure_reason",
    "is_ember_symbolic",
    "to_python",
]
