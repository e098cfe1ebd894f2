"""One Triton kernel (two for a split reduction) per loops KernelGroup.

The group's outer loops are flattened into ``xindex`` (one block of XBLOCK points per
program) and its reduction loops into ``rindex``; index expressions are rewritten in those
two variables and simplified with their ranges before printing (a contiguous access prints
as ``xindex``). Nodes run in *segments* as in the C++ target (segments.py): an
``outer`` segment once per point ([XBLOCK, 1] values), a ``loop`` segment over the row
([XBLOCK, RBLOCK] values). How a loop segment runs depends on the kernel kind (see
heuristics.py): straight-line over one block (persistent), a ``for`` loop with lane-wise
accumulators (looped), or split into partials and a finishing kernel (split).

Loads and stores are masked with the masks of the axes their index uses; under
``ops.masked`` or with indirect indices the load takes the segment's mask too, its offset
as it is on a GPU (contiguous offsets stay 16-byte loads) and, under Triton's interpreter,
which reads every lane's address, with masked-off lanes pointed at element 0
(index_printer.masked_offset).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from ember_codegen.exc import CodegenError
from ember_codegen.segments import loop_sizes, plan_segments
from ember_codegen.wrapper.size_bindings import concrete
from ember_inductor_ir import KernelGroup, ReadWriteHandler, Schedule
from ember_inductor_ir.indexing import (
    FloorDiv,
    ModularIndexing,
    contiguous_strides,
    known_le,
    product,
    simplify_index,
    upper_bound,
)

from .columns import is_column_reduction
from .dtypes import compute_type, is_reduced_float, store_cast
from .heuristics import LaunchConfig, cdiv, choose_kind, default_config, next_power_of_2
from .index_printer import INT32_LIMIT, masked_offset, triton_index
from .op_table import TritonValue
from .ops_handler import CodeWriter, TritonOpsHandler
from .reduction_emit import ReductionEmitter
from .symbolic import (
    collapse_contiguous,
    fits_int32_for_every_size,
    size_params,
    symbolic_choice,
)
from .tiles import transposed_var

#: looped rows up to this long are unrolled (tl.static_range)
UNROLL_MAX_ROW = 16

XINDEX = sympy.Symbol("xindex", integer=True, nonnegative=True)
XROW = sympy.Symbol("xrow", integer=True, nonnegative=True)
RINDEX = sympy.Symbol("rindex", integer=True, nonnegative=True)


@dataclass(frozen=True)
class _Seg:
    axes: frozenset[str]
    mask: str
    shape: str


POINTWISE = _Seg(frozenset("x"), "xmask", "[XBLOCK]")
OUTER = _Seg(frozenset("x"), "xmask", "[XBLOCK, 1]")
LOOP = _Seg(frozenset("xr"), "rxmask", "[XBLOCK, RBLOCK]")
#: a tiled pointwise kernel's values (tiles.py): two axes, nothing reduced
TILE = _Seg(frozenset("xr"), "rxmask", "[XBLOCK, RBLOCK]")


@dataclass(frozen=True)
class Workspace:
    """A scratch buffer of a split reduction (the partials), allocated by the wrapper."""

    name: str
    numel: int
    dtype: torch.dtype


@dataclass
class TritonKernel:
    """One ``@triton.jit`` function and how to launch it."""

    name: str
    code: str
    params: list[str]  # buffer / workspace names, in argument order
    kind: str
    #: points of the launch grid's axis: an int, or a sympy expression over size symbols
    #: (its value is the wrapper's binding: size_bindings.concrete)
    xnumel: Any
    reduction: bool
    config: LaunchConfig
    # set after the warm-up compile on a GPU (launch.DirectLaunch): the wrapper then calls
    # the binary's launcher itself
    direct: Any = field(default=None, compare=False, repr=False)
    #: size symbols the kernel takes as int arguments after the pointers (symbolic sizes)
    size_params: list[str] = field(default_factory=list)
    #: a tiled pointwise kernel (tiles.py): the points along its tile's second axis, whose
    #: RBLOCK-wide blocks multiply its programs
    rnumel: int | None = None

    def grid(self, config: LaunchConfig | None = None) -> tuple[int]:
        config = config or self.config
        programs = cdiv(concrete(self.xnumel), config.XBLOCK)
        if self.rnumel is not None:
            programs *= cdiv(self.rnumel, config.RBLOCK)
        return (programs,)


@dataclass
class GroupKernels:
    """What the wrapper needs to run one loops group."""

    name: str
    kernels: list[TritonKernel]
    register_only: set[str]
    workspaces: list[Workspace] = field(default_factory=list)
    #: the group whose launch runs this group's kernel (combo.py: a combined launch); its
    #: own ``kernels`` are then empty
    combined_into: str | None = None


def _digits(flat: sympy.Symbol, variables: list[sympy.Symbol], sizes: list[Any]) -> dict:
    """Each loop variable as a digit of the flat index (sizes: ints or size expressions)."""
    strides = contiguous_strides([sympy.sympify(n) for n in sizes])
    digits = {}
    for k, (var, n, stride) in enumerate(zip(variables, sizes, strides, strict=True)):
        if n == 1:
            digits[var] = sympy.Integer(0)
        elif k == 0 and not isinstance(n, int):  # flat < numel: the leading digit needs no %
            digits[var] = FloorDiv(flat, stride)
        else:
            digits[var] = ModularIndexing(flat, stride, sympy.sympify(n))
    return digits


def _magnitude(expr: sympy.Expr, ranges: dict) -> int | None:
    """A bound on the absolute value of ``expr`` and of every step of computing it."""
    if expr.is_Integer:
        return abs(int(expr))
    if isinstance(expr, sympy.Symbol):
        bound = ranges.get(expr)
        return int(bound) if bound is not None and bound.is_Integer else None
    if isinstance(expr, (FloorDiv, ModularIndexing)):
        return _magnitude(expr.args[0], ranges)
    if expr.is_Add or expr.is_Mul:
        parts = [_magnitude(arg, ranges) for arg in expr.args]
        if any(p is None for p in parts):
            return None
        return sum(parts) if expr.is_Add else math.prod(parts)
    return None


def _int32_exact(expr: sympy.Expr, ranges: dict) -> bool:
    magnitude = _magnitude(expr, ranges)
    return magnitude is not None and magnitude < INT32_LIMIT


#: a split reduction's index range is NSPLIT * CHUNK (False: NSPLIT times the row, the
#: bound before 2026-12-02; a bisect variant)
SPLIT_BOUND_BY_CHUNKS = True


class KernelBuilder(ReductionEmitter):
    """Emits one kernel of a group. ``part``: None, or "partial" / "finish" (split)."""

    def __init__(
        self,
        group: KernelGroup,
        sched: Schedule,
        kind: str,
        config: LaunchConfig,
        part: str | None = None,
        tile_var: int | None = None,
    ) -> None:
        self.group, self.sched, self.kind, self.config, self.part = group, sched, kind, config, part
        # sizes are ints, or sympy expressions over size symbols (kernel arguments)
        sizes, rsizes = loop_sizes(group.sizes), loop_sizes(group.reduction_sizes)
        self.symbolic = not all(isinstance(n, int) for n in (*sizes, *rsizes))
        self.xnumel = loop_sizes([product([sympy.sympify(n) for n in sizes])])[0]
        self.rnumel = loop_sizes([product([sympy.sympify(n) for n in rsizes])])[0]
        outer_vars, red_vars = group.index_vars()
        if kind == "tiled":  # the transposed variable is the tile's second axis (tiles.py)
            along = tile_var
            assert along is not None, f"{group.name}: a tiled kernel needs its tile variable"
            rsizes, red_vars = [sizes[along]], [outer_vars[along]]
            sizes = [n for k, n in enumerate(sizes) if k != along]
            outer_vars = [v for k, v in enumerate(outer_vars) if k != along]
            self.xnumel, self.rnumel = int(product(sizes)), int(rsizes[0])
        x = XROW if part == "partial" else XINDEX
        self._subs = {**_digits(x, outer_vars, sizes), **_digits(RINDEX, red_vars, rsizes)}
        #: symbolic kernels: flat index of each axis' variables (see symbolic.collapse_contiguous)
        self._flat_axes = [(x, outer_vars, sizes), (RINDEX, red_vars, rsizes)]
        self._ranges = {XINDEX: sympy.sympify(self.xnumel), XROW: sympy.sympify(self.xnumel),
                        RINDEX: sympy.sympify(self.rnumel)}  # fmt: skip
        if part == "partial":
            self._ranges[XINDEX] = sympy.Integer(self.xnumel * config.NSPLIT)
        # int32 only where every size in the symbols' ranges is proven to fit
        rows = self.rnumel
        # (sympy.Max of two numbers is their max, built the slow way: ~0.2 ms a kernel)
        rows = sympy.Integer(max(rows, 1)) if isinstance(rows, int) else sympy.Max(rows, 1)
        if config.NSPLIT > 1:
            # a split row's NSPLIT chunks cover it once (the last one past its end, masked):
            # positions reach NSPLIT * CHUNK, not NSPLIT times the row (which made every large
            # batch-norm statistic's split reduction int64: ~6 more instructions an element)
            rows = (
                sympy.Integer(max(int(rows), config.NSPLIT * config.CHUNK))
                if SPLIT_BOUND_BY_CHUNKS and rows.is_Integer and config.CHUNK
                else rows * config.NSPLIT
            )
        self.int64 = not fits_int32_for_every_size(
            sched.shape_env,
            sympy.sympify(self.xnumel) * rows,
            *self._storage_sizes(),
        )
        self.register_only = group.register_only()
        #: internal full-row buffers of a persistent reduction that every reader reads where
        #: they were written: the row is in registers, so they are never stored
        self.row_resident = self._row_resident()
        #: internal full-row buffers of a looped reduction read only in the loop pass that
        #: writes them, where written: that pass holds them (ESE-VoVNet's max-pool backward
        #: stored its four window terms, 1.6 GB a step that nothing read)
        self.pass_resident = self._pass_resident()
        self.register_only |= self.row_resident | self.pass_resident
        self._row_locals: dict[str, TritonValue] = {}
        self.params: dict[str, bool] = {}
        self.workspaces: list[Workspace] = []
        self._index_cache: dict[sympy.Expr, tuple[str, frozenset[str]]] = {}
        self._tmp = 0
        self._nred = 0
        self._reds: dict[tuple, Any] = {}
        self._locals: dict[str, TritonValue] = {}
        self._segment_locals: dict[str, TritonValue] = {}
        self._seg = {"pointwise": POINTWISE, "tiled": TILE}.get(kind, OUTER)
        self._discarding = False
        #: buffers this kernel stored since its last barrier: a later load of one of them may
        #: read elements other threads of the block wrote, so it waits for them first
        self.unsynced_stores: set[str] = set()

    def _storage_sizes(self) -> list[Any]:
        out = []
        for name in self.group.reads | set(self.group.buffer_names()):
            buf = self.sched.buffers.get(name)
            if buf is not None:
                out.append(buf.layout.storage_numel())
        return out

    # -- callbacks from the ops handler --------------------------------------------------
    def new_tmp(self) -> str:
        self._tmp += 1
        return f"tmp{self._tmp - 1}"

    def pointer(self, name: str, write: bool) -> str:
        if not self._discarding:
            self.params[name] = self.params.get(name, False) or write
        return f"ptr_{name}"

    def buffer_dtype(self, name: str) -> torch.dtype:
        return self.sched.buffers[name].get_dtype()

    def index(self, expr: sympy.Expr, wide: bool = False) -> str:
        """``wide``: the text computes an int64 value (an ``index_expr``), in int32 only where
        no step of it can leave int32's range (int64 division costs tens of instructions:
        a concatenation's `channel % C` per element tripled its kernel's time)."""
        if wide and not self.int64:
            flat = self._flat(expr)
            if not _int32_exact(flat, self._ranges):
                return triton_index(flat, wide=True)
        return self._index(expr)[0]

    def _flat(self, expr: sympy.Expr) -> sympy.Expr:
        expr = sympy.expand(expr)
        if self.symbolic:
            for flat, variables, sizes in self._flat_axes:
                expr = collapse_contiguous(expr, flat, variables, sizes)
        return simplify_index(expr.xreplace(self._subs), self._ranges)

    def _index(self, expr: sympy.Expr) -> tuple[str, frozenset[str]]:
        """Text of an index (in xindex / rindex) and the axes it varies along."""
        hit = self._index_cache.get(expr)
        if hit is None:
            flat = self._flat(expr)
            axes = set()
            for sym in flat.free_symbols:
                axes.add("x" if sym in (XINDEX, XROW) else "r" if sym == RINDEX else "other")
            hit = self._index_cache[expr] = (triton_index(flat), frozenset(axes))
        return hit

    def _offset(self, name: str, index: sympy.Expr) -> tuple[str, frozenset[str]]:
        return self._index(index - self.sched.layout(name).offset)

    def in_bounds(self, name: str, index: sympy.Expr) -> bool:
        """Whether every address of a load of ``name`` at ``index`` lies within the buffer
        wherever the kernel's loops run (their own masks hold), whatever other masks say."""
        layout = self.sched.layout(name)
        flat = self._flat(index - layout.offset)
        if any(not s.is_nonnegative for s in flat.free_symbols) or not known_le(0, flat):
            return False  # an indirect index, or one that may go below the start
        # FloorDiv and ModularIndexing are non-negative by assumption only: of a base that may
        # be negative where a mask is off (a padded window's `h - 1`), Triton's truncating
        # `//` and `%` give negative offsets there
        digits = flat.atoms(FloorDiv, ModularIndexing)
        if any(not known_le(0, digit.args[0]) for digit in digits):
            return False
        bound = upper_bound(flat, self._ranges)
        return bound is not None and known_le(bound, layout.storage_numel() - layout.offset)

    def load_expr(self, name: str, index: sympy.Expr, masks: list[str]) -> str:
        pointer = self.pointer(name, False)
        text, axes = self._offset(name, index)
        seg = self._seg
        if masks or "other" in axes:
            mask = " & ".join([seg.mask, *masks])
            return f"tl.load({pointer} + {masked_offset(text, mask)}, {mask}, other=0)"
        mask = {frozenset(): None, frozenset("x"): "xmask", frozenset("r"): "rmask"}.get(
            axes, seg.mask
        )
        if mask is None:
            return f"tl.load({pointer} + {text})"
        return f"tl.load({pointer} + {text}, {mask}, other=0)"

    def store_stmt(self, name: str, index: sympy.Expr, value: TritonValue, seg: Any = None) -> str:
        seg = seg or self._seg
        pointer = self.pointer(name, True)
        text, axes = self._offset(name, index)
        if axes != seg.axes:  # broadcast the address to the values' shape
            text = f"{text} + tl.zeros({seg.shape}, {self.index_type})"
        dtype = self.buffer_dtype(name)
        stored = store_cast(value.expr, dtype) if is_reduced_float(dtype) else value.expr
        self.unsynced_stores.add(name)
        return f"tl.store({pointer} + {text}, {stored}, {seg.mask})"

    def barrier_before_load(self, name: str) -> bool:
        """True (once per batch of stores) when loading ``name`` needs a block barrier."""
        if name not in self.unsynced_stores:
            return False
        self.unsynced_stores.clear()
        return True

    @property
    def index_type(self) -> str:
        return "tl.int64" if self.int64 else "tl.int32"

    def _resident_candidates(self) -> set[str]:
        """Internal full-row buffers each written at one index and read only there."""
        writes: dict[str, set[sympy.Expr]] = {}
        reads: dict[str, set[sympy.Expr]] = {}
        full = {n.buffer.name for n in self.group.nodes if n.placement == "full"}
        # compared simplified: a reshaped reader's digits (JX-Nest's norm read back as the
        # [B*N, C] rows of its qkv matmul) name the element its writer wrote
        ranges = self.group.var_ranges()
        for node in self.group.nodes:
            recorder = ReadWriteHandler()
            node.run(recorder)
            for name, index in recorder.writes:
                writes.setdefault(name, set()).add(simplify_index(index, ranges))
            for name, index in recorder.reads:
                reads.setdefault(name, set()).add(simplify_index(index, ranges))
        return {
            name
            for name in self.group.internal & full
            if len(writes.get(name, ())) == 1 and reads.get(name, set()) <= writes[name]
        }

    def _row_resident(self) -> set[str]:
        if self.kind != "persistent" or self.part is not None:
            return set()
        return self._resident_candidates()

    def _pass_resident(self) -> set[str]:
        if self.kind not in ("looped", "split"):
            return set()
        candidates = self._resident_candidates()
        if not candidates:
            return set()
        resident = set(candidates)
        for segment in plan_segments(self.group.nodes):
            written = {n.buffer.name for n in segment.nodes}
            for node in segment.nodes:
                recorder = ReadWriteHandler()
                node.run(recorder)
                resident -= {name for name, _ in recorder.reads} - written
        return resident

    def local_value(self, name: str) -> TritonValue | None:
        found = self._segment_locals.get(name) or self._locals.get(name)
        if found is None and self._seg is LOOP:
            found = self._row_locals.get(name)
        return found

    def keep_local(self, name: str, value: TritonValue) -> bool:
        """Remember a stored value for later loads; True when no store is needed."""
        if self._seg is LOOP:
            self._segment_locals[name] = value
            if name in self.row_resident:
                self._row_locals[name] = value  # read again after the row's reductions
                return True
            return name in self.pass_resident
        self._locals[name] = value
        return name in self.register_only

    def store_reduction(self, name: str, index: sympy.Expr, value: TritonValue) -> None:
        if self.part == "partial":
            return  # the finishing kernel stores it
        dtype = self.buffer_dtype(name)
        if value.dtype != dtype:  # written where the reduction's result is (the epilogue)
            self._epi.line(f"{value}_as = {value}.to({compute_type(dtype)})")
            value = TritonValue(f"{value}_as", dtype)
        self._locals[name] = value
        if name not in self.register_only:
            discarding, self._discarding = self._discarding, False
            self._epi.line(self.store_stmt(name, index, value, OUTER))
            self.handler.stored()
            self._discarding = discarding

    def _make_workspace(self, name: str, numel: int, dtype: torch.dtype) -> Workspace:
        return Workspace(name, numel, dtype)

    # -- emission ------------------------------------------------------------------------
    def build(self, name: str) -> TritonKernel:
        main = CodeWriter(1)
        self.handler = TritonOpsHandler(self, main)
        self.handler.loads_end_at_stores = self.kind == "persistent"
        self._pro = self._body = self._epi = main
        reduction = self.kind != "pointwise"  # also a tiled kernel: it takes RBLOCK
        self._header(main, reduction)
        if self.kind in ("pointwise", "tiled"):
            for node in self.group.nodes:
                node.run(self.handler)
        else:
            for segment in plan_segments(self.group.nodes):
                if segment.kind == "outer":
                    if self.part != "partial":
                        self._seg = OUTER
                        for node in segment.nodes:
                            node.run(self.handler)
                else:
                    self._loop_segment(segment, main)
        params = list(self.params)
        sizes = size_params(self.sched.shape_env, main.lines, self.sched.scalar_reads)
        args = ", ".join([*(f"ptr_{p}" for p in params), *sizes])
        consts = "XBLOCK: tl.constexpr" + (", RBLOCK: tl.constexpr" if reduction else "")
        # size arguments are not specialized (== 1, multiple of 16): one binary every size
        jit = f"@triton.jit(do_not_specialize={sizes!r})" if sizes else "@triton.jit"
        widen = [f"    {n} = {n}.to(tl.int64)" for n in sizes] if self.int64 else []
        lines = [
            f"# {self.group.describe()}",
            jit,
            f"def {name}({args}{', ' if args else ''}{consts}):",
            *widen,  # products of sizes are computed in int64 (the index type)
            *main.lines,
        ]
        xnumel = self.xnumel * (self.config.NSPLIT if self.part == "partial" else 1)
        kind = self.part or self.kind
        return TritonKernel(name, "\n".join(lines), params, kind, xnumel, reduction, self.config,
                            size_params=sizes,
                            rnumel=self.rnumel if kind == "tiled" else None)  # fmt: skip

    def _header(self, out: CodeWriter, reduction: bool) -> None:
        pid = "tl.program_id(0).to(tl.int64)" if self.int64 else "tl.program_id(0)"
        arange = "tl.arange(0, {}).to(tl.int64)" if self.int64 else "tl.arange(0, {})"
        nsplit = self.config.NSPLIT
        xnumel = self.xnumel * (nsplit if self.part == "partial" else 1)
        xnumel = triton_index(sympy.sympify(xnumel))
        if self.kind == "tiled":  # neighbouring programs: one x block, successive r blocks
            rblocks = f"tl.cdiv({self.rnumel}, RBLOCK)"
            out.line(f"tile = {pid}")
            out.line(f"xoffset = (tile // {rblocks}) * XBLOCK")
            out.line(f"xindex = xoffset + {arange.format('XBLOCK')}[:, None]")
            out.line(f"xmask = xindex < {xnumel}")
            out.line(f"rindex = (tile % {rblocks}) * RBLOCK + {arange.format('RBLOCK')}[None, :]")
            out.line(f"rmask = rindex < {self.rnumel}")
            out.line("rxmask = xmask & rmask")
            return
        out.line(f"xoffset = {pid} * XBLOCK")
        if not reduction:
            out.line(f"xindex = xoffset + {arange.format('XBLOCK')}")
            out.line(f"xmask = xindex < {xnumel}")
            return
        out.line(f"xindex = xoffset + {arange.format('XBLOCK')}[:, None]")
        out.line(f"xmask = xindex < {xnumel}")
        out.line(f"rbase = {arange.format('RBLOCK')}[None, :]")
        if self.part == "partial":
            # part-major: a program's XBLOCK lanes are neighbouring rows of one chunk (the
            # loads of a column reduction are then contiguous along the rows)
            rows = triton_index(sympy.sympify(self.xnumel))
            out.line(f"xrow = xindex % {rows}")
            out.line(f"rstart = (xindex // {rows}) * {self.config.CHUNK}")
        elif self.kind == "persistent" or self.part == "finish":
            rnumel = nsplit if self.part == "finish" else triton_index(sympy.sympify(self.rnumel))
            out.line("rindex = rbase")
            out.line(f"rmask = rindex < {rnumel}")
            out.line("rxmask = xmask & rmask")

    def _rnumel_text(self) -> str:
        return triton_index(sympy.sympify(self.rnumel))

    def _loop_segment(self, segment: Any, main: CodeWriter) -> None:
        self._seg = LOOP
        self._segment_locals = {}
        if self.kind == "persistent":
            # the whole row is in registers and every pass is straight-line code at one
            # level: a later pass (the sum after the max, the normalization after both)
            # reuses the loads and values of earlier ones instead of recomputing them
            for node in segment.nodes:
                node.run(self.handler)
        elif self.part == "finish":
            # the row was reduced by the partial kernel: run the nodes only for their
            # reductions (which load the partials); everything else is discarded
            self._discarding = True
            self._body = CodeWriter(1)
            with self.handler.scope(self._body):
                for node in segment.nodes:
                    self._discarding = True
                    node.run(self.handler)
            self._discarding = False
        else:
            self._pro, self._body, self._epi = CodeWriter(1), CodeWriter(2), CodeWriter(1)
            if self.part == "partial":
                self._body.line("rindex = rstart + roffset + rbase")
                loop = f"for roffset in range(0, {self.config.CHUNK}, RBLOCK):"
            else:
                self._body.line("rindex = roffset + rbase")
                bound = self._rnumel_text()
                if not isinstance(self.rnumel, int):
                    bound = f"_em_trip({bound})"  # a kernel argument (see helpers.py)
                # a short row (a pooling window) unrolled: its loads are issued together,
                # where a loop waited for each in turn (poolformer's 3x3 average pools ran
                # at a third of torch.compile's speed)
                unroll = isinstance(self.rnumel, int) and self.rnumel <= UNROLL_MAX_ROW
                loop_range = "tl.static_range" if unroll else "range"
                loop = f"for roffset in {loop_range}(0, {bound}, RBLOCK):"
            self._body.line(f"rmask = rindex < {self._rnumel_text()}")
            self._body.line("rxmask = xmask & rmask")
            with self.handler.scope(self._body):
                for node in segment.nodes:
                    node.run(self.handler)
            main.extend(self._pro.lines)
            main.line(loop)
            main.extend(self._body.lines)
            main.extend(self._epi.lines)
        self._pro = self._body = self._epi = main
        self._segment_locals = {}
        self._seg = OUTER


