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
from ember_symbolic.sources import TensorPropertySource, size_source, stride_source
from ember_symbolic.sym_node import SymNode, is_ember_symbolic
from ember_symbolic.tensors import (
    Dim,
    SymbolicMeta,
    fake_mode,
    fake_tensor,
    meta_tensor,
    symbolic_tensor_meta,
)
from ember_symbolic.value_ranges import ValueRange

__all__ = [
    "ConstraintViolationError",
    "DataDependentError",
    "Dim",
    "DimDynamic",
    "InvalidSizeError",
    "RenderedGuard",
    "ShapeEnv",
    "ShapeGuard",
    "SymNode",
    "SymbolicMeta",
    "SymbolicShapeError",
    "TensorPropertySource",
    "ValueRange",
    "compile_guards",
    "failure_reason",
    "fake_mode",
    "fake_tensor",
    "is_ember_symbolic",
    "meta_tensor",
    "size_source",
    "stride_source",
    "symbolic_tensor_meta",
    "to_python",
]
