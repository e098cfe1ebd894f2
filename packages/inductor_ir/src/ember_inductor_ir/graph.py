"""GraphLowering: walk a prim-level FX graph and build loop-IR buffers and extern kernels.

``lower(gm, example_inputs)`` (stage.py) is the stage's entry point. Each call_function node
goes through the lowering registered for its prim; a prim with no lowering becomes a counted
fallback extern kernel that calls the prim itself. Choices that depend on the code generator
read its capability record (``self.target``, target.py).
"""

from __future__ import annotations

import logging
import operator
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
import torch.fx
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from ember_primops import get_prim

from .add_folds import Fold, find_folds
from .errors import LoweringError, ScalarReadUnsupported
from .extern import ExternKernel, ExternOutput, TensorArg
from .handlers.inner_cost import InnerLoopCostHandler
from .handlers.readwrite import ReadWriteHandler
from .indexing import index_vars, is_indirect, known_le, product, simplify_index
from .layout import (
    FixedLayout,
    FlexibleLayout,
    Layout,
    canonical_size,
    channels_last_strides,
    contiguous_layout,
    is_channels_last,
    layout_of_tensor,
    order_free,
    read_strides,
    size_expr,
    walk_format,
)
from .lowering import lowering_for, prim_name
from .lowering.accumulate import FOLD_LOWERINGS
from .lowering.scalar_reads import scalar_input
from .lowering.view_ops import broadcast_factor, reader_count
from .nodes import (
    Buffer,
    ComputedBuffer,
    ConstantBuffer,
    InputBuffer,
    IRNode,
    Pointwise,
    Reduction,
    TensorBox,
)
from .size_ops import RELATIONS, SIZE_OPS
from .target import Target
from .views import View, storage_view, unwrap

log = logging.getLogger("ember.ir")
#: a read's say in a 4-d/5-d result's layout, by how the result's loops walk it (_votes)
_WALK_VOTES = {"channels_last": 1, "contiguous": -1}


def _gathered(index: sympy.Expr) -> bool:
    """Whether a read's index goes through loaded values (ops.indirect_indexing's symbols):
    its walk over the gathered dims is unknown, so the buffer votes by its own layout (a
    max pool's backward gathers NHWC gradients at the windows around each point)."""
    return any(is_indirect(s) for s in index.free_symbols)


#: a pointwise value calling a costly libm function (handlers/readwrite.py: LIBM_HEAVY_OPS)
#: or gathering through an index (an indirect load) that a reader broadcasts at least this
#: many times over is stored once: a rotary embedding's cos and sin tables, [seq, dim], were
#: recomputed for every batch element and head of q and k (Llama at batch 8: 128 times; its
#: costliest kernel, 0.52 ms a step); Swin's relative-position bias, [heads, 49, 49]
#: gathered from its table, was gathered again (an index load, then the dependent table
#: load) for every one of the 4096 windows inside each attention softmax
HEAVY_BROADCAST_MIN = 4
#: whether a broadcast gather counts as heavy (off: only libm calls do; a bisect variant)
STORE_BROADCAST_GATHERS = True
#: a function of a reduction's results with a division or root in it, read broadcast this
#: many times over, is stored: it joins the reduction's kernel as an epilogue (computed once
#: per statistic, no launch of its own) instead of being recomputed for every element of its
#: reader (ResNet-50's batch-norm kernels in training: 50-106 SASS instructions an element,
#: issue-bound below the memory's rate). 0 turns the rule off (a bisect variant)
STATISTIC_BROADCAST_MIN = 64
#: a pointwise value that more than one reader reads is stored when it reads this many
#: whole buffers (of its own size, not broadcast): recomputed in each reader, a residual
#: stream's running sum (x + a + b + ...) kept every term alive until its last reader and
#: had each reader read them all (MLP-Mixer at fp32: five 77-MB terms live at once, its peak
#: 735 MB against torch.compile's 516)
MAX_SHARED_FULL_READS = 3
#: a pointwise value whose body would carry more graph nodes than this is stored: each
#: inlined node nests its reader's loader calls a few Python frames deeper (600 chained
#: multiplies, a loop over a ParameterList, overflowed the recursion limit in lowering)
MAX_INLINED_NODES = 100


@dataclass(frozen=True)
class OutputSpec:
    """How the wrapper produces one graph output: a strided view of a buffer's storage
    (``layout``), or a non-tensor ``constant``."""

    name: str | None
    layout: Layout | None
    constant: Any = None


