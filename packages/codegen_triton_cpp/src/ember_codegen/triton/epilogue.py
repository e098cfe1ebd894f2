"""The matmul template's epilogue: which pointwise group it fuses, and that group's loop body
printed over the template's output tile.

The epilogue group is the first group after the extern that reads the matmul's output. It
fuses when it is pointwise over the same iteration space as the output (its sizes are the
output's, possibly with dimensions merged or size-1 ones added), reads the output only at the
point it computes, and uses no indirect indexing. Its loop variables are then rewritten as
the tile's ``row`` / ``col`` (and batch ``bz``); loads of the matmul output become the
rounded accumulator, other loads and the stores index by the tile, masked by the tile's
edges. The group's body is printed by the ordinary Triton ops handler; this module is the
kernel side of that handler's protocol (addresses, masks, values kept in registers).
"""

from __future__ import annotations

import logging
from typing import Any

import sympy
import torch

from ember_codegen.exc import CodegenError
from ember_inductor_ir import KernelGroup, ReadWriteHandler, Schedule
from ember_inductor_ir.indexing import simplify_index

from .dtypes import is_reduced_float, round_to, store_cast
from .index_printer import masked_offset, triton_index
from .matmul_template import MatmulSpec, NotATemplate
from .op_table import TritonValue
from .ops_handler import CodeWriter, TritonOpsHandler

log = logging.getLogger("ember.autotune")

ROW = sympy.Symbol("row", integer=True, nonnegative=True)
COL = sympy.Symbol("col", integer=True, nonnegative=True)
BATCH = sympy.Symbol("bz", integer=True, nonnegative=True)
#: the mask of a value that varies along these tile axes
_MASKS = {frozenset(): None, frozenset("r"): "rmask", frozenset("c"): "cmask"}
_AXIS = {ROW: "r", COL: "c", BATCH: "b"}


def tile_dims(spec: MatmulSpec) -> list[tuple[int, sympy.Expr]]:
    """The output's logical dimensions with the tile variable of each."""
    dims = [(spec.m, ROW), (spec.n, COL)]
    return [(spec.batch, BATCH), *dims] if spec.out_rank == 3 else dims


def out_index(spec: MatmulSpec, sched: Schedule) -> sympy.Expr:
    """The storage offset of the output at the tile point, as the output's layout has it."""
    layout = sched.layout(spec.out)
    return sympy.expand(layout.index([var for _, var in tile_dims(spec)]))


def tile_ranges(spec: MatmulSpec) -> dict[sympy.Symbol, sympy.Expr]:
    return {BATCH: sympy.Integer(spec.batch), ROW: sympy.Integer(spec.m),
            COL: sympy.Integer(spec.n)}  # fmt: skip


def variable_map(group: KernelGroup, spec: MatmulSpec) -> dict[sympy.Symbol, sympy.Expr]:
    """The group's loop variables in tile variables: each group dimension must be one run of
    consecutive output dimensions (row-major), size-1 dimensions aside."""
    sizes = []
    for s in group.sizes:
        if not getattr(s, "is_Integer", False):
            raise NotATemplate(f"symbolic size {s}")
        sizes.append(int(s))
    outer, _ = group.index_vars()
    dims = [(n, var) for n, var in tile_dims(spec) if n != 1]
    mapping: dict[sympy.Symbol, sympy.Expr] = {}
    for var, size in zip(outer, sizes, strict=True):
        if size == 1:
            mapping[var] = sympy.Integer(0)
            continue
        expr, covered = sympy.Integer(0), 1
        while covered < size and dims:
            n, tile_var = dims.pop(0)
            expr, covered = expr * n + tile_var, covered * n
        if covered != size:
            raise NotATemplate(f"iteration space {sizes} is not the output's")
        mapping[var] = expr
    if dims:
        raise NotATemplate(f"iteration space {sizes} is not the output's")
    return mapping


def check_epilogue(group: KernelGroup, spec: MatmulSpec, sched: Schedule) -> dict:
    """The variable map of ``group`` as the epilogue of ``spec``; NotATemplate otherwise."""
    if group.extern is not None or group.reduction_sizes:
        raise NotATemplate(f"{group.name} is not pointwise")
    if any(node.placement != "outer" for node in group.nodes):
        raise NotATemplate(f"{group.name} is not pointwise")
    if group.device is not None and torch.device(group.device) != torch.device(
        sched.layout(spec.out).device
    ):
        raise NotATemplate(f"{group.name} runs on another device")
    mapping = variable_map(group, spec)
    ranges, want = tile_ranges(spec), out_index(spec, sched)
    for node in group.nodes:
        recorder = ReadWriteHandler()
        node.run(recorder)
        if recorder.indirect_count or recorder.reduction_types:
            raise NotATemplate(f"{node.buffer.name} uses indirect indexing or reduces")
        for name, index in [*recorder.reads, *recorder.writes]:
            expr = simplify_index(sympy.expand(index.xreplace(mapping)), ranges)
            if not expr.free_symbols <= set(ranges):
                raise NotATemplate(f"{node.buffer.name} indexes {name} by {index}")
            if name == spec.out and sympy.expand(expr - want) != 0:
                raise NotATemplate(f"{node.buffer.name} reads {name} at another point")
    return mapping


def find_epilogue(
    sched: Schedule, position: int, spec: MatmulSpec
) -> tuple[KernelGroup | None, dict]:
    """The group to fuse into the template of ``sched[position]`` (and its variable map),
    or (None, {}) when the first reader of the output does not fit (logged)."""
    for group in list(sched)[position + 1 :]:
        if spec.out not in group.reads:
            continue
        try:
            return group, check_epilogue(group, spec, sched)
        except NotATemplate as reason:
            log.info("matmul template %s: no epilogue fusion of %s: %s", spec.out, group.name,
                     reason)  # fmt: skip
            return None, {}
    return None, {}


