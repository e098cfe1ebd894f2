"""The generated Python wrapper, target-neutral part: guards inputs, allocates buffers per
the memory plan, calls the extern ops, frees dead buffers, returns the outputs. A target's
builder (cpp/emit/wrapper.py, triton/wrapper.py) subclasses it and says what a loops group
turns into (``_loops``) and how fresh storage is obtained and given back.

Every buffer variable in the wrapper is a tensor of its buffer's dtype whose data pointer is
the buffer's start (its storage offset is the buffer's); kernels receive its address and
index relative to it. Its sizes and strides are the ones the wrapper knows statically
(``held``): the buffer's own, or the view that extern calls and outputs take of it most
often, so that a view costing ~1 us per call is made once at allocation, or not at all
when a dead buffer's storage is taken over. Non-literal objects (kernels, extern
callables, dtypes, constants) live in the wrapper's namespace under generated names, so
the source stays printable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ember_inductor_ir import Schedule
from ember_inductor_ir.extern import ExternKernel, TensorArg
from ember_inductor_ir.layout import Layout
from ember_primops import is_prim

from .held_layouts import Triple, extent, is_contiguous, preferred_layouts, triple
from .library_calls import BINDING_CALLS, FRESH_RESULTS, OUT_VARIANTS, library_call
from .size_bindings import concrete, is_symbolic
from .writer import WrapperCode, Writer


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


class WrapperBuilder:
    """``trusted_inputs``: the caller guarantees that every call's inputs have the sizes
    and dtypes of the graph's example inputs (the backend contract, where guards checked
    them already), so the wrapper checks only their strides (one C call an input).

    ``kernels``: group name -> what the target emitted for the group (read by ``_loops``)."""

    def __init__(
        self, sched: Schedule, kernels: dict[str, Any], *, trusted_inputs: bool = False
    ) -> None:
        self.sched = sched
        self.kernels = kernels
        self.trusted_inputs = trusted_inputs
        self.w = Writer()
        self.live: set[str] = set()  # buffer variables holding a tensor right now
        #: the layout of the tensor each buffer variable holds (see the module docstring)
        self.held: dict[str, Triple] = {}
        #: variables whose storage offset is only known at run time (inputs, constants)
        self.dynamic_offset: set[str] = set(sched.graph_inputs) | set(sched.constants)
        self.preferred = preferred_layouts(sched)
        later_reuse = [
            a.reuses for a in sched.allocations.values() if a.reuses is not None and not a.in_place
        ]
        self.reused = set(later_reuse)
        #: (input, view expression) -> the local holding it (see _cached_view)
        self.cached_views: dict[tuple[str, str], str] = {}

    # -- hooks of a target ---------------------------------------------------------------
    def _loops(self, group_name: str) -> None:
        """The lines of a loops group: the target's kernel launches."""
        raise NotImplementedError

    def _flush_launches(self) -> None:
        """Launches a target defers (the C++ target's runs of kernels) are written here:
        before each extern call and at the end."""

    def _allocate_new(self, name: str, layout: Layout, want: Triple, dtype: str) -> None:
        """``name = `` a tensor of fresh storage held in layout ``want``."""
        self.w.line(f"{name} = {self._fresh(layout, want, dtype)}")

    def _took_over(self, name: str, donor: str) -> None:
        """``name`` took over the storage of the dead ``donor`` (the target's bookkeeping
        of where that storage goes back to)."""

    def _free_emitter(self) -> Callable[[str], None]:
        """Where the lines freeing a group's dead buffers go."""
        return self.w.line

    def _finish_lines(self, lines: list[str]) -> list[str]:
        """The body's lines once all are written (a target may rewrite sites it decided
        about later)."""
        return lines

    def _call_defaults(self) -> str:
        """Default arguments of ``call`` (per-wrapper state: cached views)."""
        if not self.cached_views:
            return ""
        n = len(self.cached_views)
        return f", _views=[((lambda: None), -1, None)] * {n}, _ref=__import__('weakref').ref"

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
        if plan is not None and plan.in_place and donor in self.dynamic_offset:
            # the graph input this output is written back to, which its own kernel reads
            # last: the output is that tensor itself (the caller then skips the copy)
            w.line(f"{name} = {donor}")
            self.live.add(name)
            self.held[name] = self.held[donor]
            self.dynamic_offset.add(name)
            return
        if donor is not None and donor in self.live:
            # a dead buffer's storage, or (in place) the storage of a buffer this buffer's
            # own kernel reads last: its variable goes with the group's frees
            held = self.held[donor]  # same dtype and storage size (the memory plan's rule)
            dead = "" if plan.in_place else f"; del {donor}"
            if held == want or (name not in self.preferred and held[2] == own[2]):
                w.line(f"{name} = {donor}{dead}")
                want = held
            else:
                w.line(f"{name} = _as_strided({donor}, {want[0]}, {want[1]}, {want[2]}){dead}")
            if not plan.in_place:
                self.live.discard(donor)
        else:
            self._allocate_new(name, layout, want, dtype)
        if donor is not None:
            self._took_over(name, donor)
        self.live.add(name)
        self.held[name] = want

    def _fresh(self, layout: Layout, want: Triple, dtype: str) -> str:
        """The expression of a fresh tensor for ``layout``, held in layout ``want``."""
        if want[2] == 0 and extent(want) == extent(triple(layout)):
            return f"_empty_strided({want[0]}, {want[1]}, dtype={dtype})"
        storage = concrete(layout.storage_numel())
        return f"_as_strided(_empty({storage}, dtype={dtype}), {want[0]}, {want[1]}, {want[2]})"

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
            # The input held weakly and the view made of a detached alias (a view's base
            # would hold the input): when the input dies the view goes too. A view keeps its
            # storage: an input of one call only (a gradient, a saved activation) would
            # otherwise stay allocated until the next call.
            drop = f"lambda r: _views[{k}][0] is r and _views.__setitem__({k}, (r, -1, None))"
            view = f"(lambda {name}: {expr})({name}.detach())"
            w.line(f"_c = _views[{k}]")
            w.line(f"if _c[0]() is not {name} or _c[1] != {name}.data_ptr():")
            w.line(f"    _c = _views[{k}] = (_ref({name}, {drop}), {name}.data_ptr(), {view})")
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

    def _extern(self, extern: ExternKernel, dead: set[str] = frozenset()) -> None:
        w = self.w
        if extern.writes_out and not extern.fallback:
            self._extern_out(extern)
            return
        render = self._render_arg
        args = [render(a) for a in extern.args]
        args += [f"{k}={render(v)}" for k, v in extern.kwargs.items()]
        called = library_call(extern)
        binding = (
            None if extern.fallback or extern.kwargs else BINDING_CALLS.get(extern.kernel_name)
        )
        if binding is not None:
            fn = binding  # torch's binding (library_calls.BINDING_CALLS)
        elif is_prim(called):
            fn = f"_prim_impl[{w.const(called, 'extern')}]"  # see _PrimImplementations
        else:
            fn = w.const(called, "extern")
            if isinstance(called, torch._ops.OpOverload):
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
        # the call's result dies with its buffers: held under `_r`, it would live on through
        # the next library call, which allocates before the name is rebound (a peak the
        # plan does not see: poolformer's stem result beside its first MLP's hidden)
        w.line("del _r")

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
        self._out_call(extern, OUT_VARIANTS[extern.kernel_name])

    def _out_call(self, extern: ExternKernel, fn: str) -> None:
        """``fn(*args, out=buffer)``: the planned buffer allocated, then written."""
        (out,) = extern.outputs
        self._allocate(out.name)
        args = [self._render_arg(a) for a in extern.args]
        target = self._strided_view(out.name, self.sched.layout(out.name))
        self.w.line(f"{fn}({', '.join(args)}, out={target})")

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
        emit = self._free_emitter()
        for name in self.sched.frees.get(group_name, []):
            if name in self.live and name not in self.reused:
                self._release(name, emit)

    def _release(self, name: str, emit: Callable[[str], None]) -> None:
        """``name`` is dead: the variable gone (a target gives its storage back first)."""
        emit(f"del {name}")
        self.live.discard(name)

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
        if self.sched.releases_inputs:  # the caller's list: each input dies at its last use
            w.line("args.clear()")
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
        lines = self._finish_lines(list(w.lines))
        source = (
            f"def call(args{self._call_defaults()}):\n"
            + "\n".join([*self._prologue(), *lines])
            + "\n"
        )
        return WrapperCode(source, w.namespace, [g.name for g in self.sched if g.extern is None])