Operation = ComputedBuffer | ExternKernel


class GraphLowering:
    """Buffers and operations lowered from one FX graph, in program order."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        example_inputs: Sequence[Any],
        *,
        target: Target,
    ) -> None:
        self.gm = gm
        #: the capabilities of the code generator lowered for (see stage.lower)
        self.target = target
        self.example_inputs = list(example_inputs)
        self.buffers: dict[str, Buffer] = {}
        self.operations: list[Operation] = []
        self.graph_inputs: list[str] = []
        self.graph_outputs: list[OutputSpec] = []
        self.constants: dict[str, torch.Tensor] = {}
        self.fallback_counts: Counter[str] = Counter()
        self.extern_counts: Counter[str] = Counter()
        self.current_node: torch.fx.Node | None = None
        self._names = Counter[str]()
        #: size symbols given as graph inputs (SymInt placeholders) -> input position
        self.size_inputs: dict[sympy.Symbol, int] = {}
        #: unbacked symbols read on the host from an input's element (lowering/scalar_reads)
        self.scalar_reads: dict[sympy.Symbol, Any] = {}
        #: host checks on read values (torch._check), in graph order
        self.scalar_asserts: list[Any] = []
        #: the env owning the size symbols (None for a static graph): hints, ranges, proofs
        self.shape_env: Any = None
        #: output buffer -> the graph input its value is written back to, where the memory
        #: plan may write it in place (scheduler/reuse.py); see donate()
        self.donations: dict[str, str] = {}
        #: float32 buffers stored as bfloat16/float16 (narrow_stores.py), when the target
        #: asks for it
        self.narrowed: list[Any] = []
        #: each node's value still inlined into its readers: how many graph nodes its body
        #: carries (0 once stored); see MAX_INLINED_NODES
        self._inlined_nodes: dict[torch.fx.Node, int] = {}

    def donate(self, input_writes: Sequence[tuple[int, int]]) -> None:
        """Offer the memory plan to write outputs into the inputs their values go back to:
        ``input_writes`` pairs (graph output index, placeholder position), the caller's
        promise that it copies that output into that input after the call. An output is
        offered when it is a computed buffer returned once, in its own layout."""
        inputs = {b.position: n for n, b in self.buffers.items() if isinstance(b, InputBuffer)}
        names = [spec.name for spec in self.graph_outputs]
        for k, position in input_writes:
            spec = self.graph_outputs[k] if 0 <= k < len(self.graph_outputs) else None
            donor = inputs.get(position)
            if spec is None or spec.name is None or donor is None or names.count(spec.name) != 1:
                continue
            buf = self.buffers.get(spec.name)
            if not isinstance(buf, ComputedBuffer) or spec.layout is None:
                continue
            own, shown = buf.layout, spec.layout
            if (list(own.size), list(own.stride), own.offset) == (
                list(shown.size), list(shown.stride), shown.offset
            ):  # fmt: skip
                self.donations[spec.name] = donor

    # -- naming and registration -------------------------------------------------------
    def new_name(self, prefix: str = "buf") -> str:
        name = f"{prefix}{self._names[prefix]}"
        self._names[prefix] += 1
        return name

    def origins(self) -> list[str]:
        return [self.current_node.name] if self.current_node is not None else []

    def realize(self, box: IRNode) -> Buffer | IRNode:
        """Give the computation behind ``box`` a buffer (no-op for buffers and views)."""
        node = unwrap(box)
        if isinstance(node, (Pointwise, Reduction)):
            layout = contiguous_layout(node.device, node.dtype, node.get_size())
            if self._follows_channels_last(node):
                layout.set_stride(channels_last_strides(layout.size))
            buffer = ComputedBuffer(self.new_name(), layout, data=node, origins=self.origins())
            self.buffers[buffer.name] = buffer
            self.operations.append(buffer)
            if isinstance(box, TensorBox):
                box.data = buffer
            return buffer
        return node

    def _reads_mostly_contiguous(self, buffer: ComputedBuffer) -> bool:
        """Whether a pointwise buffer's body reads more same-rank contiguous buffers than
        channels-last ones (see _votes)."""
        data = buffer.data
        return isinstance(data, Pointwise) and self._votes(data) < 0

    def _follows_channels_last(self, node: Pointwise | Reduction) -> bool:
        """A 4-d/5-d result whose body reads channels-last buffers (a convolution's output
        or something computed from one) more than contiguous ones is stored channels-last
        too: its kernel then runs channels innermost over both (see scheduler.loop_order)."""
        rank = len(node.get_size())
        if rank not in (4, 5) or node.get_size()[1] == 1:
            return False
        return self._votes(node) > 0

    def _votes(self, node: Pointwise | Reduction) -> int:
        """Buffers the body reads: +1 per channels-last one, -1 per contiguous, judged by
        the order in which the body's own loops walk them: a channels-last feature map read
        through a permute to NHWC (ConvNeXt's LayerNorm) is read contiguously. A buffer of
        another rank votes by that walk alone (ResNeSt's [B, 2, C, H, W] radix split of an
        NHWC map, summed over the radix: its channels step 1)."""
        rank = len(node.get_size())
        rw = ReadWriteHandler()
        index = index_vars("i", rank)
        if isinstance(node, Reduction):
            node.inner_fn(rw, index, index_vars("r", len(node.reduction_ranges)))
        else:
            node.inner_fn(rw, index)
        # a reshape's digits of an index that stays in range (ModularIndexing(56*i1 + i2, 56,
        # 56) is i1): simplified, Swin's [B, H, W, C] tokens read an NHWC map as they walk it
        ranges = dict(zip(index, node.get_size(), strict=True))
        first_reads: dict[str, sympy.Expr] = {}
        for name, expr in rw.reads:
            first_reads.setdefault(name, simplify_index(expr, ranges))
        votes = 0
        for name, expr in first_reads.items():
            layout = self.buffers[name].layout if name in self.buffers else None
            if layout is None:
                continue
            same_rank = len(layout.size) == rank
            if same_rank and (layout.size[1] == 1 or order_free(layout)):
                continue  # (1, C, 1, 1) statistics: no say in the order
            walked = read_strides(expr, index)
            if walked is not None and not _gathered(expr):  # by the order of the walk: a
                # concat's input has fewer channels than the loops
                votes += _WALK_VOTES.get(walk_format(node.get_size(), walked), 0)
            elif same_rank:
                votes += 1 if is_channels_last(layout) else -1 if layout.is_contiguous() else 0
        return votes

    def require_strides(self, value: IRNode, stride: Sequence[object]) -> IRNode:
        """``value`` stored with exactly ``stride`` (size-1 dims aside): an undecided buffer
        takes them, a buffer or view that has them is used as is, anything else is copied."""
        self.realize(value)
        node = unwrap(value)
        layout = node.layout if isinstance(node, ComputedBuffer) else None
        if isinstance(layout, FlexibleLayout) and not layout.frozen:
            if self._reads_mostly_contiguous(node) and not _same_order(layout.stride, stride):
                node.loop_order = list(range(len(stride)))  # loads in order, strided stores
            layout.set_stride(stride)
            return value
        want = FixedLayout(value.get_device(), value.get_dtype(), value.get_size(), stride)
        found = storage_view(value)
        if found is not None and _same_strides(found[1], want):
            return value
        return self._shared_copy(value, want)

    def _shared_copy(self, value: IRNode, layout: Layout | None = None) -> TensorBox:
        """A buffer holding ``value``, which its other readers then read too: two
        convolutions reading one computed view (a residual stream feeding a block's main
        path and its shortcut) each made a copy of their own, both alive at once."""
        copy = self.realize_copy(value, layout)
        if isinstance(value, TensorBox):
            value.data = copy
            return value
        return TensorBox(copy)

    def realize_copy(self, value: IRNode, layout: Layout | None = None) -> ComputedBuffer:
        """A fresh buffer holding ``value`` (e.g. a view that strides cannot express)."""
        loader = value.make_loader()
        body = Pointwise(value.get_device(), value.get_dtype(), loader, value.get_size())
        layout = layout or contiguous_layout(body.device, body.dtype, body.ranges)
        buffer = ComputedBuffer(self.new_name(), layout, data=body, origins=self.origins())
        self.buffers[buffer.name] = buffer
        self.operations.append(buffer)
        return buffer

    def tensor_arg(self, value: IRNode) -> TensorArg:
        """An extern-kernel argument for ``value``: its buffer or a strided view of one."""
        self.realize(value)
        self._realize_view_base(value)
        found = storage_view(value)
        if found is None:
            found = (buf := unwrap(self._shared_copy(value))), buf.layout
        buffer, layout = found
        if isinstance(buffer.layout, FlexibleLayout):
            buffer.layout.freeze()  # the extern kernel sees these exact strides
        return TensorArg(buffer.name, None if layout is buffer.layout else layout)

    def _realize_view_base(self, value: IRNode) -> None:
        """Realize the computation under a chain of strided views (a transpose, a reshape)
        so the extern kernel reads the view of its buffer instead of a copy that recomputes
        it in the view's order. Views that read fewer elements (slices) keep the copy."""
        node = value
        while isinstance(inner := unwrap(node), View) and inner.layout_map is not None:
            node = inner.base
        if not (isinstance(node, TensorBox) and isinstance(unwrap(node), Pointwise)):
            return
        base_numel, view_numel = product(node.get_size()), product(value.get_size())
        if known_le(base_numel, view_numel):  # proven for every size when symbolic
            self.realize(node)

    def extern(
        self,
        kernel: Callable[..., Any],
        args: Sequence[Any],
        kwargs: dict[str, Any] | None = None,
        *,
        fallback: bool = False,
        output_layouts: Callable[[int, Layout], Layout] | None = None,
        mutates: str | None = None,
        writes_out: bool = False,
    ) -> Any:
        """Create an extern kernel calling ``kernel`` and return its outputs as TensorBoxes
        shaped like the current node's ``meta['val']``. ``output_layouts(k, layout)`` may
        replace output ``k``'s layout (eager's strides by default) with the strides the
        kernel returns for the argument layouts chosen here; the wrapper copies a result
        that does not have them. ``mutates``, ``writes_out``: see ExternKernel."""
        assert self.current_node is not None

        def to_arg(x):
            return self.tensor_arg(x) if isinstance(x, IRNode) else x

        call_args, call_kwargs = tree_map(to_arg, (tuple(args), dict(kwargs or {})))
        kernel_name = (
            prim_name(kernel)
            if isinstance(kernel, torch._ops.OpOverload)
            else str(getattr(kernel, "__name__", kernel))
        )
        extern = ExternKernel(
            self.new_name("extern"),
            kernel,
            kernel_name,
            call_args,
            call_kwargs,
            fallback=fallback,
            mutates=mutates,
            writes_out=writes_out,
            origins=self.origins(),
        )
        leaves, spec = tree_flatten(self.current_node.meta.get("val"))
        outs: list[Any] = []
        for k, val in enumerate(leaves):
            if not isinstance(val, torch.Tensor):
                outs.append(val)
                continue
            self._refuse_data_sized(kernel_name, val)
            layout: Layout = layout_of_tensor(val)
            if output_layouts is not None:
                layout = output_layouts(k, layout)
            out = ExternOutput(self.new_name(), layout, index=k)
            self.buffers[out.name] = out
            extern.outputs.append(out)
            outs.append(TensorBox(out))
        self.operations.append(extern)
        counts = self.fallback_counts if fallback else self.extern_counts
        counts[kernel_name] += 1
        return tree_unflatten(outs, spec)

    def _refuse_data_sized(self, kernel_name: str, val: torch.Tensor) -> None:
        """An extern result whose size is a symbol of its data (nonzero's length): the
        wrapper binds symbols from the inputs and host reads only, not from a result, so
        kernels after it could not name it: a declared limitation (the graph runs eagerly)."""
        for size in (*val.shape, *val.stride()):
            node = getattr(size, "node", None)
            unbacked = getattr(getattr(node, "shape_env", None), "unbacked", ())
            free = getattr(getattr(node, "expr", None), "free_symbols", set())
            if {s for s in free if s in unbacked} - set(self.scalar_reads):
                raise ScalarReadUnsupported(
                    f"{kernel_name}: a result whose size depends on its data ({size})",
                    op=kernel_name,
                )

    # -- the walk ----------------------------------------------------------------------
    def run(self) -> GraphLowering:
        env: dict[torch.fx.Node, Any] = {}
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(self.example_inputs):
            raise LoweringError(
                f"graph has {len(placeholders)} inputs but {len(self.example_inputs)} "
                "example inputs were given"
            )
        position = 0
        folds = find_folds(self.gm.graph, matmuls=self.target.fold_matmul_epilogues)
        absorbed = {n for fold in folds.values() for n in fold.absorbed}
        for node in self.gm.graph.nodes:
            self.current_node = node
            if node in absorbed:
                continue  # lowered with the add that reads it (see add_folds)
            elif node in folds:
                env[node] = self._fold(node, folds[node], env)
            elif node.op == "placeholder":
                env[node] = self._input(node, self.example_inputs[position], position)
                position += 1
            elif node.op == "get_attr":
                env[node] = self._constant(node)
            elif node.op == "call_function":
                env[node] = self._call_node(node, env)
            elif node.op == "output":
                self._outputs(node.args[0], env)
            else:
                raise LoweringError(
                    f"node {node.name}: op {node.op!r} is not allowed in a prim-level graph "
                    "(expected placeholder, get_attr, call_function, output)"
                )
        self.current_node = None
        return self

    def _input(self, node: torch.fx.Node, example: Any, position: int) -> Any:
        val = node.meta.get("val")
        self._note_env(val)
        if isinstance(val, torch.SymInt):  # a size input: its symbol (the wrapper binds it)
            expr = size_expr(val)
            if isinstance(expr, sympy.Symbol):
                self.size_inputs.setdefault(expr, position)
            return expr
        if isinstance(val, torch.SymFloat):  # a float read on the host, saved for backward
            return scalar_input(self, val, position)
        if not isinstance(example, torch.Tensor):
            return example  # ints and other Python values pass through to lowerings
        if isinstance(val, torch.Tensor) and has_symbolic_layout(val):
            example = val  # the graph's own metadata: its symbolic sizes
        buffer = InputBuffer(self.new_name("arg"), layout_of_tensor(example), position=position)
        self.buffers[buffer.name] = buffer
        self.graph_inputs.append(buffer.name)
        return TensorBox(buffer)

    def _note_env(self, val: Any) -> None:
        """The ShapeEnv of symbolic example values (size hints, ranges), from their SymInts."""
        if self.shape_env is not None:
            return
        sizes = [val] if isinstance(val, torch.SymInt) else []
        if isinstance(val, torch.Tensor):
            sizes = [s for s in (*val.shape, *val.stride()) if isinstance(s, torch.SymInt)]
        for size in sizes:
            self.shape_env = getattr(size.node, "shape_env", None)
            if self.shape_env is not None:
                return

    def _constant(self, node: torch.fx.Node) -> Any:
        value = operator.attrgetter(str(node.target))(self.gm)
        if not isinstance(value, torch.Tensor):
            return value
        buffer = ConstantBuffer(self.new_name("const"), layout_of_tensor(value), value=value)
        self.buffers[buffer.name] = buffer
        self.constants[buffer.name] = value
        return TensorBox(buffer)

    def _call(self, node: torch.fx.Node, args: tuple, kwargs: dict) -> Any:
        if node.target is operator.getitem:
            return args[0][args[1]]
        relation = RELATIONS.get(node.target)
        if relation is not None:  # a condition: kept as written (a host check tests it)
            return relation(*args)
        size_op = SIZE_OPS.get(node.target)
        if size_op is not None:  # size arithmetic: an int, or an expression over symbols
            return canonical_size(size_op(*args), self.shape_env)
        lowering = lowering_for(node.target)
        if lowering is not None and _touches_complex(node):
            # The loop IR has no complex types (no code generator emits them): such prims
            # run through their reference implementation, counted as fallbacks.
            log.info("complex values at node %s (%s): fallback kernel", node.name, node.target)
            return self.extern(node.target, args, kwargs, fallback=True)
        if lowering is None:
            if not isinstance(node.target, torch._ops.OpOverload):
                raise LoweringError(
                    f"node {node.name} calls {node.target!r}, which is not an op; lower only "
                    "functional prim-level graphs (run the decompositions first)"
                )
            if _is_library_prim(node.target):
                return self.extern(node.target, args, kwargs)
            log.info("no lowering for %s (node %s): fallback kernel", node.target, node.name)
            return self.extern(node.target, args, kwargs, fallback=True)
        try:
            result = lowering(self, *args, **kwargs)
        except LoweringError:
            raise
        except Exception as exc:
            raise LoweringError(
                f"lowering {prim_name(node.target)} at node {node.name} failed: {exc}"
            ) from exc
        self._check_against_meta(node, result)
        self._maybe_realize(node, result)
        return result

    def _call_node(self, node: torch.fx.Node, env: dict) -> Any:
        self.current_node = node
        args, kwargs = tree_map(
            lambda a: env[a] if isinstance(a, torch.fx.Node) else a, (node.args, node.kwargs)
        )
        return self._call(node, args, kwargs)

    def _fold(self, add: torch.fx.Node, fold: Fold, env: dict) -> Any:
        """An add performed by an accumulating kernel (add_folds), or as written when the
        fold's lowering declines."""
        result = FOLD_LOWERINGS[fold.kind](self, add, fold, env)
        if result is None:
            for node in fold.absorbed:
                env[node] = self._call_node(node, env)
            return self._call_node(add, env)
        self._check_against_meta(add, result)
        return result

    def _check_against_meta(self, node: torch.fx.Node, result: Any) -> None:
        """Every lowering must agree with the prim's meta function on shape and dtype."""
        expected = node.meta.get("val")
        got_leaves = _leaves(result)
        want_leaves = [expected] if isinstance(expected, torch.Tensor) else _leaves(expected)
        if expected is None or len(got_leaves) != len(want_leaves):
            return
        for got, want in zip(got_leaves, want_leaves, strict=False):
            if isinstance(got, IRNode) and isinstance(want, torch.Tensor):
                env = self.shape_env
                size = [sympy.expand(canonical_size(s, env)) for s in got.get_size()]
                wanted = [sympy.expand(canonical_size(size_expr(s), env)) for s in want.shape]
                if size != wanted or got.get_dtype() != want.dtype:
                    raise LoweringError(
                        f"lowering of {node.target} at node {node.name} built "
                        f"{got.get_dtype()}{size}, but the prim's meta says "
                        f"{want.dtype}{list(want.shape)}"
                    )

    def _maybe_realize(self, node: torch.fx.Node, result: Any) -> None:
        self._decide_storage(node, result)
        carried = sum(self._inlined_nodes.get(a, 0) for a in node.all_input_nodes)
        inlined = 0
        for box in _leaves(result):
            data = unwrap(box)
            if isinstance(data, Pointwise) and carried + 1 > MAX_INLINED_NODES:
                self.realize(box)  # its readers would nest its loaders this deep
            elif isinstance(data, Pointwise):
                inlined = max(inlined, carried + 1)
            elif isinstance(data, View):
                inlined = max(inlined, carried)
        self._inlined_nodes[node] = inlined

    def _decide_storage(self, node: torch.fx.Node, result: Any) -> None:
        for box in _leaves(result):
            if not isinstance(box, TensorBox):
                continue
            data = box.data
            if isinstance(data, Reduction):
                self.realize(box)
            elif isinstance(data, Pointwise) and not _reshaped_alone(node):
                cost = recompute_cost(data, self.target.transcendental_op_cost)
                shared = reader_count(node) > 1 and (
                    cost > self.target.inline_op_limit
                    or self._full_reads(data) >= MAX_SHARED_FULL_READS
                )
                if (
                    shared
                    or (broadcast_factor(node) >= HEAVY_BROADCAST_MIN and _costly_per_copy(data))
                    or self._statistic_epilogue(node, data)
                ):
                    self.realize(box)
            elif (
                not _reshaped_alone(node)
                and _reshapes_a_computation(node, data)
                and reader_count(node) > 1
            ):
                # the value its readers share, stored in their shape: a channel shuffle's
                # [N, C/g, g, H, W] clone is stored as the [N, C, H, W] map the next
                # convolution reads, in the layout the vote gives that map
                shaped = Pointwise(data.get_device(), data.get_dtype(), data.make_loader(),
                                   data.get_size())  # fmt: skip
                cost = recompute_cost(shaped, self.target.transcendental_op_cost)
                if cost > self.target.inline_op_limit:
                    box.data = shaped
                    self._in_base_order(self.realize(box), data)

    def _statistic_epilogue(self, node: torch.fx.Node, data: Pointwise) -> bool:
        """Whether ``data`` is a division or root of a reduction's results that its readers
        broadcast STATISTIC_BROADCAST_MIN times or more (a batch norm's rstd, its backward's
        per-channel means): stored, it is computed in the reduction's kernel once per
        statistic. Values of other buffers alone (parameters) stay inline: stored, they
        would cost a launch of their own."""
        if (
            not STATISTIC_BROADCAST_MIN
            or broadcast_factor(node, through_broadcasts=True) < STATISTIC_BROADCAST_MIN
        ):
            return False
        counter = ReadWriteHandler()
        data.inner_fn(counter, index_vars("i", len(data.ranges)))
        if not counter.divide_count:
            return False
        for name, _ in counter.reads:
            buffer = self.buffers.get(name)
            if isinstance(buffer, ComputedBuffer) and isinstance(buffer.data, Reduction):
                return True
        return False

    def _full_reads(self, data: Pointwise) -> int:
        """The buffers ``data`` reads whole: at least as many elements as it has (not a
        broadcast bias or scale; a matmul's result padded for alignment, read through a
        slice, counts: MLP-Mixer's bf16 token-mixing outputs [N*C, 200] read as 196 tokens)."""
        counter = ReadWriteHandler()
        data.inner_fn(counter, index_vars("i", len(data.ranges)))
        numel = product(data.get_size())
        full = set()
        for name, _ in counter.reads:
            buffer = self.buffers.get(name)
            if buffer is not None and known_le(numel, product(buffer.get_size())):
                full.add(name)
        return len(full)

    def _in_base_order(self, buffer: Buffer | IRNode, view: View) -> None:
        """A reshaped computation stored in the memory order its unreshaped value would
        have had, where a view expresses it: ResNeSt's radix split of a convolution's
        output, [B, 2C, H, W] channels-last read as [B, 2, C, H, W], stored NHWC-split
        rather than contiguous (its readers then read along the channels, not 4096 apart)."""
        chain: list[View] = []
        inner: IRNode = view
        while isinstance(inner, View) and inner.layout_map is not None:
            chain.append(inner)
            inner = unwrap(inner.base)
        if not (
            isinstance(buffer, ComputedBuffer)
            and isinstance(buffer.layout, FlexibleLayout)
            and isinstance(inner, Pointwise)
            and self._follows_channels_last(inner)
        ):
            return
        size = inner.get_size()
        layout: Layout | None = FixedLayout(
            inner.get_device(), inner.get_dtype(), size, channels_last_strides(size)
        )
        for step in reversed(chain):
            layout = step.layout_map(layout) if layout is not None else None
        if layout is not None:
            buffer.layout.set_stride(layout.stride)

    def _outputs(self, outputs: Any, env: dict[torch.fx.Node, Any]) -> None:
        for item in tree_flatten(outputs)[0]:
            value = env[item] if isinstance(item, torch.fx.Node) else item
            val = item.meta.get("val") if isinstance(item, torch.fx.Node) else None
            if not isinstance(value, IRNode):
                self.graph_outputs.append(OutputSpec(None, None, constant=value))
                continue
            self.current_node = item if isinstance(item, torch.fx.Node) else None
            self.graph_outputs.append(self._output_spec(value, val))

    def _output_spec(self, value: IRNode, val: Any) -> OutputSpec:
        want = layout_of_tensor(val) if isinstance(val, torch.Tensor) else None
        node = unwrap(value)
        if isinstance(node, Pointwise):
            # Earlier readers may hold this box and load it inline: realizing the box itself
            # would make them load a buffer written after them. A fresh box leaves them as
            # they are (the pointwise is recomputed there, or fused with this output).
            value = TensorBox(node)
        if isinstance(node, (Pointwise, Reduction)):
            self.realize(value)
            node = unwrap(value)
        if isinstance(node, ComputedBuffer) and isinstance(node.layout, FlexibleLayout):
            if want is not None and not node.layout.frozen:
                node.layout.set_stride(want.stride)
            node.layout.freeze()
        found = storage_view(value)
        if found is not None and (want is None or _same_strides(found[1], want)):
            return OutputSpec(found[0].name, _with_unit_strides(found[1], want))
        # A view strides cannot express, or strides that differ from eager's: copy.
        layout = FixedLayout(
            value.get_device(),
            value.get_dtype(),
            value.get_size(),
            want.stride
            if want is not None
            else contiguous_layout(value.get_device(), value.get_dtype(), value.get_size()).stride,
        )
        buffer = self.realize_copy(value, layout)
        return OutputSpec(buffer.name, buffer.layout)


def _same_order(a: Sequence[object], b: Sequence[object]) -> bool:
    """Whether two static stride lists order the dims alike (symbolic ones: assumed so)."""
    try:
        return sorted(range(len(a)), key=lambda d: -int(a[d])) == sorted(
            range(len(b)), key=lambda d: -int(b[d])
        )
    except TypeError:
        return True


def _leaves(value: Any) -> list[Any]:
    """``tree_flatten(value)[0]``, without pytree's walk for the common single IR node (a
    lowering's result; an IR node is a pytree leaf)."""
    return [value] if isinstance(value, IRNode) else tree_flatten(value)[0]


#: index maps that only reshape (merge or split dims): a value read through one of them
#: alone is stored in the reshaped form (its readers' shape), not its own
RESHAPING_VIEWS = frozenset({"collapse_view", "collapse", "split_dim", "reshape"})


def _is_reshape(node: torch.fx.Node) -> bool:
    return isinstance(node.target, torch._ops.OpOverload) and (
        prim_name(node.target) in RESHAPING_VIEWS
    )


def _reshaped_alone(node: torch.fx.Node) -> bool:
    """Whether ``node``'s value is read only through one reshape (stored there if at all)."""
    return len(node.users) == 1 and _is_reshape(next(iter(node.users)))


def _reshapes_a_computation(node: torch.fx.Node, data: object) -> bool:
    """Whether ``node`` (the last of a chain of reshapes) reshapes a pointwise value that
    was left for it to store."""
    if not (_is_reshape(node) and isinstance(data, View)):
        return False
    base = node.args[0] if node.args else None
    inner = data
    while isinstance(inner, View):
        inner = unwrap(inner.base)
    return (
        isinstance(base, torch.fx.Node) and _reshaped_alone(base) and isinstance(inner, Pointwise)
    )


def _costly_per_copy(data: Pointwise) -> bool:
    """Whether each broadcast copy of ``data`` recomputed in its reader would pay a libm
    call or a gather (STORE_BROADCAST_GATHERS)."""
    counter = ReadWriteHandler()
    data.inner_fn(counter, index_vars("i", len(data.ranges)))
    return counter.heavy_count > 0 or (STORE_BROADCAST_GATHERS and counter.indirect_count > 0)


def recompute_cost(data: Pointwise, transcendental_cost: int = 1) -> int:
    """What a reader pays per element to recompute ``data``: the ops that run for each step
    of the innermost loop (handlers/inner_cost.py; loop-invariant ops are hoisted), a
    transcendental op counting ``transcendental_cost`` (Target.transcendental_op_cost)."""
    index = index_vars("i", len(data.ranges))
    moving = [v for v, n in zip(index, data.ranges, strict=True) if n != 1]
    counter = InnerLoopCostHandler(moving[-1]) if moving else ReadWriteHandler()
    data.inner_fn(counter, index)
    return counter.op_count + (transcendental_cost - 1) * counter.transcendental_count


def _is_library_prim(op: object) -> bool:
    """Prims of ember_primops' ``extern`` category go to a library by design."""
    try:
        return get_prim(op).category == "extern"
    except KeyError:
        return False


def _touches_complex(node: torch.fx.Node) -> bool:
    values = [node.meta.get("val")]
    values += [a.meta.get("val") for a in node.all_input_nodes]
    return any(isinstance(v, torch.Tensor) and v.dtype.is_complex for v in tree_flatten(values)[0])


def _same_strides(got: Layout, want: Layout) -> bool:
    """Equal sizes and strides (size-1 dims aside), proven: symbolic ones must be the same
    expression (different expressions count as different, which only costs a copy)."""
    if [sympy.expand(s) for s in got.size] != [sympy.expand(s) for s in want.size]:
        return False
    return all(
        n == 1 or sympy.expand(sympy.sympify(a) - b) == 0
        for a, b, n in zip(got.stride, want.stride, got.size, strict=False)
    )


def _with_unit_strides(layout: Layout, want: Layout | None) -> Layout:
    """``layout``, its size-1 dims given ``want``'s strides (the same memory; a channels-last
    [8, 8, 1, 1] weight gradient then reads (8, 1, 1, 1) as eager's does, not (8, 1, 8, 8))."""
    if want is None or list(layout.stride) == list(want.stride):
        return layout
    return FixedLayout(layout.device, layout.dtype, layout.size, want.stride, layout.offset)


def has_symbolic_layout(t: torch.Tensor) -> bool:
    return any(isinstance(s, torch.SymInt) for s in (*t.shape, *t.stride()))


__all__ = ["GraphLowering", "OutputSpec", "View", "has_symbolic_layout", "recompute_cost"]