class EpilogueBuilder:
    """Prints the epilogue: the rounded accumulator stored as the matmul output (when
    ``store_out``), then ``group``'s nodes. The kernel side of TritonOpsHandler."""

    def __init__(
        self,
        spec: MatmulSpec,
        sched: Schedule,
        group: KernelGroup | None,
        mapping: dict,
        *,
        store_out: bool,
        int64: bool,
    ) -> None:
        self.spec, self.sched, self.group, self.mapping = spec, sched, group, mapping
        self.store_out = store_out
        self.int64 = int64
        self.ranges = tile_ranges(spec)
        self.params: dict[str, bool] = {}
        self.register_only = set()
        if group is not None:
            self.register_only = {
                n.buffer.name for n in group.nodes if n.buffer.name in group.internal
            }
        self._locals: dict[str, TritonValue] = {}
        self._tmp = 0

    # -- the ops handler's protocol -------------------------------------------------------
    def new_tmp(self) -> str:
        self._tmp += 1
        return f"tmp{self._tmp - 1}"

    def pointer(self, name: str, write: bool) -> str:
        self.params[name] = self.params.get(name, False) or write
        return f"ptr_{name}"

    def buffer_dtype(self, name: str) -> torch.dtype:
        return self.sched.buffers[name].get_dtype()

    def _tile_index(self, expr: sympy.Expr) -> tuple[str, frozenset[str]]:
        flat = simplify_index(sympy.expand(sympy.sympify(expr).xreplace(self.mapping)), self.ranges)
        axes = frozenset(_AXIS.get(s, "other") for s in flat.free_symbols) - {"b"}
        return triton_index(flat), axes

    def index(self, expr: sympy.Expr, wide: bool = False) -> str:
        text, _ = self._tile_index(expr)
        if wide and not self.int64:
            flat = simplify_index(
                sympy.expand(sympy.sympify(expr).xreplace(self.mapping)), self.ranges
            )
            return triton_index(flat, wide=True)
        return text

    def _offset(self, name: str, index: sympy.Expr) -> tuple[str, frozenset[str]]:
        return self._tile_index(index - self.sched.layout(name).offset)

    def load_expr(self, name: str, index: sympy.Expr, masks: list[str]) -> str:
        pointer = self.pointer(name, False)
        text, axes = self._offset(name, index)
        if masks or "other" in axes:
            mask = " & ".join(["tmask", *masks])
            return f"tl.load({pointer} + {masked_offset(text, mask)}, {mask}, other=0)"
        mask = _MASKS.get(axes, "tmask")
        if mask is None:
            return f"tl.load({pointer} + {text})"
        return f"tl.load({pointer} + {text}, {mask}, other=0)"

    def store_stmt(self, name: str, index: sympy.Expr, value: TritonValue) -> str:
        pointer = self.pointer(name, True)
        text, axes = self._offset(name, index)
        if axes != frozenset("rc"):  # broadcast the address to the tile
            text = f"{text} + tl.zeros([BLOCK_M, BLOCK_N], {self.index_type})"
        dtype = self.buffer_dtype(name)
        stored = store_cast(value.expr, dtype) if is_reduced_float(dtype) else value.expr
        return f"tl.store({pointer} + {text}, {stored}, tmask)"

    def barrier_before_load(self, name: str) -> bool:
        return False  # values this epilogue stored are read back from registers

    @property
    def index_type(self) -> str:
        return "tl.int64" if self.int64 else "tl.int32"

    def local_value(self, name: str) -> TritonValue | None:
        if name == self.spec.out:
            return self._out_value
        return self._locals.get(name)

    def keep_local(self, name: str, value: TritonValue) -> bool:
        self._locals[name] = value
        return name in self.register_only

    def store_reduction(self, *args: Any) -> None:
        raise CodegenError("a matmul epilogue has no reductions")

    reduction = store_reduction

    # -- emission ------------------------------------------------------------------------
    def build(self) -> list[str]:
        """The epilogue's lines (one indent), after the template's main loop."""
        out = CodeWriter(1)
        spec = self.spec
        value = "acc"
        if spec.bias is not None:  # addmm: the bias joins the float32 accumulator
            bias = spec.bias
            dtype = self.buffer_dtype(bias.buffer)
            self.pointer(bias.buffer, False)
            load = (f"tl.load(ptr_{bias.buffer} + ({bias.offset} + bz * {bias.stride[0]} + "
                    f"row * {bias.stride[1]} + col * {bias.stride[2]}), tmask, other=0)")  # fmt: skip
            out.line(f"bias = {load}" + (".to(tl.float32)" if is_reduced_float(dtype) else ""))
            out.line("acc = acc + bias")
        if is_reduced_float(spec.dtype):  # the product eager hands on: rounded to its dtype
            out.line(f"mm_out = {round_to(value, spec.dtype)}")
            value = "mm_out"
        self._out_value = TritonValue(value, spec.dtype)
        if self.store_out:
            text, _ = self._offset(spec.out, out_index(spec, self.sched))
            self.pointer(spec.out, True)
            stored = store_cast(value, spec.dtype) if is_reduced_float(spec.dtype) else value
            out.line(f"tl.store(ptr_{spec.out} + {text}, {stored}, tmask)")
        if self.group is not None:
            handler = TritonOpsHandler(self, out)  # type: ignore[arg-type]
            for node in self.group.nodes:
                node.run(handler)
        return out.lines
