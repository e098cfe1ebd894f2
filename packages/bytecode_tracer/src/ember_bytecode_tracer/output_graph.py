"""OutputGraph: the FX graph a trace builds, its inputs (by source), guards and side effects.

Each tensor the trace reads from the frame becomes a placeholder whose `source` says how to
load it again at run time; each tensor operation becomes a node whose
`meta["example_value"]` is a fake tensor computed by running the op under FakeTensorMode.
When the trace ends (return or graph break) `compile_subgraph` hands the graph to the
backend (`backend(gm, example_inputs) -> callable`, the Dynamo convention).
"""

from __future__ import annotations

import itertools
import keyword
import operator
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy
import torch
import torch.fx
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_leaves, tree_map

import ember_frame_hook as fh
import ember_symbolic as es
from ember_bytecode_tracer.autocast_state import AutocastState
from ember_bytecode_tracer.dynamic import STATIC_POLICY, DynamicPolicy
from ember_bytecode_tracer.eager_checks import refuse_as_eager
from ember_bytecode_tracer.example_rules import dispatch_context, rule_for
from ember_bytecode_tracer.exc import (
    BackendCompilerFailed,
    ExampleRuntimeError,
    Unsupported,
    UserSetupError,
)
from ember_bytecode_tracer.guards import Guard, GuardKind, LocalSource
from ember_bytecode_tracer.keyword_args import (
    keywords_by_position,
    needs_positions,
    scalar_types_as_dtypes,
)
from ember_bytecode_tracer.leaf_creation import leaf_creation_reason, new_leaf_reason
from ember_bytecode_tracer.rng_effects import RandomOpDetector, RngPlan
from ember_bytecode_tracer.saved_hooks import DISABLE_SWITCHES, disabled_message
from ember_bytecode_tracer.state_switches import (
    SWITCHES,
    TracedContextVars,
    changed_since,
    snapshot,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from ember_bytecode_tracer.guards import Guard, Source

_graph_ids = itertools.count()
# A NumPy scalar the program passes to an op stays one (eager passes it as it is); the graph's
# code writes it by its repr, `np.int64(16)`, so the name `np` is known there.
torch.fx.graph._register_custom_builtin("np", "import numpy as np", numpy)


@dataclass
class GraphInput:
    source: Source
    value: Any  # the real tensor (or int, for a SymInt input) of this call: the example input
    node: torch.fx.Node


@dataclass
class SideEffects:
    """Mutations of pre-existing Python objects, replayed after the graph runs."""

    # source of a list/dict that existed before the frame -> its final tracker
    containers: dict[Source, Any] = field(default_factory=dict)
    # (source of object, attribute name) -> tracker of the new value
    attributes: dict[tuple[Source, str], Any] = field(default_factory=dict)
    # the attribute writes above made with object.__setattr__ (past the class's own
    # __setattr__, which eager does not run again): replayed the same way
    generic_attributes: set[tuple[Source, str]] = field(default_factory=set)
    # global name -> tracker of the new value
    global_writes: dict[str, Any] = field(default_factory=dict)
    # calls made after the graph, in order (variables/logging_calls.py: logging)
    calls: list[Any] = field(default_factory=list)
    # id(example) of a tensor the graph made -> (example, {attribute: tracker}), set on the
    # graph's output carrying it (variables/tensor_state.py)
    tensor_attributes: dict[int, tuple[Any, dict[str, Any]]] = field(default_factory=dict)
    # (source of a parameter, "grad") written None (an optimizer's zero_grad) before any graph
    # op, the old gradient never read: written before the graph runs too, as eager drops the
    # old gradients before its forward (not after it, which holds them through the forward)
    released_early: set[tuple[Source, str]] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(
            self.containers
            or self.attributes
            or self.global_writes
            or self.calls
            or self.tensor_attributes
        )


class OutputGraph:
    def __init__(
        self,
        *,
        f_globals: dict[str, Any],
        code_name: str,
        dynamic: DynamicPolicy | None = None,
        code: Any = None,
    ) -> None:
        self.graph = torch.fx.Graph()
        self.f_globals = f_globals
        self.code_name = code_name
        self.where_tx: Any = None  # the translator running the current instruction
        # Set while the backend compiles: guards its own tracing adds name the backend
        self.backend_where: str | None = None
        # One ShapeEnv per trace (its guards name the user's line) and a fake mode over it.
        self.dynamic = (dynamic or STATIC_POLICY).begin(code, self.user_location)
        self.dynamic.output = self
        self.fake_mode = self.dynamic.fake_mode
        self.inputs: list[GraphInput] = []
        self._input_by_source: dict[Source, GraphInput] = {}
        self._input_by_id: dict[int, GraphInput] = {}
        self.guards: list[Guard] = []
        # the user's guard_filter_fn (guards/filter.py), applied when the guards are compiled
        self.guard_filter: Any = None
        self.side_effects = SideEffects()
        self.op_count = 0  # call nodes in the current graph
        self.compiled_graphs: list[CompiledSubgraph] = []
        self._fake_cache: dict[int, torch.Tensor] = {}
        self.wrapped: dict[Source, Any] = {}  # trackers of values read through a source
        self.real_values: dict[int, tuple[Any, Any]] = {}  # by id(tracker): (tracker, value)
        # Grad mode when the frame started (made before the trace switches it): guarded.
        self.entry_grad_mode = torch.is_grad_enabled()
        self.entry_hooks_message = disabled_message()  # disable_saved_tensors_hooks'
        self.state_queries: set[Source] = set()  # global-state queries guarded so far
        self.entry_autocast = AutocastState.now()  # likewise for the ambient autocast state
        self.entry_switched_state = snapshot()  # SDPA flags, default dtype (state_switches.py)
        self.context_vars = TracedContextVars()  # ContextVar sets in the trace (likewise)
        # Mutable containers (lists, dicts) read so far, by id: one tracker per object, so a
        # list reached two ways (an argument and a closure cell) sees its own mutations.
        self.containers_by_id: dict[int, tuple[Any, Any]] = {}
        # Modules and plain objects read so far: (object, first source), by id (for
        # attribute writes; variables/object_identity.py).
        self.objects_by_id: dict[int, tuple[Any, Source]] = {}
        self.in_user_try = False  # set by the translator for the current instruction
        self.rng = RngPlan()  # the default generator's state through the trace
        # Open `with` blocks that must not contain graph ops (dispatch-disabling guards).
        self.graph_free_contexts: list[str] = []
        # Open `with warnings.catch_warnings()` blocks: no warning is deferred inside one
        # (variables/warning_calls.py).
        self.warnings_blocks: list[Any] = []
        # Bool outputs the runner checks right after the graph (variables/validation_checks.py).
        self.runtime_checks: list[Any] = []
        self.check_appliers: list[Callable] = []  # set with the runner's recipes
        # Calls the runner makes before the graph, each result an input read from L under
        # its name (NumPy's random draws, variables/numpy_random.py).
        self.draws: list[tuple[str, Callable[[], torch.Tensor]]] = []
        # id(example) -> (example, node, frame instruction, user location) of autograd
        # leaves made in the graph by requires_grad_() (variables/graph_leaves.py)
        self.graph_leaves: dict[int, tuple[torch.Tensor, torch.fx.Node, int, str]] = {}
        # nn.Parameter aliases made in the graph, which must not leave it (graph_leaves.py)
        self.made_parameters: dict[int, tuple[torch.Tensor, int, str]] = {}
        # storages that a `t.data` read of the trace aliases (variables/tensor.py)
        self.data_aliases: set[StorageWeakRef] = set()
        # storages of read-only NumPy arrays read by the trace (variables/numpy_arrays.py)
        self.read_only: set[StorageWeakRef] = set()
        # subgraphs of control-flow operators (variables/control_flow.py), by attribute name:
        # the graph reads them with get_attr nodes
        self.subgraphs: dict[str, torch.fx.GraphModule] = {}
        # id(code) -> the code's decoded instructions, shared by the translators of every
        # inlined call of it in this trace (translator/core.py `decoded`)
        self.decoded_code: dict[int, Any] = {}
        # (file, line, function) of each frame of an inlining stack -> its text (stack_trace)
        self.stack_texts: dict[tuple, str] = {}

    def user_location(self) -> str:
        if self.backend_where is not None:
            return self.backend_where
        tx = self.where_tx
        return tx.location() if tx is not None else ""

    def effects_snapshot(self) -> tuple[int, ...]:
        """Counts that change when the trace adds graph ops or Python side effects."""
        effects = self.side_effects
        return (
            len(self.graph.nodes),
            len(effects.containers),
            len(effects.attributes),
            len(effects.global_writes),
            sum(len(attrs) for _, attrs in effects.tensor_attributes.values()),
        )

    # ---- guards ------------------------------------------------------------------
    def add_guard(self, guard: Guard) -> None:
        self.guards.append(guard)

    # ---- inputs ------------------------------------------------------------------
    def tensor_input(
        self, source: Source, value: torch.Tensor
    ) -> tuple[torch.fx.Node, torch.Tensor]:
        """The placeholder for the real tensor `value` found at `source` (deduplicated)."""

        known = self._input_by_source.get(source)
        if known is not None:
            return known.node, known.node.meta["example_value"]
        alias = self._input_by_id.get(id(value))
        if alias is not None and alias.value is value:
            # The same tensor reached two ways: one placeholder, and a guard that it stays so.
            self.add_guard(Guard(source, GuardKind.TENSOR_ALIASING, alias.source))
            self._input_by_source[source] = alias
            return alias.node, alias.node.meta["example_value"]
        fake = self.to_fake(value, source)
        graph_input = self._new_input(source, value, fake)
        self._input_by_id[id(value)] = graph_input
        return graph_input.node, fake

    def sym_input(self, source: Source, value: int, example: torch.SymInt) -> torch.fx.Node:
        """A SymInt placeholder for the Python int `value` read at `source` (the backend
        gets the real int as its example input)."""
        known = self._input_by_source.get(source)
        if known is not None:
            return known.node
        return self._new_input(source, value, example).node

    def drawn_input(
        self, draw: Callable[[], torch.Tensor], example: torch.Tensor
    ) -> tuple[torch.fx.Node, torch.Tensor]:
        """A placeholder for a tensor the runner makes by calling `draw()` right before the
        graph (in the order of these calls); `example` is one such tensor. Static sizes, no
        guard: the frame's locals do not hold it (the runner adds it under its name)."""
        name = f"__ember_draw_{len(self.draws)}"
        self.draws.append((name, draw))
        fake = self.to_fake(example)
        return self._new_input(LocalSource(name), example, fake).node, fake

    def is_drawn(self, source: Source) -> bool:
        """Whether a graph input is one the runner makes (a fresh object each call)."""
        return isinstance(source, LocalSource) and any(source.name == n for n, _ in self.draws)

    def input_node(self, source: Source) -> torch.fx.Node | None:
        known = self._input_by_source.get(source)
        return known.node if known is not None else None

    def _new_input(self, source: Source, value: Any, example: Any) -> GraphInput:
        name = _placeholder_name(source, {str(i.node.target) for i in self.inputs})
        first_op = self._first_non_placeholder()
        if first_op is None:
            node = self.graph.placeholder(name)  # appended: keeps inputs in order
        else:
            with self.graph.inserting_before(first_op):
                node = self.graph.placeholder(name)
        node.meta["example_value"] = example
        node.meta["source"] = source
        graph_input = GraphInput(source, value, node)
        self.inputs.append(graph_input)
        self._input_by_source[source] = graph_input
        return graph_input

    def add_read_only(self, example: torch.Tensor) -> None:
        """A read-only NumPy array's copy is an input (variables/numpy_arrays.py): no write
        may reach it (eager raises) nor any input whose memory it may share (the copy, read
        at the graph's start, would not see it), before or after."""
        if any(is_mutating(node) for node in self.graph.nodes):
            raise Unsupported(_READ_ONLY_WRITE)
        self.read_only.add(StorageWeakRef(example.untyped_storage()))

    def _input_storages(self) -> set[StorageWeakRef]:
        examples = [i.node.meta.get("example_value") for i in self.inputs]
        return {
            StorageWeakRef(e.untyped_storage())
            for e in examples
            if isinstance(e, torch.Tensor) and e.layout == torch.strided
        }

    def real_value(self, source: Source) -> torch.Tensor | None:
        """The real tensor of this call read at `source`, if it is a graph input."""
        known = self._input_by_source.get(source)
        return known.value if known is not None else None

    def _first_non_placeholder(self) -> torch.fx.Node | None:
        for node in self.graph.nodes:
            if node.op != "placeholder":
                return node
        return None

    def to_fake(self, value: torch.Tensor, source: Source | None = None) -> torch.Tensor:
        fake = self._fake_cache.get(id(value))
        if fake is None:
            if source is None:
                fake = self.fake_mode.from_tensor(value, static_shapes=True)
            else:  # symbolic sizes where the dynamic policy says so
                fake = self.dynamic.fake_tensor(source, value)
            self._fake_cache[id(value)] = fake
        return fake

    # ---- nodes -------------------------------------------------------------------
    def create_node(
        self, op: str, target: Any, args: tuple, kwargs: dict, *, leaf: bool = False
    ) -> tuple[torch.fx.Node, Any]:
        """Adds a node and computes its example value on fake tensors. `leaf`: the caller
        keeps the autograd leaf it makes in the graph (variables/graph_leaves.py)."""
        if self.in_user_try:
            raise Unsupported("tensor operation inside try/except")
        if self.graph_free_contexts:
            raise Unsupported(
                f"tensor operation {_target_name(target)} inside "
                f"`with {self.graph_free_contexts[-1]}`, which changes how ops dispatch"
            )
        if needs_positions(kwargs):  # `from=` would be a SyntaxError in the graph's source
            args, kwargs = keywords_by_position(op, target, args, kwargs)
        fake_args = tree_map(_example_of, args)
        fake_kwargs = tree_map(_example_of, kwargs)
        if self.data_aliases and _writes_storage(
            op, target, fake_args, fake_kwargs, self.data_aliases
        ):
            # eager's write through `.data` leaves the tensor's version counter alone; a
            # graph's write to an input bumps it (autograd would refuse a saved tensor)
            raise Unsupported("an in-place op on a Tensor.data alias inside a traced region")
        if self.read_only and _writes_storage(
            op, target, fake_args, fake_kwargs, self.read_only | self._input_storages()
        ):
            raise Unsupported(_READ_ONLY_WRITE)
        refusal = None if leaf else leaf_creation_reason(op, target, fake_args, fake_kwargs)
        if refusal is not None:  # a leaf lives outside the graph's autograd function
            raise Unsupported(refusal)
        # meta kernels skip a few argument checks of eager's (eager_checks.py): a call
        # eager refuses is a graph break, where eager's kernel raises its own error
        detector = RandomOpDetector(check=refuse_as_eager)
        try:
            # ops whose device code would specialize symbolic sizes (example_rules.py)
            rule = rule_for(op, target, fake_args, fake_kwargs)
            with self.fake_mode, detector, dispatch_context(target, fake_args, fake_kwargs):
                if rule is not None:
                    example = rule()
                elif op == "call_method":
                    example = getattr(fake_args[0], target)(*fake_args[1:], **fake_kwargs)
                else:
                    example = target(*fake_args, **fake_kwargs)
        except (Unsupported, es.ConstraintViolationError):
            raise  # a dim marked dynamic forced to a constant is the user's error, not a break
        except Exception as exc:  # data-dependent ops, unsupported fake kernels, user errors
            kind = ExampleRuntimeError if type(exc) is RuntimeError else Unsupported
            raise kind(
                f"running {_target_name(target)} on example values failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        refusal = None if leaf else new_leaf_reason(example, fake_args, fake_kwargs)
        if refusal is not None:
            raise Unsupported(refusal)
        if detector.drew:
            self.rng.draw(_target_name(target))
        args, kwargs = scalar_types_as_dtypes(op, target, args, kwargs)  # printable source
        node = self.graph.create_node(op, target, args, kwargs)
        node.meta["example_value"] = example
        if detector.drew:
            # its draw advances the generator even when nothing reads the result
            node.meta["draws_random"] = True
        self.op_count += 1
        if self.dynamic.env.unbacked:
            self._note_unbacked(node, example)
        return node, example

    def _note_unbacked(self, node: torch.fx.Node, example: Any) -> None:
        """Sizes only known when the graph runs (nonzero's length): where to read them."""
        if not isinstance(example, torch.Tensor):
            return
        for d, size in enumerate(example.shape):
            if isinstance(size, torch.SymInt):
                expr = size.node.expr
                if expr in self.dynamic.env.unbacked:
                    self.dynamic.unbacked_nodes.setdefault(expr, (node, d))

    def add_subgraph(self, prefix: str, graph: torch.fx.Graph) -> str:
        """Holds `graph` as a GraphModule attribute of the graph; returns its name."""
        name = next(
            f"{prefix}_{i}" for i in itertools.count() if f"{prefix}_{i}" not in self.subgraphs
        )
        self.subgraphs[name] = torch.fx.GraphModule(self._attribute_root(), graph)
        return name

    def _attribute_root(self) -> torch.nn.Module:
        root = torch.nn.Module()
        for name, module in self.subgraphs.items():
            setattr(root, name, module)
        return root

    # ---- compiling -----------------------------------------------------------------
    def compile_subgraph(
        self, outputs: list[torch.fx.Node], backend: Callable, *, location: str
    ) -> CompiledSubgraph:
        """Finishes the graph with `outputs`, calls the backend, installs the result."""

        if left_switched := changed_since(self.entry_switched_state) + self.context_vars.left_set():
            raise Unsupported(
                f"a graph ending with global state switched ({', '.join(left_switched)})"
            )
        self.entry_autocast.wrap_graph(self.graph)
        self.graph.output(tuple(outputs))
        remove_unused_pure_nodes(self.graph)
        gm = torch.fx.GraphModule(self._attribute_root(), self.graph)
        gm.graph.lint()
        example_inputs = [graph_input.value for graph_input in self.inputs]
        name = getattr(backend, "__name__", type(backend).__name__)
        self.backend_where = f"backend {name} compiling the graph ending at {location}"
        try:
            compiled = backend(gm, example_inputs)
        except UserSetupError:
            raise  # a malformed setting names itself (exc.py)
        except Exception as exc:
            failure = BackendCompilerFailed(name, exc, location)
            failure.symbolic = self.dynamic.is_symbolic  # the caller may retry static
            raise failure from exc
        finally:
            self.backend_where = None
        if not callable(compiled):
            raise BackendCompilerFailed(
                getattr(backend, "__name__", repr(backend)),
                TypeError(f"backend returned {type(compiled).__name__}, not a callable"),
                location,
            )
        compiled = without_frame_hook(compiled)
        graph_id = next(_graph_ids)
        global_name = f"__compiled_fn_{graph_id}"
        self.f_globals[global_name] = compiled
        sub = CompiledSubgraph(global_name, gm, compiled, [i.source for i in self.inputs])
        self.compiled_graphs.append(sub)
        return sub

    def release(self) -> None:
        """Drops the frame's values the finished trace holds (its example inputs, the objects
        it read): the trace's objects form cycles (the ShapeEnv names this graph's location),
        so the caller's tensors and modules would otherwise live until a garbage collection
        rather than until their last reference goes, as in eager."""
        for graph_input in self.inputs:
            graph_input.value = None
        for table in (
            self._input_by_id,
            self.wrapped,
            self.objects_by_id,
            self.real_values,
            self.containers_by_id,
            self._fake_cache,
            self.decoded_code,
            self.stack_texts,
        ):
            table.clear()
        self.side_effects = SideEffects()
        self.dynamic.output = None

    def count_calls(self) -> int:
        return sum(1 for n in self.graph.nodes if n.op.startswith("call"))


def without_frame_hook(compiled: Callable) -> Callable:
    """The backend's callable, run with the frame hook off: whatever Python it runs (a runtime
    wrapper, a user's backend closure) is the backend's business, never traced again."""
    set_eval_frame = fh.set_eval_frame

    def run_compiled_graph(*args):
        previous = set_eval_frame(None)
        try:
            return compiled(*args)
        finally:
            set_eval_frame(previous)

    run_compiled_graph.__wrapped__ = compiled
    return run_compiled_graph


@dataclass
class CompiledSubgraph:
    global_name: str  # where the compiled callable lives in the frame's globals
    graph_module: torch.fx.GraphModule
    compiled: Callable
    input_sources: list[Source]

    @property
    def op_count(self) -> int:
        return sum(1 for n in self.graph_module.graph.nodes if n.op.startswith("call"))


_MUTATING_FUNCTIONS = {
    operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv,
    operator.ifloordiv, operator.imod, operator.ipow, operator.imatmul, operator.iand,
    operator.ior, operator.ixor, operator.ilshift, operator.irshift,
    torch._C._set_grad_enabled,
    torch.amp.autocast_mode._enter_autocast, torch.amp.autocast_mode._exit_autocast,
    *SWITCHES,
    *DISABLE_SWITCHES,  # disable_saved_tensors_hooks' switches: None, and they matter
}  # fmt: skip


_READ_ONLY_WRITE = (
    "an in-place write in a trace that reads a read-only NumPy array (into it, where eager "
    "raises, or into an input, which the copy of it the trace reads would not see)"
)


def is_mutating(node: torch.fx.Node) -> bool:
    """In-place tensor ops must stay in the graph even when nothing reads their result."""
    if node.op == "call_method":
        return node.target.endswith("_") and not node.target.endswith("__")
    if node.op == "call_function":
        if node.target in _MUTATING_FUNCTIONS or "out" in node.kwargs:
            return True
        name = getattr(node.target, "__name__", "")
        return name.endswith("_") and not name.endswith("__")
    return False


def _writes_storage(
    op: str, target: Any, args: tuple, kwargs: dict, storages: set[StorageWeakRef]
) -> bool:
    """Whether the call writes in place into one of `storages`."""
    name = target if op == "call_method" else getattr(target, "__name__", "")
    in_place = (name.endswith("_") and not name.endswith("__")) or target in _MUTATING_FUNCTIONS
    written = [kwargs.get("out"), args[0] if args and in_place else None]
    return any(
        isinstance(t, torch.Tensor)
        and t.layout == torch.strided
        and StorageWeakRef(t.untyped_storage()) in storages
        for t in tree_leaves(written)
    )


def remove_unused_pure_nodes(graph: torch.fx.Graph) -> None:
    for node in reversed(list(graph.nodes)):
        if (
            node.op in ("call_function", "call_method")
            and not node.users
            and not is_mutating(node)
            and not node.meta.get("draws_random")
            and not (node.op == "call_function" and node.is_impure())  # _assert_scalar
        ):
            graph.erase_node(node)


def _example_of(value: Any) -> Any:
    if isinstance(value, torch.fx.Node):
        return value.meta["example_value"]
    if isinstance(value, slice):  # symbolic bounds (pytree does not look inside slices)
        return slice(*(_example_of(p) for p in (value.start, value.stop, value.step)))
    return value


def _target_name(target: Any) -> str:
    if isinstance(target, str):
        return f"Tensor.{target}"
    return getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))


def _placeholder_name(source: Source, taken: set[str]) -> str:
    """The graph input's name, as Dynamo spells it so that graphs read alike in both: the
    source's expression with each run of other characters made one `_` (`L['x']` ->
    `L_x_`), `_0`, `_1`, ... added only where two inputs would share a name."""
    text = re.sub(r"[^a-zA-Z0-9]+", "_", source.expr())
    # a resume function's saved stack (one tuple argument here) reads as Dynamo's `stack0`, ...
    text = re.sub(r"^L_ember_stack_(\d+)_", r"L_stack\1_", text)
    if not text.isidentifier() or keyword.iskeyword(text):
        text = f"input_{text}"
    if text not in taken:
        return text
    return next(f"{text}_{i}" for i in itertools.count() if f"{text}_{i}" not in taken)