def _split_ok(group: KernelGroup) -> bool:
    """A split needs the row's reductions first and nothing else over the row after them."""
    segments = plan_segments(group.nodes)
    loops = [s for s in segments if s.kind == "loop"]
    return len(loops) == 1 and segments[0] is loops[0]


def build_group(group: KernelGroup, sched: Schedule) -> GroupKernels:
    """The kernel(s) of one loops group with heuristic launch configurations."""
    if group.device is not None and group.device.type not in ("cuda", "cpu"):
        raise CodegenError(f"{group.name} runs on {group.device}; the Triton target runs CUDA")
    builder = KernelBuilder(group, sched, "pointwise", LaunchConfig(1))
    reduction = bool(group.reduction_sizes)
    tile_var = None  # a tiled kernel's (tiles.py)
    if builder.symbolic:
        kind, config = symbolic_choice(builder.xnumel, builder.rnumel, reduction, sched)
    elif not reduction and (tile_var := transposed_var(group)) is not None:
        kind = "tiled"
        rnumel = int(group.sizes[tile_var])
        config = default_config(kind, builder.xnumel // rnumel, rnumel)
    else:
        xnumel, rnumel = builder.xnumel, builder.rnumel
        column = reduction and is_column_reduction(group)
        passes = sum(1 for s in plan_segments(group.nodes) if s.kind == "loop")
        kind = choose_kind(
            xnumel, rnumel if reduction else None, reduction and _split_ok(group), column, passes
        )
        config = default_config(kind, xnumel, rnumel, column)
    if kind != "split":
        builder = KernelBuilder(group, sched, kind, config, tile_var=tile_var)
        return GroupKernels(group.name, [builder.build(group.name)], builder.register_only)
    partial = KernelBuilder(group, sched, kind, config, "partial")
    finish_config = LaunchConfig(
        min(8, next_power_of_2(xnumel)),
        next_power_of_2(config.NSPLIT),
        num_warps=4,
        NSPLIT=config.NSPLIT,
        CHUNK=config.CHUNK,
    )
    finish = KernelBuilder(group, sched, kind, finish_config, "finish")
    kernels = [partial.build(f"{group.name}_partial"), finish.build(f"{group.name}_finish")]
    return GroupKernels(group.name, kernels, finish.register_only, partial.workspaces)
