"""The C++ emitting ``ops`` handler: a loop body run with it writes C++ statements.

Values are :class:`CppValue` (a temporary's name and its dtype). Every op becomes one
``const T tmpN = expr;`` line, common subexpressions are emitted once per scope (a loop
body, a masked block), loads of buffers this kernel keeps in registers come back as those
values, and reductions are handed to the kernel builder, which owns the accumulators.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Protocol

import sympy
import torch

from ember_codegen.code_writer import CodeWriter as LineWriter
from ember_codegen.scalar_args import is_symbolic_constant, scalar_text
from ember_codegen.value_scopes import ScopedValues

from .dtypes import compute_type, cpp_literal, cpp_type, is_reduced_float
from .index_printer import cpp_index
from .op_table import BOOL_RESULT_OPS, CPP_OPS, FALLIBLE_OPS, CppValue


class KernelState(Protocol):
    """What the handler asks of the kernel it writes (kernel.KernelBuilder): addresses,
    buffers kept in registers, accumulators; declared here so that this module does not
    import the builder that imports it."""

    may_fail: bool

    def new_tmp(self) -> str: ...
    def buffer_dtype(self, name: str) -> torch.dtype: ...
    def note_load(self, dtype: torch.dtype) -> None: ...
    def index(self, expr: sympy.Expr) -> str: ...
    def address(self, name: str, index: sympy.Expr, write: bool) -> str: ...
    def local_value(self, name: str) -> CppValue | None: ...
    def keep_local(self, name: str, value: CppValue) -> bool: ...
    def store_prefix(self) -> str: ...
    def store_reduction(self, name: str, index: sympy.Expr, value: CppValue) -> None: ...
    def reduction(
        self, dtype: torch.dtype, src_dtype: torch.dtype, rtype: str, value: CppValue
    ) -> Any: ...


class CodeWriter(LineWriter):
    """Lines of C++ (two spaces a level) with brace blocks."""

    INDENT = "  "

    @contextlib.contextmanager
    def block(self, head: str) -> Iterator[None]:
        self.line(f"{head} {{" if head else "{")
        self.level += 1
        try:
            yield
        finally:
            self.level -= 1
            self.line("}")


class CppOpsHandler(ScopedValues[CppValue]):
    def __init__(self, kernel: KernelState, out: CodeWriter) -> None:
        super().__init__()
        self.kernel = kernel
        self.out = out

    # -- emission (common subexpressions and op dispatch: value_scopes.ScopedValues) ---------
    OPS = CPP_OPS
    BOOL_RESULT_OPS = BOOL_RESULT_OPS
    TARGET = "C++"

    def declare(self, name: str, expr: str, dtype: torch.dtype) -> tuple[str, CppValue]:
        return f"const {compute_type(dtype)} {name} = {expr};", CppValue(name, dtype)

    def before_op(self, name: str, args: tuple) -> None:
        if name in FALLIBLE_OPS and not args[0].dtype.is_floating_point:
            self.kernel.may_fail = True

    # -- memory --------------------------------------------------------------------------
    def load(self, name: str, index: sympy.Expr) -> CppValue:
        local = self.kernel.local_value(name)
        if local is not None:
            return local
        dtype = self.kernel.buffer_dtype(name)
        self.kernel.note_load(dtype)
        return self._cse(
            cpp_type(dtype).load.format(self.kernel.address(name, index, False)), dtype
        )

    def store(self, name: str, index: sympy.Expr, value: CppValue) -> None:
        dtype = self.kernel.buffer_dtype(name)
        value = self._as_dtype(value, dtype)
        if self.kernel.keep_local(name, value):
            return
        stored = cpp_type(dtype).store.format(value.expr)
        self.out.line(
            f"{self.kernel.store_prefix()}{self.kernel.address(name, index, True)} = {stored};"
        )

    def store_reduction(self, name: str, index: sympy.Expr, value: CppValue) -> None:
        self.kernel.store_reduction(name, index, value)

    def _as_dtype(self, value: CppValue, dtype: torch.dtype) -> CppValue:
        return value if value.dtype == dtype else self.to_dtype(value, dtype)

    # -- leaves and conversions ---------------------------------------------------------
    def constant(self, value: bool | int | float, dtype: torch.dtype) -> CppValue:
        if is_symbolic_constant(value):  # over scalars read on the host: double arguments
            wide = self._cse(f"static_cast<double>{scalar_text(value)}", torch.float64)
            return self.to_dtype(wide, dtype)
        found = self._cse(cpp_literal(value, dtype), dtype)
        return found if found.literal is not None else replace(found, literal=value)

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> CppValue:
        return self._cse(f"static_cast<{compute_type(dtype)}>({self.kernel.index(expr)})", dtype)

    def to_dtype(self, x: CppValue, dtype: torch.dtype) -> CppValue:
        if x.dtype == dtype:
            return x
        target = compute_type(dtype)
        if is_reduced_float(x.dtype):  # the value is a bf16/f16: round it before widening
            kind = cpp_type(x.dtype)
            x = self._cse(kind.load.format(kind.store.format(x.expr)), x.dtype)
        if is_reduced_float(dtype):  # round to the narrow type, keep computing in float
            kind = cpp_type(dtype)
            narrow = kind.store.format(f"ember::cast<float>({x})")
            return self._cse(kind.load.format(narrow), dtype)
        return self._cse(f"ember::cast<{target}>({x})", dtype)

    def to_dtype_bitcast(self, x: CppValue, dtype: torch.dtype) -> CppValue:
        source, target = cpp_type(x.dtype), cpp_type(dtype)
        bits = source.store.format(x.expr)  # the stored bit pattern of x
        raw = f"ember_extra::bitcast<{target.storage}>({bits})"
        return self._cse(target.load.format(raw), dtype)

    # -- indirect indexing, selection, masking --------------------------------------------
    def indirect_indexing(self, x: CppValue, size: sympy.Expr) -> sympy.Symbol:
        self.kernel.may_fail = True
        value = self._cse(
            f"ember_extra::wrap_index(static_cast<int64_t>({x}), {cpp_index(size)})", torch.int64
        )
        return sympy.Symbol(value.expr, integer=True)

    def where(self, cond: CppValue, a: CppValue, b: CppValue) -> CppValue:
        return self._cse(f"({cond} ? {a} : {b})", a.dtype)

    def masked(self, mask: CppValue, body: Callable[[], CppValue], other: Any) -> CppValue:
        inner = CodeWriter(self.out.level + 1)
        with self.scope(inner):
            value = body()
        name = self.kernel.new_tmp()
        self.out.line(f"{compute_type(value.dtype)} {name} = {cpp_literal(other, value.dtype)};")
        self.out.line(f"if ({mask}) {{")
        self.out.extend(inner.lines)
        self.out.line(f"  {name} = {value};")
        self.out.line("}")
        return CppValue(name, value.dtype)

    # -- reductions and random numbers -----------------------------------------------------
    def reduction(
        self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str, value: CppValue
    ) -> Any:
        return self.kernel.reduction(dtype, src_dtype, reduction_type, value)

    def random_bits(self, seed: CppValue, counter: CppValue, stream: int) -> CppValue:
        key = self._cse(f"ember::random_key({seed}, {int(stream)}u)", torch.int32)
        bits = f"static_cast<int64_t>(ember::random_bits(static_cast<uint32_t>({key}), {counter}))"
        return self._cse(bits, torch.int64)
