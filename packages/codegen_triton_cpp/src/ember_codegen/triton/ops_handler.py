"""The Triton-emitting ``ops`` handler: a loop body run with it writes Triton statements.

Values are :class:`TritonValue` (a temporary's name and its dtype); every op becomes one
``tmpN = expr`` line, common subexpressions are emitted once per scope (a segment, a masked
block). Loads of values this kernel keeps in registers come back as those values; memory
addresses, masks and reductions are the kernel builder's business (kernel.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import sympy
import torch

from ember_codegen.code_writer import CodeWriter  # Python's: 4 spaces a level
from ember_codegen.exc import CodegenError
from ember_codegen.scalar_args import is_symbolic_constant, scalar_text
from ember_codegen.triton.cache import interpreting
from ember_codegen.value_scopes import ScopedValues
from ember_inductor_ir import DynamicShapeUnsupported

from .dtypes import (
    NARROW_INTS,
    compute_type,
    is_reduced_float,
    python_literal,
    round_to,
    store_cast,
    triton_constant,
    triton_type,
)
from .op_table import BOOL_RESULT_OPS, TRITON_OPS, TritonValue


class KernelState(Protocol):
    """What the handler asks of the kernel it writes (kernel.KernelBuilder): addresses and
    masks, buffers kept in registers, reductions; declared here so that this module does
    not import the builder that imports it."""

    def new_tmp(self) -> str: ...
    def buffer_dtype(self, name: str) -> torch.dtype: ...
    def index(self, expr: sympy.Expr, wide: bool = False) -> str: ...
    def load_expr(self, name: str, index: sympy.Expr, masks: list[str]) -> str: ...
    def in_bounds(self, name: str, index: sympy.Expr) -> bool: ...
    def store_stmt(self, name: str, index: sympy.Expr, value: TritonValue) -> str: ...
    def barrier_before_load(self, name: str) -> bool: ...
    def local_value(self, name: str) -> TritonValue | None: ...
    def keep_local(self, name: str, value: TritonValue) -> bool: ...
    def store_reduction(self, name: str, index: sympy.Expr, value: TritonValue) -> None: ...
    def reduction(
        self, dtype: torch.dtype, src: torch.dtype, rtype: str, value: TritonValue
    ) -> Any: ...


GOLDEN = 0x9E3779B9


class TritonOpsHandler(ScopedValues[TritonValue]):
    def __init__(self, kernel: KernelState, out: CodeWriter) -> None:
        super().__init__()
        self.kernel = kernel
        self.out = out
        #: masks of the enclosing ``ops.masked`` bodies (innermost last)
        self.mask_stack: list[str] = []
        #: set by a kernel whose passes over a row share one scope (a persistent reduction:
        #: a row's loads are reused by each later pass): a store then makes every earlier
        #: load stale, since the stored buffer may share storage with one loaded before
        self.loads_end_at_stores = False

    # -- emission (common subexpressions and op dispatch: value_scopes.ScopedValues) ---------
    OPS = TRITON_OPS
    BOOL_RESULT_OPS = BOOL_RESULT_OPS
    TARGET = "Triton"

    def _cse(self, expr: str, dtype: torch.dtype) -> TritonValue:
        if dtype in NARROW_INTS:  # Triton widens narrow integers in arithmetic
            expr = f"({expr}).to({triton_type(dtype)})"
        return super()._cse(expr, dtype)

    def declare(self, name: str, expr: str, dtype: torch.dtype) -> tuple[str, TritonValue]:
        return f"{name} = {expr}", TritonValue(name, dtype)

    # -- memory --------------------------------------------------------------------------
    def load(self, name: str, index: sympy.Expr) -> TritonValue:
        local = self.kernel.local_value(name)
        if local is not None:
            return local
        dtype = self.kernel.buffer_dtype(name)
        if self.kernel.barrier_before_load(name):
            self.out.line("tl.debug_barrier()")  # stores by other threads become visible
        # A load whose address is in bounds wherever the kernel's own loops run needs no
        # enclosing mask: left out, it is loaded at its own shape (a per-row value loaded
        # once per row, not per window element) and shared by every masked body after it.
        unmasked = bool(self.mask_stack) and self.kernel.in_bounds(name, index)
        masks = [] if unmasked else self.mask_stack
        expr = self.kernel.load_expr(name, index, masks)
        if is_reduced_float(dtype):
            expr = f"{expr}.to(tl.float32)"
        if not unmasked:
            return self._cse(expr, dtype)
        known = self.known((expr, dtype))
        if known is not None:
            return known
        line, value = self.declare(self.kernel.new_tmp(), expr, dtype)
        self.out.line(line)
        return self.remember_in_block((expr, dtype), value)

    def store(self, name: str, index: sympy.Expr, value: TritonValue) -> None:
        dtype = self.kernel.buffer_dtype(name)
        value = self._as_dtype(value, dtype)
        if self.kernel.keep_local(name, value):
            return
        self.out.line(self.kernel.store_stmt(name, index, value))
        self.stored()

    def stored(self) -> None:
        """A store was written: loads remembered before it are not reused after it."""
        if self.loads_end_at_stores:
            self.forget(lambda key: "tl.load(" in key[0])

    def store_reduction(self, name: str, index: sympy.Expr, value: TritonValue) -> None:
        self.kernel.store_reduction(name, index, value)

    def _as_dtype(self, value: TritonValue, dtype: torch.dtype) -> TritonValue:
        return value if value.dtype == dtype else self.to_dtype(value, dtype)

    # -- leaves and conversions ---------------------------------------------------------
    def constant(self, value: bool | int | float, dtype: torch.dtype) -> TritonValue:
        if is_symbolic_constant(value):  # over scalars read on the host: float arguments
            if dtype == torch.float64 and not interpreting():
                # a Python float argument is a float32 in the binary's signature
                raise DynamicShapeUnsupported("a float64 operand read on the host (t.item())")
            wide = self._cse(f"tl.full([], {scalar_text(value)}, tl.float64)", torch.float64)
            return self.to_dtype(wide, dtype)
        return self._cse(triton_constant(value, dtype), dtype)

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> TritonValue:
        if expr.is_Integer:
            return self.constant(int(expr), dtype)
        text = self.kernel.index(expr, wide=dtype == torch.int64)
        literal = text.strip("() ")
        if literal.lstrip("-").isdigit():  # a loop variable of one step: the kernel's 0
            return self.constant(int(literal), dtype)
        return self._cse(f"({text}).to({compute_type(dtype)})", dtype)

    def to_dtype(self, x: TritonValue, dtype: torch.dtype) -> TritonValue:
        if x.dtype == dtype:
            return x
        if is_reduced_float(x.dtype):  # the value is a bf16/f16: round it before widening
            x = self._cse(round_to(x.expr, x.dtype), x.dtype)
        if dtype == torch.bool:
            return self._cse(f"({x} != 0)", dtype)
        if is_reduced_float(dtype):  # round to the narrow type, keep computing in float32
            # through float32, as eager converts (double -> float -> half/bfloat16)
            source = x.expr if x.dtype == torch.float32 else f"{x}.to(tl.float32)"
            return self._cse(round_to(source, dtype), dtype)
        return self._cse(f"{x}.to({compute_type(dtype)})", dtype)

    def to_dtype_bitcast(self, x: TritonValue, dtype: torch.dtype) -> TritonValue:
        source = x.expr
        if is_reduced_float(x.dtype):  # the stored bit pattern of the narrow value
            source = store_cast(x.expr, x.dtype)
        result = f"{source}.to({triton_type(dtype)}, bitcast=True)"
        if is_reduced_float(dtype):
            result = f"{result}.to(tl.float32)"
        return self._cse(result, dtype)

    # -- indirect indexing, selection, masking --------------------------------------------
    def indirect_indexing(self, x: TritonValue, size: sympy.Expr) -> sympy.Symbol:
        n = self.kernel.index(size)
        wrapped = self._cse(f"tl.where({x} < 0, {x} + {n}, {x})", x.dtype)
        return sympy.Symbol(wrapped.expr, integer=True)

    def where(self, cond: TritonValue, a: TritonValue, b: TritonValue) -> TritonValue:
        return self._cse(f"tl.where({cond}, {a}, {b})", a.dtype)

    def masked(self, mask: TritonValue, body: Callable[[], TritonValue], other: Any) -> TritonValue:
        self.mask_stack.append(mask.expr)
        try:
            with self.scope():
                value = body()
        finally:
            self.mask_stack.pop()
        fill = python_literal(other, value.dtype)
        return self._cse(f"tl.where({mask}, {value}, {fill})", value.dtype)

    # -- reductions and random numbers -----------------------------------------------------
    def reduction(
        self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str, value: TritonValue
    ) -> Any:
        return self.kernel.reduction(dtype, src_dtype, reduction_type, value)

    def random_bits(self, seed: TritonValue, counter: TritonValue, stream: int) -> TritonValue:
        if seed.dtype != torch.int64 or counter.dtype != torch.int64:
            raise CodegenError(
                f"random_bits needs int64 seed and counter, got {seed.dtype} and {counter.dtype}"
            )
        golden = (GOLDEN * (int(stream) + 1)) & 0xFFFFFFFF
        key = self._cse(f"_em_random_key({seed}, {golden})", torch.int32)
        return self._cse(f"_em_random_bits({key}, {counter})", torch.int64)
