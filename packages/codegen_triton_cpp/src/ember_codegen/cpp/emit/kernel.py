"""One C++ function per loops KernelGroup.

For each outer point the group's nodes run in *segments*: an ``outer`` segment runs its
nodes once, a ``loop`` segment runs its ``reduction``/``full`` nodes inside the reduction
loops (a new loop segment starts when a node reads a reduction finished in the current one).
Values written by ``outer`` and ``reduction`` nodes stay in registers for the rest of the
outer point; buffers that nobody outside the group reads are never stored at all.

Parallelism (decided from the static sizes):
* ``serial``: less than PARALLEL_MIN_WORK iterations, OpenMP would cost more than it saves;
* ``outer``: ``#pragma omp parallel for`` over the outer loops (for pointwise kernels the
  innermost loop stays out of the collapse so that it vectorizes);
* ``split``: few outer points but long reductions: the reduction loops are shared out with
  ``omp for schedule(static)``, each thread keeps a partial accumulator, and the partials
  are merged in thread order (deterministic for a given thread count).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from ember_codegen.exc import CodegenError
from ember_codegen.segments import Segment, loop_sizes, plan_segments
from ember_inductor_ir import KernelGroup, Schedule
from ember_inductor_ir.indexing import multi_to_flat, product, simplify_index

from .columns import columns_apply
from .dtypes import compute_type, cpp_type
from .index_printer import cpp_index
from .lanes import LANE_FORMS, LANES, LaneAcc, lane_count, lane_form, lane_loops, lanes_apply
from .merged_dims import merge_reduction_dims
from .op_table import CppValue
from .ops_handler import CodeWriter, CppOpsHandler
from .reductions import accumulator

PARALLEL_MIN_WORK = 32768
#: With fewer outer points than this, a long reduction is split across threads instead.
SPLIT_MAX_OUTER = 16
#: Pointwise kernels collapse outer loops until they have this many parallel iterations.
MIN_PARALLEL_ITERATIONS = 64
#: reductions up to this many elements (pooling windows) unroll inside the outer loops
SHORT_REDUCTION = 16
#: A ``full`` buffer read only inside its group (softmax's exp(x - max), read again by the
#: normalizing pass) lives in a per-row scratch on the stack when a row has at most this
#: many elements, instead of in a whole-tensor buffer.
ROW_SCRATCH_MAX = 4096


@dataclass
class KernelParam:
    buffer: str
    dtype: torch.dtype
    written: bool


@dataclass
class KernelSource:
    name: str
    code: str
    params: list[KernelParam]
    may_fail: bool
    #: buffers of the group that live only in registers or a per-row scratch (the wrapper
    #: allocates nothing)
    register_only: set[str]
    mode: str
    #: size symbols the kernel takes as int64 arguments after the pointers (symbolic sizes)
    size_params: list[str] = field(default_factory=list)
    #: those of size_params that are float scalars read on the host (``t.item()``): double
    float_params: frozenset[str] = frozenset()

    def param_type(self, name: str) -> str:
        """The C type of size (or scalar) argument ``name``."""
        return "double" if name in self.float_params else "int64_t"


def _is_static(value: Any) -> bool:
    return isinstance(value, int)


class KernelBuilder:
    """Emits one group; the ops handler calls back for pointers, locals and reductions."""

    def __init__(self, group: KernelGroup, sched: Schedule, column: bool = False) -> None:
        self.group = group
        self._loads_bytes = False  # the current segment loads 1-byte values (see lanes.py)
        self.column = column  # see columns.py: neighbouring output points run as lanes
        self._column_block = False
        self._segment_accs: list[tuple[list[LaneAcc], list]] = []
        self.sched = sched
        self.sizes = loop_sizes(group.sizes)
        self.rsizes = loop_sizes(group.reduction_sizes)
        self.outer_vars, self.red_vars = group.index_vars()
        # Loop variables' ranges let index printing drop divisions and modulos that are
        # provably whole (x % n with x < n): they block vectorization of the inner loop.
        self._ranges = {
            **{v: sympy.sympify(n) for v, n in zip(self.outer_vars, self.sizes, strict=True)},
            **{v: sympy.sympify(n) for v, n in zip(self.red_vars, self.rsizes, strict=True)},
        }
        self._index_text: dict[sympy.Expr, str] = {}
        self.params: dict[str, bool] = {}
        self.may_fail = False
        self.register_only = group.register_only()
        self._tmp = 0
        self._acc = 0
        self._locals: dict[str, CppValue] = {}
        self._segment_locals: dict[str, CppValue] = {}
        self._segment: Segment | None = None
        self._accs: dict[tuple, tuple[str, Any]] = {}
        self._prologue = CodeWriter()
        self._epilogue = CodeWriter()
        self._preamble: list[str] = []
        self.mode = self._choose_mode()
        self.row_scratch = self._row_scratch_buffers()
        self.register_only |= self.row_scratch

    # -- decisions -----------------------------------------------------------------------
    def _choose_mode(self) -> str:
        if not all(_is_static(s) for s in self.sizes):
            # one kernel for every size: parallel over the outer loops when the run's work
            # is what a static compile would parallelize (decided at run time, see
            # _serial_or_parallel); small sizes run serial loops as a static compile does
            return "outer"
        # a symbolic reduction decides by its example size: a heuristic, correct for any size
        outer = self._hint(product([sympy.sympify(s) for s in self.sizes]))
        red = self._hint(product([sympy.sympify(s) for s in self.rsizes]))
        if outer * max(red, 1) < PARALLEL_MIN_WORK:
            return "serial"
        if self.rsizes and outer < SPLIT_MAX_OUTER:
            return "split"
        return "outer"

    def _serial_or_parallel(self, lines: list[str]) -> list[str]:
        """For symbolic sizes, the static compile's serial/parallel choice made per run:
        the loop nest twice, with its OpenMP team only where the run's work reaches
        PARALLEL_MIN_WORK. Small sizes then run as a serial kernel does, without entering
        a parallel region (about 1 us a kernel even for one thread)."""
        team = [k for k, line in enumerate(lines) if "#pragma omp parallel for" in line]
        if all(_is_static(s) for s in self.sizes) or len(team) != 1:
            return lines
        serial = list(lines)
        pragma = serial[team[0]]
        if "parallel for simd" in pragma:
            serial[team[0]] = pragma.replace("parallel for simd", "simd", 1)
            serial[team[0]] = re.sub(r" collapse\(\d+\)", "", serial[team[0]])
        else:
            del serial[team[0]]
        work = product([sympy.sympify(s) for s in [*self.sizes, *self.rsizes]])
        indent = "  "
        return [
            f"{indent}if ({cpp_index(work)} >= {PARALLEL_MIN_WORK}) {{",
            *[indent + line for line in lines],
            f"{indent}}} else {{",
            *[indent + line for line in serial],
            f"{indent}}}",
        ]

    def _hint(self, expr: Any) -> int:
        return self.sched.size_hint(expr)

    def _row_scratch_buffers(self) -> set[str]:
        """Internal ``full`` buffers: written and read at the same (outer, reduction) point
        only inside this group (fusion checked that), so one row of scratch per outer point
        holds them. Not in split mode (threads share a row) nor for column kernels, nor for
        a symbolic reduction (the row is a fixed-size array)."""
        if not all(_is_static(s) for s in self.rsizes):
            return set()
        rnumel = int(product([sympy.Integer(s) for s in self.rsizes]))
        if self.column or self.mode == "split" or not 0 < rnumel <= ROW_SCRATCH_MAX:
            return set()
        return {
            n.buffer.name
            for n in self.group.nodes
            if n.placement == "full" and n.buffer.name in self.group.internal
        }

    # -- callbacks from the ops handler --------------------------------------------------
    def new_tmp(self) -> str:
        self._tmp += 1
        return f"tmp{self._tmp - 1}"

    def pointer(self, name: str, write: bool) -> str:
        self.params[name] = self.params.get(name, False) or write
        return name

    def buffer_dtype(self, name: str) -> torch.dtype:
        return self.sched.buffers[name].get_dtype()

    def note_load(self, dtype: torch.dtype) -> None:
        """A body loaded from memory: 1-byte loads widen the segment's lane loop."""
        if dtype.itemsize == 1:
            self._loads_bytes = True

    def base_offset(self, name: str) -> sympy.Expr:
        return self.sched.layout(name).offset

    def index(self, expr: sympy.Expr) -> str:
        """C++ text of an index expression, simplified with the loop variables' ranges."""
        text = self._index_text.get(expr)
        if text is None:
            text = self._index_text[expr] = cpp_index(simplify_index(expr, self._ranges))
        return text

    def address(self, name: str, index: sympy.Expr, write: bool) -> str:
        """``pointer[offset]`` for an element of ``name`` (pointers point at the base offset);
        a row-scratch buffer is addressed by the reduction point alone."""
        if name in self.row_scratch:
            return (
                f"{name}_row[{cpp_index(multi_to_flat(self.red_vars, self.group.reduction_sizes))}]"
            )
        pointer = self.pointer(name, write)
        return f"{pointer}[{self.index(index - self.base_offset(name))}]"

    def local_value(self, name: str) -> CppValue | None:
        return self._segment_locals.get(name) or self._locals.get(name)

    def keep_local(self, name: str, value: CppValue) -> bool:
        """Remember a stored value for later loads; True when no store is needed."""
        if self._segment is not None and self._segment.kind == "loop":
            self._segment_locals[name] = value
            return False
        self._locals[name] = value
        return name in self.register_only

    def store_prefix(self) -> str:
        """Stores of per-outer-point values are done by one thread in split mode."""
        in_loop = self._segment is not None and self._segment.kind == "loop"
        return "if (tid == 0) " if self.mode == "split" and not in_loop else ""

    def reduction(
        self, dtype: torch.dtype, src_dtype: torch.dtype, rtype: str, value: CppValue
    ) -> Any:
        key = (rtype, value.expr, dtype, src_dtype)
        if key in self._accs:
            return self._accs[key][1]
        acc = accumulator(rtype)
        name = f"acc{self._acc}"
        self._acc += 1
        ctype = acc.ctype(dtype, src_dtype)
        self._prologue.line(f"{ctype} {name} = {acc.init(dtype, src_dtype)};")
        rindex = cpp_index(multi_to_flat(self.red_vars, self.group.reduction_sizes))
        # a marker line: the loop form (scalar or lanes) is chosen once the body is known
        self._body.line(_marker(name))
        self._updates[name] = f"{name} = {acc.update(name, value.expr, rindex)};"
        self._lane_accs.append(
            LaneAcc(
                name,
                rtype,
                acc.init(dtype, src_dtype),
                value.expr,
                lane_form(rtype, dtype, src_dtype),
            )
        )
        self._lane_dtypes.append((dtype, src_dtype))
        if self.mode == "split":
            self._preamble.append(f"{ctype} {name}_partials[ember_extra::kMaxThreads];")
            self._merge.append((name, acc))
        results = []
        for expr in acc.finish(name, dtype):
            tmp = self.new_tmp()
            self._epilogue.line(f"const {compute_type(dtype)} {tmp} = {expr};")
            results.append(CppValue(tmp, dtype))
        result = tuple(results) if rtype == "welford" else results[0]
        self._accs[key] = (name, result)
        return result

    def store_reduction(self, name: str, index: sympy.Expr, value: CppValue) -> None:
        dtype = self.buffer_dtype(name)
        if value.dtype != dtype:
            raise CodegenError(f"reduction into {name} produced {value.dtype}, buffer is {dtype}")
        self._locals[name] = value
        if name in self.register_only:
            return
        stored = cpp_type(dtype).store.format(value.expr)
        target = self.address(name, index, True)
        self._epilogue.line(
            f"{'if (tid == 0) ' if self.mode == 'split' else ''}{target} = {stored};"
        )

    # -- emission ------------------------------------------------------------------------
    def build(self) -> KernelSource:
        out = CodeWriter(1)
        self.handler = CppOpsHandler(self, out)
        if self.mode == "split":
            out.line("#pragma omp parallel num_threads(ember_extra::team_size())")
            with out.block(""):
                out.line("const int tid = ember::thread_id();")
                out.line("const int nth = ember_extra::team_threads();")
                self._outer_loops(out, parallel=False)
        elif self.column:
            self._column_loops(out, parallel=self.mode == "outer")
        else:
            self._outer_loops(out, parallel=self.mode == "outer")
        if not self.column and self._column_eligible():
            return KernelBuilder(self.group, self.sched, column=True).build()
        name = self.group.name
        params = [
            KernelParam(buffer, self.buffer_dtype(buffer), written)
            for buffer, written in self.params.items()
        ]
        # an output written into its input's storage (Allocation.in_place): the two pointers
        # alias, so neither is declared restrict (a load must not move past the store)
        aliased = {
            name
            for a in self.sched.allocations.values()
            if a.in_place
            for name in (a.buffer, a.reuses)
        }
        decls = ", ".join(
            f"{'' if p.written else 'const '}{cpp_type(p.dtype).storage}*"
            f"{'' if p.buffer in aliased else ' EMBER_RESTRICT'} {p.buffer}"
            for p in params
        )
        size_params = self._size_params(out.lines)
        floats = frozenset(n for n in size_params if n in self._float_symbols())
        decls += "".join(
            f", const {'double' if n in floats else 'int64_t'} {n}" for n in size_params
        )
        lines = [f"// {self.group.describe()}", f"EMBER_KERNEL void {name}({decls}) {{"]
        lines += ["  " + line for line in self._preamble]
        lines += self._serial_or_parallel(out.lines) if self.mode == "outer" else out.lines
        lines.append("}")
        return KernelSource(
            name,
            "\n".join(lines),
            params,
            self.may_fail,
            self.register_only,
            self.mode,
            size_params,
            floats,
        )

    def _float_symbols(self) -> set[str]:
        return {str(s) for s, read in self.sched.scalar_reads.items() if read.is_float}

    def _size_params(self, lines: list[str]) -> list[str]:
        """The size symbols (and scalars read on the host) the kernel's code names: int64
        (or double) arguments, in symbol order."""
        env = self.sched.shape_env
        if env is None:
            return []
        text = "\n".join([*self._preamble, *lines])
        symbols = {*env.var_to_val, *self.sched.scalar_reads}
        names = sorted({str(s) for s in symbols}, key=lambda n: (len(n), n))
        return [n for n in names if re.search(rf"\b{n}\b", text)]

    def _outer_loops(self, out: CodeWriter, parallel: bool) -> None:
        depth = len(self.sizes)
        pragma_at, collapse = self._outer_pragma() if parallel else (None, 0)
        simd_at = None  # (line index, indentation) of the innermost loop's pragma
        for k, (var, size) in enumerate(zip(self.outer_vars, self.sizes, strict=True)):
            if k == pragma_at:
                clause = f" collapse({collapse})" if collapse > 1 else ""
                out.line(f"#pragma omp parallel for{clause}")
            if k == depth - 1 and not self.rsizes:
                simd_at = (len(out.lines), "  " * out.level)
            out.line(f"for (int64_t {var} = 0; {var} < {cpp_index(size)}; ++{var}) {{")
            out.level += 1
        if depth == 0:  # a scalar kernel: one outer point
            out.line("{")
            out.level += 1
        self._outer_point(out)
        for _ in range(max(depth, 1)):
            out.level -= 1
            out.line("}")
        if simd_at is not None and not self.may_fail:
            self._mark_simd(out, *simd_at)

    @staticmethod
    def _mark_simd(out: CodeWriter, at: int, indent: str) -> None:
        """A pointwise kernel's innermost loop is vectorized by request, not left to the
        compiler's cost model: g++ turns a select between a load and a constant into a masked
        load, gives up on its index analysis when the index divides the loop variable (a 2x2
        max-pool's gradient: ``x[h / 2][w / 2]``) and leaves the whole loop scalar. Its
        iterations are independent (a kernel never writes a storage it reads elsewhere)."""
        previous = out.lines[at - 1].strip() if at else ""
        if previous.startswith("#pragma omp parallel for") and "collapse" not in previous:
            out.lines[at - 1] = out.lines[at - 1].replace("parallel for", "parallel for simd", 1)
        else:
            out.lines.insert(at, indent + "#pragma omp simd")

    def _outer_pragma(self) -> tuple[int, int]:
        depth = len(self.sizes)
        if depth == 0:
            return (None, 0)  # type: ignore[return-value]
        if depth == 1:
            return 0, 1
        # Collapsed loops are one flat counter: every iteration recomputes the indices with
        # divisions and the innermost loop no longer vectorizes (a collapse(4) 2x2 max-pool
        # ran 47x slower). Collapse only what the threads need, and keep the innermost
        # loop out where it is the one to vectorize: pointwise kernels and reductions so
        # short that the reduction loop unrolls inside it.
        long_reduction = self._hint(product([sympy.sympify(s) for s in self.rsizes]))
        last = depth if long_reduction > SHORT_REDUCTION else depth - 1
        running = 1
        for k in range(last):
            running *= self._hint(self.sizes[k])
            if running >= MIN_PARALLEL_ITERATIONS:
                return 0, k + 1
        return 0, last

    def _outer_point(self, out: CodeWriter) -> None:
        self._locals = {}
        self.handler.reset_scopes()
        rnumel = product([sympy.sympify(s) for s in self.rsizes])
        for name in sorted(self.row_scratch):
            out.line(f"{cpp_type(self.buffer_dtype(name)).storage} {name}_row[{rnumel}];")
        for segment in plan_segments(self.group.nodes):
            self._segment = segment
            if segment.kind == "outer":
                for node in segment.nodes:
                    node.run(self.handler)
            else:
                self._loop_segment(segment, out)
            self._segment = None
        if self._column_block:  # the per-point lane loop opened by _column_segment
            out.level -= 1
            out.line("}")

    # -- column reductions (columns.py) ------------------------------------------------
    def _column_eligible(self) -> bool:
        if self.mode not in ("outer", "serial") or not self.sizes or not self.rsizes:
            return False
        if not _is_static(self.sizes[-1]) or not _is_static(self.rsizes[-1]):
            return False  # lane blocks need a static trip count
        segments = plan_segments(self.group.nodes)
        loops = [s for s in segments if s.kind == "loop"]
        if len(loops) != 1 or segments[0] is not loops[0] or len(self._segment_accs) != 1:
            return False
        accs, dtypes = self._segment_accs[0]
        return columns_apply(
            loops[0].nodes,
            self.outer_vars[-1],
            self.sizes[-1],
            self.red_vars[-1],
            accs,
            dtypes,
            one_loop_segment_first=True,
            ranges=self._ranges,
        )

    def _column_loops(self, out: CodeWriter, parallel: bool) -> None:
        depth = len(self.sizes)
        var, size = self.outer_vars[-1], self.sizes[-1]
        full = size - size % LANES
        for k, (v, n) in enumerate(zip(self.outer_vars[:-1], self.sizes[:-1], strict=True)):
            if parallel and k == 0:
                clause = f" collapse({depth - 1})" if depth > 2 else ""
                out.line(f"#pragma omp parallel for{clause}")
            out.line(f"for (int64_t {v} = 0; {v} < {n}; ++{v}) {{")
            out.level += 1
        if parallel and depth == 1:
            out.line("#pragma omp parallel for")
        out.line(f"for (int64_t ib = 0; ib < {full}; ib += {LANES}) {{")
        out.level += 1
        self._column_block = True
        self._outer_point(out)
        self._column_block = False
        out.level -= 1
        out.line("}")
        if full < size:
            out.line(f"for (int64_t {var} = {full}; {var} < {size}; ++{var}) {{")
            out.level += 1
            self._outer_point(out)
            out.level -= 1
            out.line("}")
        for _ in range(depth - 1):
            out.level -= 1
            out.line("}")

    def _column_segment(self, out: CodeWriter, body: CodeWriter) -> None:
        var = self.outer_vars[-1]
        for acc in self._lane_accs:
            for text in LANE_FORMS[acc.form].wide(acc.name, acc.init, LANES):
                out.line(text)
        for k, (v, n) in enumerate(zip(self.red_vars, self.rsizes, strict=True)):
            out.line("  " * k + f"for (int64_t {v} = 0; {v} < {n}; ++{v}) {{")
        pad = "  " * len(self.rsizes)
        out.line(pad + "#pragma omp simd")
        out.line(pad + f"for (int64_t l = 0; l < {LANES}; ++l) {{")
        out.line(pad + f"  const int64_t {var} = ib + l;")
        for line in _dedent(body.lines):
            for acc in self._lane_accs:
                direct = LANE_FORMS[acc.form].direct(acc.name, acc.value, "l")
                line = line.replace(_marker(acc.name), direct)
            out.line(pad + "  " + line)
        out.line(pad + "}")
        for k in reversed(range(len(self.rsizes))):
            out.line("  " * k + "}")
        # each output point finishes from its lane; the lane loop closes after the point
        out.line(f"for (int64_t l = 0; l < {LANES}; ++l) {{")
        out.level += 1
        out.line(f"const int64_t {var} = ib + l;")
        out.extend(["  " + line for line in self._prologue.lines])
        for acc in self._lane_accs:
            out.line(LANE_FORMS[acc.form].combine(acc.name, "l"))
        out.extend(["  " + line for line in self._epilogue.lines])
        self._accs = {}

    def _loop_segment(self, segment: Segment, out: CodeWriter) -> None:
        self._prologue = CodeWriter(out.level)
        self._epilogue = CodeWriter(out.level)
        self._merge: list[tuple[str, Any]] = []
        self._segment_locals = {}
        self._updates: dict[str, str] = {}
        self._lane_accs: list[LaneAcc] = []
        self._lane_dtypes: list[tuple[torch.dtype, torch.dtype]] = []
        self._loads_bytes = False
        body = CodeWriter(out.level + len(self.rsizes))
        self._body = body
        with self.handler.scope(body):
            for node in segment.nodes:
                node.run(self.handler)
        self._segment_locals = {}
        self._segment_accs.append((list(self._lane_accs), list(self._lane_dtypes)))
        if self._column_block:
            self._column_segment(out, body)
            return
        out.extend(self._prologue.lines)
        # a symbolic length decides by its example value (the lane loop has a run-time tail)
        if lanes_apply(self._lane_accs, self._lane_dtypes, self._hint(self.rsizes[-1])):
            self._lane_segment(out, body)
        else:
            self._scalar_segment(out, body)
        if self.mode == "split" and self._merge:
            for name, _ in self._merge:
                out.line(f"{name}_partials[tid] = {name};")
            out.line("#pragma omp barrier")
            for name, acc in self._merge:
                out.line(f"{name} = {name}_partials[0];")
                out.line(
                    f"for (int t = 1; t < nth; ++t) {name} = {acc.combine(name, f'{name}_partials[t]')};"
                )
            out.line("#pragma omp barrier")
        out.extend(self._epilogue.lines)
        self._accs = {}

    def _scalar_segment(self, out: CodeWriter, body: CodeWriter) -> None:
        for k, line in enumerate(body.lines):
            for name, update in self._updates.items():
                if _marker(name) in line:
                    body.lines[k] = line.replace(_marker(name), update)
        if self.mode == "split":
            clause = f" collapse({len(self.rsizes)})" if len(self.rsizes) > 1 else ""
            nowait = " nowait" if self._merge else ""
            out.line(f"#pragma omp for schedule(static){clause}{nowait}")
        for k, (var, size) in enumerate(zip(self.red_vars, self.rsizes, strict=True)):
            out.line("  " * k + f"for (int64_t {var} = 0; {var} < {cpp_index(size)}; ++{var}) {{")
        out.extend(body.lines)
        for k in reversed(range(len(self.rsizes))):
            out.line("  " * k + "}")

    def _lane_segment(self, out: CodeWriter, body: CodeWriter) -> None:
        heads = [
            f"for (int64_t {var} = 0; {var} < {cpp_index(size)}; ++{var}) {{"
            for var, size in zip(self.red_vars[:-1], self.rsizes[:-1], strict=True)
        ]
        lines = lane_loops(
            self._lane_accs,
            heads,
            str(self.red_vars[-1]),
            self.rsizes[-1],
            _dedent(body.lines),
            _marker,
            split=self.mode == "split",
            lanes=lane_count(self._hint(self.rsizes[-1]), self._loads_bytes),
        )
        out.extend(["  " * out.level + line for line in lines])


def _dedent(lines: list[str]) -> list[str]:
    indent = min((len(line) - len(line.lstrip(" ")) for line in lines if line.strip()), default=0)
    return [line[indent:] for line in lines]


def _marker(acc_name: str) -> str:
    return f"/*update {acc_name}*/"


def build_kernel(group: KernelGroup, sched: Schedule) -> KernelSource:
    if group.device is not None and group.device.type != "cpu":
        raise CodegenError(
            f"{group.name} runs on {group.device}; the C++ target compiles CPU kernels only "
            "(use target='triton' for GPU graphs)"
        )
    return KernelBuilder(merge_reduction_dims(group), sched).build()
