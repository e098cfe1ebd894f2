"""The generated Python wrapper: guards inputs, allocates buffers per the memory plan,
computes each data pointer once, calls the kernels and extern ops, returns the outputs.

Every buffer variable in the wrapper is a tensor of its buffer's dtype whose data pointer is
the buffer's start (its storage offset is the buffer's); kernels receive ``data_ptr()`` and
index relative to it. Its sizes and strides are the ones the wrapper knows statically
(``held``): the buffer's own, or the view that extern calls and outputs take of it most
often, so that a view costing ~1 us per call is made once at allocation, or not at all
when a dead buffer's storage is taken over. Non-literal objects (kernels, extern
callables, dtypes, constants) live in the wrapper's namespace under generated names, so
the source stays printable.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ember_codegen.exc import CodegenError
from ember_inductor_ir import Schedule
from ember_inductor_ir.extern import ExternKernel, TensorArg
from ember_inductor_ir.layout import Layout
from ember_primops import get_prim, is_prim

from . import onednn_matmul
from .held_layouts import Triple, extent, is_contiguous, preferred_layouts, triple
from .kernel import KernelSource
from .launch_runs import LaunchRun
from .size_bindings import concrete, is_symbolic, value_of

#: Library prims whose aten op takes the same arguments: the wrapper calls aten directly.
#: The prim's own kernel re-checks its arguments on meta tensors every call (~40 us, an
#: extern's whole cost at small sizes); compilation checked them once, and the inputs are
#: guarded. The result's layout is still checked (``_adopt``).
DIRECT_ATEN_CALLS: dict[str, Any] = {
    "mm": torch.ops.aten.mm.default,
    "bmm": torch.ops.aten.bmm.default,
    "convolution": torch.ops.aten.convolution.default,
    "convolution_backward": torch.ops.aten.convolution_backward.default,
}


#: Library prims (OUT_VARIANT_PRIMS) -> the function writing the result into a given buffer
#: (``out=``): aten's out overload through torch's own binding, ~0.55 us cheaper a call than
#: the OpOverload's ``_op`` (which boxes its arguments). Runtime names (runtime_namespace).
OUT_VARIANTS: dict[str, str] = {
    "mm": "_mm_out",
    "bmm": "_bmm_out",
    "cat": "_cat_out",
    "addmm": "_addmm_out",  # a linear layer's bias in BLAS's epilogue (add_folds)
}
#: what those names are in every wrapper's namespace (the C++ and the Triton target's)
OUT_FUNCTIONS: dict[str, Any] = {
    "_mm_out": torch.mm,
    "_bmm_out": torch.bmm,
    "_cat_out": torch.cat,
    "_addmm_out": torch.addmm,
}


#: Of those, the ops whose results are fresh tensors (storage offset 0) whose sizes and dtype
#: the (guarded) inputs fix: only the strides of their results are checked.
FRESH_RESULTS = frozenset(DIRECT_ATEN_CALLS)


class _PrimImplementations(dict):
    """prim OpOverload -> its implementation, called without the per-call meta check that
    the prim's registered kernel runs first (~40-80 us: the arguments converted to meta
    tensors and the meta function run). Compilation ran that meta function on the same
    metadata and the wrapper's inputs are guarded; the result's layout is still checked."""

    def __missing__(self, op: Any) -> Any:
        impl = self[op] = get_prim(op).impl
        return impl


PRIM_IMPLEMENTATIONS = _PrimImplementations()


def library_call(extern: ExternKernel) -> Any:
    """What the wrapper calls for ``extern``: its aten op where one matches, else the op."""
    if extern.fallback:
        return extern.kernel
    return DIRECT_ATEN_CALLS.get(extern.kernel_name, extern.kernel)


def _ints(values: Sequence[Any]) -> tuple[int, ...]:
    return tuple(concrete(v) for v in values)


def _is_transpose(held: Triple, wanted: Triple) -> bool:
    """Whether ``wanted`` is ``held`` with its two dims swapped at the same offset: the view
    ``t()`` makes (one C call, cheaper than as_strided's argument parsing)."""
    (size, stride, offset), (w_size, w_stride, w_offset) = held, wanted
    return (
        len(size) == 2
        and offset == w_offset
        and tuple(w_size) == tuple(size[::-1])
        and tuple(w_stride) == tuple(stride[::-1])
    )


#: Buffers of at most this many bytes (static sizes) are allocated anew instead of pooled:
#: the C allocator serves them from memory it has mapped already, and torch.empty_strided
#: (~1 us) costs less than the pool's Python take and give (~2.6 us together).
SMALL_BUFFER_BYTES = 64 << 10


def _small(layout: Layout) -> bool:
    numel = layout.storage_numel()
    return not is_symbolic(numel) and int(numel) * layout.dtype.itemsize <= SMALL_BUFFER_BYTES


@dataclass
class WrapperCode:
    source: str
    namespace: dict[str, Any]
    kernel_names: list[str] = field(default_factory=list)


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = {}
        self._names: dict[int, str] = {}

    def line(self, text: str) -> None:
        self.lines.append("    " + text)

    def const(self, value: Any, hint: str) -> str:
        """A namespace name for ``value`` (one per distinct object)."""
        if id(value) in self._names:
            return self._names[id(value)]
        name = f"_{hint}{len(self._names)}"
        self._names[id(value)] = name
        self.namespace[name] = value
        return name

    def literal(self, value: Any) -> str:
        """Python source for an extern argument that is not a tensor."""
        if value is None or isinstance(value, (bool, int, str)):
            return repr(value)
        if is_symbolic(value):  # a size argument: this binding's value
            return repr(concrete(value))
        if isinstance(value, float):
            return repr(value) if math.isfinite(value) else self.const(value, "c")
        if isinstance(value, (list, tuple)):
            inner = ", ".join(self.literal(v) for v in value)
            return (
                f"[{inner}]"
                if isinstance(value, list)
                else f"({inner}{',' if len(value) == 1 else ''})"
            )
        return self.const(value, "c")


class WrapperBuilder:
    """``trusted_inputs``: the caller guarantees that every call's inputs have the sizes
    and dtypes of the graph's example inputs (the backend contract, where guards checked
    them already), so the wrapper checks only their strides (one C call an input).

    ``pool_storages``: fresh buffers come from STORAGE_POOL and dead ones return to it.

    ``runs``: the native entry points (launch_runs.py) the wrapper calls instead of each of
    their kernels; a run's buffers are allocated before its call and freed after it.

    ``onednn_matmuls``: float32 CPU products may go to oneDNN (onednn_matmul.py)."""

    onednn_matmuls = True
    pool_storages = True

    def __init__(
        self,
        sched: Schedule,
        kernels: dict[str, KernelSource],
        *,
        trusted_inputs: bool = False,
        runs: Sequence[LaunchRun] = (),
    ) -> None:
        self.sched = sched
        self.kernels = kernels
        self.trusted_inputs = trusted_inputs
        self.runs = {run.kernel_names: run for run in runs}
        #: kernels of the current run whose call waits for the run's end, and the frees
        #: that wait for that call (see _flush_launches)
        self.pending: list[str] = []
        self.pending_frees: list[str] = []
        self.w = _Writer()
        self.live: set[str] = set()  # buffer variables holding a tensor right now
        #: the layout of the tensor each buffer variable holds (see the module docstring)
        self.held: dict[str, Triple] = {}
        #: variables whose storage offset is only known at run time (inputs, constants)
        self.dynamic_offset: set[str] = set(sched.graph_inputs) | set(sched.constants)
        self.preferred = preferred_layouts(sched)
        self.pointers: set[str] = set()
        later_reuse = [a.reuses for a in sched.allocations.values() if a.reuses is not None]
        self.reused = set(later_reuse)
        #: buffers whose storage the wrapper took from the storage pool -> (dtype, numel)
        self.pooled: dict[str, tuple[str, int]] = {}
        #: (input, view expression) -> the local holding it (see _cached_view)
        self.cached_views: dict[tuple[str, str], str] = {}
        #: per allocation site of a small fixed-size buffer: its first line (_slot_take);
        #: buffers holding a site's storage -> (site, its layout); sites given back
        self.slots: list[int] = []
        self.slotted: dict[str, tuple[int, Triple]] = {}
        self.returned: set[int] = set()

    # -- pieces ------------------------------------------------------------------------
    def _layout_args(self, layout: Layout) -> str:
        return f"{_ints(layout.size)}, {_ints(layout.stride)}"

    def _unpack_inputs(self) -> None:
        inputs = self.sched.graph_inputs
        if inputs:
            self.w.line(f"{', '.join(inputs)}{',' if len(inputs) == 1 else ''} = args")

    def _prologue(self) -> list[str]:
        """Lines written before the body once it is known (a subclass's size reads)."""
        return []

    def _guard_inputs(self) -> None:
        """Inputs with another shape or dtype raise, other strides are copied (_relayout).
        Inputs whose sizes and dtypes the caller guarantees (``trusted_inputs``) have only
        their strides checked: a backend's caller guards the inputs' kinds, not always their
        strides (a direct caller of the backend)."""
        w = self.w
        for k, name in enumerate(self.sched.graph_inputs):
            layout = self.sched.layout(name)
            self.live.add(name)
            self.held[name] = triple(layout)
            dtype = w.const(layout.dtype, "dtype")
            size, stride = _ints(layout.size), _ints(layout.stride)
            # _relayout ignores the strides of size-0/1 dims, and so does is_contiguous()
            strides_ok = (
                f"{name}.is_contiguous()"
                if is_contiguous(size, stride)
                else f"{name}.stride() == {stride}"
            )
            if self.trusted_inputs:
                w.line(f"if not {strides_ok}:")
            else:
                w.line(
                    f"if {name}.shape != {size} or not {strides_ok} or {name}.dtype is not {dtype}:"
                )
            w.line(f"    {name} = _relayout({name}, {k}, {size}, {stride}, {dtype})")

    def _ptr(self, name: str) -> str:
        if name not in self.pointers:
            if name in self.sched.constants:
                value = self.sched.constants[name]
                self.w.namespace[f"p_{name}"] = value.data_ptr()
            else:
                self.w.line(f"p_{name} = {name}.data_ptr()")
            self.pointers.add(name)
        return f"p_{name}"

    def _allocate(self, name: str) -> None:
        w = self.w
        layout = self.sched.layout(name)
        plan = self.sched.allocations.get(name)
        donor = plan.reuses if plan is not None else None
        dtype = w.const(layout.dtype, "dtype")
        own = triple(layout)
        numel = extent(own)
        want = self.preferred.get(name, own)
        if want[2] != own[2] or extent(want) > numel:  # kernels index from the own offset
            want = own
        if donor is not None and donor in self.live:
            held = self.held[donor]  # same dtype and storage size (the memory plan's rule)
            if held == want or (name not in self.preferred and held[2] == own[2]):
                w.line(f"{name} = {donor}; del {donor}")
                want = held
            else:
                w.line(
                    f"{name} = _as_strided({donor}, {want[0]}, {want[1]}, {want[2]}); del {donor}"
                )
            self.live.discard(donor)
        elif self.pool_storages and not _small(layout):
            storage = concrete(layout.storage_numel())
            w.line(f"{name} = _pool.take({want[0]}, {want[1]}, {want[2]}, {dtype}, {storage})")
            self.pooled[name] = (dtype, storage)
        else:
            if want[2] == 0 and extent(want) == numel:
                fresh = f"_empty_strided({want[0]}, {want[1]}, dtype={dtype})"
            else:
                storage = concrete(layout.storage_numel())
                fresh = f"_as_strided(_empty({storage}, dtype={dtype}), {want[0]}, {want[1]}, {want[2]})"
            if self.pool_storages:
                self._slot_take(name, want, fresh)
            else:
                w.line(f"{name} = {fresh}")
        if donor is not None and donor in self.pooled:
            self.pooled[name] = self.pooled.pop(donor)  # the storage is this buffer's now
        if donor is not None and donor in self.slotted:
            self.slotted[name] = self.slotted.pop(donor)
        self.live.add(name)
        self.held[name] = want

    def _slot_take(self, name: str, want: Triple, fresh: str) -> None:
        """A small buffer of fixed size from its allocation site's slot: the tensor this
        site's storage was when it died in the last call (a list pop, ~0.1 us, where a fresh
        tensor costs ~1 us), else ``fresh``. The slots are a default argument of ``call``
        (one list per site and wrapper); pops and appends are atomic, so concurrent calls
        each get their own tensor. A site whose storage never comes back (an output, or a
        buffer that took it over in another layout) keeps the plain allocation (build)."""
        slot = len(self.slots)
        self.slots.append(len(self.w.lines))
        w = self.w
        w.line("try:")
        w.line(f"    {name} = _slots[{slot}].pop()")
        w.line("except IndexError:")
        w.line(f"    {name} = {fresh}")
        self.slotted[name] = (slot, want)

    def _slot_lines(self, lines: list[str]) -> list[str]:
        """``lines`` with the sites whose storage never returns as plain allocations."""
        for slot, at in enumerate(self.slots):
            if slot not in self.returned:
                fresh = lines[at + 3].strip()
                lines[at : at + 4] = [f"    {fresh}", "", "", ""]
        return [line for line in lines if line]

    def _view_expr(self, arg: TensorArg) -> str:
        """Python expression for an extern argument: the buffer or a strided view of it.
        No view means the buffer's own layout, which is not always the one it is held in
        (a transposed view other externs read more often)."""
        expr = self._strided_view(arg.name, arg.view or self.sched.layout(arg.name))
        if expr == arg.name or not self._caches_views() or arg.name not in self.sched.graph_inputs:
            return expr
        return self._cached_view(arg.name, expr)

    def _caches_views(self) -> bool:
        """Views of inputs are kept between calls where the view depends on the input only:
        sizes that guards fix (trusted inputs) and no size symbols."""
        return self.trusted_inputs and self.sched.shape_env is None

    def _cached_view(self, name: str, expr: str) -> str:
        """A local holding ``expr`` (a view of input ``name``), made again only when the
        input is another tensor or its data moved (``.data =``, ``set_``): parameters are
        the same tensors on every call, and the view costs ~0.6 us, the check ~0.1 us. The
        cell is a default argument of ``call``: one per compiled wrapper, none in its
        namespace (which the artifact cache writes out). Its sizes and strides are fixed:
        guarded sizes, checked strides (a relaid input is another tensor)."""
        key = (name, expr)
        if key not in self.cached_views:
            k = len(self.cached_views)
            local = self.cached_views[key] = f"v{k}_{name}"
            w = self.w
            w.line(f"_c = _views[{k}]")
            w.line(f"if _c[0] is not {name} or _c[1] != {name}.data_ptr():")
            w.line(f"    _c = _views[{k}] = ({name}, {name}.data_ptr(), {expr})")
            w.line(f"{local} = _c[2]")
        return self.cached_views[key]

    def _strided_view(self, name: str, view: Layout) -> str:
        base = triple(self.sched.layout(name))
        wanted = triple(view)
        held = self.held.get(name, base)
        if wanted == held:
            return name
        size, stride, offset = wanted
        if _is_transpose(held, wanted):  # a weight read as mat2: ~0.35 us cheaper
            return f"{name}.t()"
        if name in self.dynamic_offset:  # the buffer's base sits anywhere in its storage
            shift = offset - base[2]
            at = f"{name}.storage_offset() + {shift}" if shift else f"{name}.storage_offset()"
        else:
            at = str(offset)
        return f"_as_strided({name}, {size}, {stride}, {at})"

    def _loops(self, group_name: str) -> None:
        kernel = self.kernels[group_name]
        for p in kernel.params:
            self._ptr(p.buffer)
        if self.runs:
            self.pending.append(group_name)  # called with its run (_flush_launches)
        else:
            self._call_kernel(kernel)

    def _call_kernel(self, kernel: KernelSource, *, read: bool = False) -> None:
        """``read``: its pointers are locals already (read before frees that wait)."""
        pointers = [f"p_{p.buffer}" if read else self._ptr(p.buffer) for p in kernel.params]
        sizes = [str(value_of(n)) for n in kernel.size_params]
        self.w.line(f"_k_{kernel.name}({', '.join([*pointers, *sizes])})")
        if kernel.may_fail:
            self.w.line(f"if _error.value: _raise_kernel_error({kernel.name!r})")

    def _flush_launches(self) -> None:
        """Call the kernels waiting since the last extern: their run's entry point (one
        native call), else each kernel; then the frees that waited for them. A dead buffer
        goes back to the pool only after the call that reads it: another thread's graph
        could take it from there."""
        pending, self.pending = tuple(self.pending), []
        run = self.runs.get(pending)
        w = self.w
        if run is not None:
            args = [f"p_{p}" for p in run.pointers] + [str(value_of(n)) for n in run.sizes]
            call = f"_run_{run.name[len('run_') :]}({', '.join(args)})"
            if run.may_fail:
                w.line(f"_e = {call}")
                w.line(f"if _e: _raise_kernel_error({run.kernel_names!r}[_e - 1])")
            else:
                w.line(call)
        else:
            for name in pending:
                self._call_kernel(self.kernels[name], read=True)
        for line in self.pending_frees:
            w.line(line)
        self.pending_frees = []

    def _extern(self, extern: ExternKernel, dead: set[str] = frozenset()) -> None:
        w = self.w
        if extern.writes_out and not extern.fallback:
            self._extern_out(extern)
            return
        fn = w.const(library_call(extern), "extern")
        render = self._render_arg
        args = [render(a) for a in extern.args]
        args += [f"{k}={render(v)}" for k, v in extern.kwargs.items()]
        called = library_call(extern)
        if is_prim(called):
            fn = f"_prim_impl[{fn}]"  # see _PrimImplementations
        elif isinstance(called, torch._ops.OpOverload):
            fn += "._op"  # the operator itself: skips OpOverload.__call__'s Python frame
        w.line(
            f"_r = {fn}({', '.join(args)})  # {extern.kernel_name}{' (fallback)' if extern.fallback else ''}"
        )
        fresh = not extern.fallback and extern.kernel_name in FRESH_RESULTS
        for out in extern.outputs:
            if out.name in dead:  # freed where it is made: read by nobody, left unbound
                continue  # (aten's meta can disagree with the kernel on unused outputs)
            leaf = f"(_r[{out.index}] if isinstance(_r, _sequences) else _r)"
            if out.index:
                leaf = f"_r[{out.index}]"  # only a sequence has a second result
            self._adopt(out.name, leaf, fresh)

    def _render_arg(self, value: Any) -> str:
        """Python source for an extern argument: tensors as buffers or views of them."""
        if isinstance(value, TensorArg):
            return self._view_expr(value)
        if isinstance(value, (list, tuple)) and any(isinstance(v, TensorArg) for v in value):
            inner = ", ".join(self._render_arg(v) for v in value)
            return f"[{inner}]" if isinstance(value, list) else f"({inner},)"
        return self.w.literal(value)

    def _extern_out(self, extern: ExternKernel) -> None:
        """``op.out(*args, out=buffer)`` into the planned buffer (see OUT_VARIANT_PRIMS)."""
        (out,) = extern.outputs
        fn = OUT_VARIANTS[extern.kernel_name]
        layouts = self._arg_layouts(extern)
        if self.onednn_matmuls and onednn_matmul.use_onednn(
            extern.kernel_name, layouts, extern.kwargs
        ):
            if self._onednn_fresh(extern):
                return
            fn = onednn_matmul.RUNTIME_NAMES[extern.kernel_name]
        self._allocate(out.name)
        args = [self._render_arg(a) for a in extern.args]
        target = self._strided_view(out.name, self.sched.layout(out.name))
        self.w.line(f"{fn}({', '.join(args)}, out={target})")

    def _onednn_fresh(self, extern: ExternKernel) -> bool:
        """oneDNN's result (a fresh row-major tensor) becomes the buffer itself where the
        buffer is row-major at offset 0, instead of being copied into the planned storage
        (a pass over the result: up to a third of a weight gradient's product). The storage
        the plan gave it (a dead buffer's) is released here instead."""
        (out,) = extern.outputs
        size, stride, offset = triple(self.sched.layout(out.name))
        if offset != 0 or not is_contiguous(size, stride):
            return False
        plan = self.sched.allocations.get(out.name)
        if plan is not None and plan.reuses is not None and plan.reuses in self.live:
            self._release(plan.reuses, self.w.line)
        args = ", ".join(self._render_arg(a) for a in extern.args)
        fn = onednn_matmul.FRESH_NAMES[extern.kernel_name]
        self._adopt(out.name, f"{fn}({args})", fresh=True)
        return True

    def _arg_layouts(self, extern: ExternKernel) -> list[Layout | None]:
        """Each argument's layout as the call sees it (None for a non-tensor)."""
        return [
            (a.view or self.sched.layout(a.name)) if isinstance(a, TensorArg) else None
            for a in extern.args
        ]

    def _adopt(self, name: str, leaf: str, fresh: bool) -> None:
        """``name = leaf``, copied into the buffer's layout unless it has it already
        (checked inline: a call costs more than the checks; see FRESH_RESULTS)."""
        w = self.w
        layout = self.sched.layout(name)
        dtype = w.const(layout.dtype, "dtype")
        size, stride, offset = triple(layout)
        w.line(f"{name} = {leaf}")
        check = f"{name}.stride() != {stride}"
        if not fresh or offset:
            check += (
                f" or {name}.shape != {size} or {name}.storage_offset() != {offset} or "
                f"{name}.dtype != {dtype}"
            )
        w.line(f"if {check}:")
        w.line(f"    {name} = _adopt({name}, {size}, {stride}, {offset}, {dtype})")
        self.live.add(name)
        self.held[name] = (size, stride, offset)

    def _free(self, group_name: str) -> None:
        # while kernels wait for their run's call, so do the frees of what they read
        emit = self.pending_frees.append if self.pending else self.w.line
        for name in self.sched.frees.get(group_name, []):
            if name in self.live and name not in self.reused:
                self._release(name, emit)

    def _release(self, name: str, emit: Any) -> None:
        """``name`` is dead: its storage back to the pool or its slot, the variable gone."""
        if name in self.pooled:  # dead: its storage serves a later allocation
            dtype, storage = self.pooled.pop(name)
            emit(f"_pool.give({name}, {dtype}, {storage})")
        slot, layout = self.slotted.pop(name, (None, None))
        if slot is not None and self.held[name] == layout:  # back in the site's layout
            emit(f"_slots[{slot}].append({name})")
            self.returned.add(slot)
        emit(f"del {name}")
        self.live.discard(name)
        self.pointers.discard(name)

    def _outputs(self) -> None:
        items = []
        for spec in self.sched.graph_outputs:
            if spec.name is None and is_symbolic(spec.constant):
                items.append(self.w.literal(spec.constant))  # a size output: this binding's
            elif spec.name is None:
                items.append(self.w.const(spec.constant, "out"))
            else:
                items.append(self._strided_view(spec.name, spec.layout))
        self.w.line(f"return [{', '.join(items)}]")

    # -- the whole wrapper ---------------------------------------------------------------
    def build(self) -> WrapperCode:
        w = self.w
        for name, value in self.sched.constants.items():
            w.namespace[name] = value  # baked into the graph; read by name
            self.live.add(name)
            self.held[name] = triple(self.sched.layout(name))
        self._unpack_inputs()
        self._guard_inputs()
        for group in self.sched:
            if group.extern is not None:
                self._flush_launches()
            w.line(f"# {group.describe()}")
            if group.extern is not None:
                self._extern(group.extern, dead=set(self.sched.frees.get(group.name, ())))
            else:
                kernel = self.kernels[group.name]
                for node in group.nodes:
                    name = node.buffer.name
                    if name not in kernel.register_only:
                        self._allocate(name)
                self._loops(group.name)
            self._free(group.name)
        self._flush_launches()
        self._outputs()
        views = (
            f", _views=[(None, 0, None)] * {len(self.cached_views)}" if self.cached_views else ""
        )
        lines = self._slot_lines(list(w.lines))
        if self.returned:
            views += f", _slots=[{', '.join('[]' for _ in self.slots)}]"
        source = f"def call(args{views}):\n" + "\n".join([*self._prologue(), *lines]) + "\n"
        return WrapperCode(source, w.namespace, [g.name for g in self.sched if g.extern is None])


def check_cpu(sched: Schedule) -> None:
    for name in sched.graph_inputs:
        device = sched.layout(name).device
        if device.type != "cpu":
            raise CodegenError(
                f"graph input {name} is on {device}; the C++ target runs CPU graphs only "
                "(use target='triton' for GPU graphs)"
            )


def size_class(numel: int) -> int:
    """The storage size a pooled buffer of ``numel`` elements is allocated with: ``numel``
    rounded up to 4 significant bits (at most 1/8 more), so that the calls of a symbolic
    graph at lengths 40, 41, 42... share buffers instead of each length allocating anew."""
    shift = max(numel.bit_length() - 4, 0)
    return -(-numel >> shift) << shift


def _class_below(capacity: int) -> int:
    """The largest size class a storage of ``capacity`` elements can serve."""
    shift = max(capacity.bit_length() - 4, 0)
    return capacity >> shift << shift


class StoragePool:
    """Dead buffers of generated CPU wrappers, kept for the next allocation of the same dtype
    and size class (the graph's next call, or another graph's).

    A buffer allocated anew on every call is memory the C allocator maps (or takes back from
    the OS after trimming its heap) and the kernel touches first: page faults, 8% of a
    transformer block's inference on the 2-core development machine. A buffer taken from
    here is already mapped. Buffers are allocated in size classes (``size_class``) and filed
    by the class their storage can serve, so a graph of symbolic sizes called at a new
    length reuses the last length's buffers. Concurrent calls are safe: a buffer is popped by
    one taker. At most ``limit_bytes`` are held; past it the pool is emptied (sizes no graph
    asks for any more do not pin memory forever)."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.held_bytes = 0
        self._free: dict[tuple[torch.dtype, int], list[tuple[torch.Tensor, int]]] = {}

    def take(
        self, size: tuple, stride: tuple, offset: int, dtype: torch.dtype, numel: int
    ) -> torch.Tensor:
        wanted = size_class(numel)
        stack = self._free.get((dtype, wanted))
        if stack:
            try:
                found, nbytes = stack.pop()
            except IndexError:  # another thread took the last one
                found = None
            if found is not None:
                self.held_bytes -= nbytes
                return found.as_strided(size, stride, offset)
        return torch.empty(wanted, dtype=dtype).as_strided(size, stride, offset)

    def give(self, buffer: torch.Tensor, dtype: torch.dtype, numel: int) -> None:
        nbytes = buffer.untyped_storage().nbytes()  # its real capacity (extern outputs too)
        if nbytes > self.limit_bytes or buffer.dtype is not dtype:
            return  # larger than the whole budget (or pooling is off)
        if self.held_bytes + nbytes > self.limit_bytes:
            self.clear()
        key = (dtype, _class_below(nbytes // buffer.element_size()))
        self._free.setdefault(key, []).append((buffer, nbytes))
        self.held_bytes += nbytes

    def clear(self) -> None:
        self._free = {}
        self.held_bytes = 0


#: EMBER_CPU_POOL_MB (default 2048) bounds the bytes held between calls; 0 disables pooling.
STORAGE_POOL = StoragePool(int(os.environ.get("EMBER_CPU_POOL_MB", "2048")) << 20)


def runtime_namespace() -> dict[str, Any]:
    return {
        "_pool": STORAGE_POOL,
        "_empty_strided": torch.empty_strided,
        "_empty": torch.empty,
        "_as_strided": torch.as_strided,
        "_relayout": relayout_input,
        "_adopt": adopt_extern_output,
        "_sequences": (tuple, list),
        "_prim_impl": PRIM_IMPLEMENTATIONS,
        **OUT_FUNCTIONS,
        **onednn_matmul.RUNTIME_FUNCTIONS,
    }


def relayout_input(
    t: torch.Tensor, position: int, size: tuple, stride: tuple, dtype: torch.dtype
) -> torch.Tensor:
    """An input whose shape/strides/dtype differ from the example the graph was built for:
    wrong shape or dtype raises; other strides are copied to the expected layout."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"compiled graph input {position}: expected a tensor, got {type(t)}")
    if tuple(t.shape) != size or t.dtype != dtype:
        raise CodegenError(
            f"compiled graph input {position} is {t.dtype}{list(t.shape)}, but the graph was "
            f"compiled for {dtype}{list(size)}; recompile for these inputs"
        )
    if t.device.type != "cpu":
        raise CodegenError(f"compiled graph input {position} is on {t.device}, expected cpu")
    if all(n <= 1 or a == b for n, a, b in zip(size, t.stride(), stride, strict=True)):
        return t
    return torch.empty_strided(size, stride, dtype=dtype).copy_(t)


def adopt_extern_output(
    t: torch.Tensor, size: tuple, stride: tuple, offset: int, dtype: torch.dtype
) -> torch.Tensor:
    """An extern kernel's result as the buffer: taken as is when it already has the
    buffer's layout, else copied into a fresh tensor that has it."""
    if (
        tuple(t.shape) == size
        and t.stride() == stride
        and t.storage_offset() == offset
        and t.dtype == dtype
    ):
        return t
    numel = (
        0 if 0 in size else offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True)) + 1
    )
    out = torch.empty(max(numel, 0), dtype=dtype).as_strided(size, stride, offset)
    return out.copy_(t)
