"""The dispatch-level tracer: a TorchDispatchMode that records aten ops as a functional FX graph.

It sits on top of a FakeTensorMode, so every op runs on fake tensors (metadata only) and is
recorded, after autograd, as one FX node with `node.meta["val"]`. Ops found in the
decomposition table are replaced by their decomposition (traced recursively); ops that write
their arguments are replaced by out-of-place ops and the writes tracked per storage (see
tensor_table), so the graph never mutates anything.
"""

from __future__ import annotations

import logging
import operator
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch._ops import OpOverload
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
)
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_leaves, tree_map

from ember_aot_autograd.dense import is_dense
from ember_aot_autograd.errors import (
    InputMutationError,
    UndecomposedOpError,
    UnsupportedOpError,
)
from ember_aot_autograd.functional_rules import SPECIAL_RULES, functionalize_mutation
from ember_aot_autograd.op_kinds import returns_views, written_arguments
from ember_aot_autograd.regions import mark
from ember_aot_autograd.symbolic import SYM_TYPES, SymbolNodes, static_fake
from ember_aot_autograd.tensor_table import Entry, TensorTable, ViewStep
from ember_events import stage

log = logging.getLogger("ember.aot")
aten = torch.ops.aten
DecompositionTable = Mapping[OpOverload, Callable]


@dataclass
class TraceReport:
    """What the tracer did: ops recorded, decomposed, and left undecomposed (by op name)."""

    recorded: Counter = field(default_factory=Counter)
    decomposed: Counter = field(default_factory=Counter)
    undecomposed: Counter = field(default_factory=Counter)  # only when a table was given
    constants: int = 0


def _refuse_unstrided(func: OpOverload, out: Any) -> None:
    """A result that is not a strided tensor (gather's sparse_grad=True backward gives a
    sparse one) has no storage the table can key it by, nor prims to lower it to."""
    for leaf in tree_leaves(out):
        if isinstance(leaf, torch.Tensor) and leaf.layout != torch.strided:
            raise UnsupportedOpError(
                func, f"returns a {leaf.layout} tensor; the trace handles strided tensors only"
            )


#: leaf types of op arguments that are no containers and no tensors (the tracer's fast paths
#: pass them untouched; anything else goes through pytree)
_PLAIN_LEAVES = frozenset(
    {
        int, float, bool, complex, str, type(None), torch.dtype, torch.device, torch.layout,
        torch.memory_format, torch.SymInt, torch.SymFloat, torch.SymBool,
    }
)  # fmt: skip


def _may_hold_real_tensor(values: Any) -> bool:
    """Whether a real (not fake) tensor may be among `values` (an op's args, or its kwargs'
    values), in the lists and tuples among them too: False only where each is a fake tensor
    or a plain leaf (then lifting constants would change nothing)."""
    for value in values:
        kind = type(value)
        if kind in _PLAIN_LEAVES or kind is FakeTensor:
            continue
        if kind is list or kind is tuple:
            for item in value:
                if type(item) not in _PLAIN_LEAVES and type(item) is not FakeTensor:
                    return True
            continue
        return True
    return False


def _map_args(fn: Callable[[Any], Any], value: Any) -> Any:
    """`tree_map(fn, value)` with lists, tuples and dicts walked here (the shapes op
    arguments come in); any other container goes through pytree, as before."""
    kind = type(value)
    if kind is list:
        return [_map_args(fn, item) for item in value]
    if kind is tuple:
        return tuple(_map_args(fn, item) for item in value)
    if kind is dict:
        return {key: _map_args(fn, item) for key, item in value.items()}
    if kind in _PLAIN_LEAVES or isinstance(value, torch.Tensor):
        return fn(value)
    return tree_map(fn, value)


def _has_tensor(value: Any) -> bool:
    return any(isinstance(leaf, torch.Tensor) for leaf in tree_flatten(value)[0])


_NUMBER_DTYPES = {
    int: torch.int64,
    float: torch.float64,
    bool: torch.bool,
    complex: torch.complex128,
}


def _numbers_as_tensors(func: OpOverload, args: tuple) -> tuple:
    """`args` with a Python number passed as `self`, where the schema takes a Tensor, made
    the 0-dim tensor it stood for (`scalar_to_tensor`'s dtypes): vmap's batching rules
    (an op under `torch.vmap`) hand a mode `x + 1`'s wrapped number as the number itself,
    and decompositions read `self`'s dtype. A number in a later Tensor slot stays a number
    (`mul(x, 2)` records as such, as eager hands it)."""
    if not args or type(args[0]) not in _NUMBER_DTYPES:
        return args
    schema = getattr(func, "_schema", None)
    if schema is None or not schema.arguments:
        return args
    if not isinstance(schema.arguments[0].type, torch.TensorType):
        return args
    with _disable_current_modes():
        self_tensor = torch.tensor(args[0], dtype=_NUMBER_DTYPES[type(args[0])])
    return (self_tensor, *args[1:])


class FunctionalTracer(TorchDispatchMode):
    """Records each aten op reaching it (over a FakeTensorMode) into `self.graph`."""

    def __init__(
        self,
        fake_mode: FakeTensorMode,
        decompositions: DecompositionTable | None = None,
        *,
        strict: bool = False,
    ) -> None:
        super().__init__()
        self.fake_mode = fake_mode
        self.decompositions = decompositions
        self.strict = strict
        self.graph = torch.fx.Graph()
        self.table = TensorTable()
        self.constants: dict[str, torch.Tensor] = {}
        self._constant_fakes: dict[int, torch.Tensor] = {}
        self.report = TraceReport()
        self.symbols = SymbolNodes(self.graph)  # size symbols -> nodes computing them

    # -- inputs and values -------------------------------------------------------------
    def add_input(self, fake: torch.Tensor, name: str, index: int) -> torch.fx.Node:
        node = self.graph.placeholder(name)
        node.meta["val"] = fake
        self.table.add_fresh(fake, node, input_index=index)
        self.symbols.bind_tensor(fake, node)
        return node

    def add_symint_input(self, value: torch.SymInt, name: str) -> torch.fx.Node:
        """A SymInt input (the run-time value is an int): its symbol reads as the input."""
        node = self.graph.placeholder(name)
        self.symbols.bind_symint(value, node)
        return node

    def add_placeholder_after(self, fake: torch.Tensor, name: str, anchor: torch.fx.Node):
        with self.graph.inserting_after(anchor):
            node = self.graph.placeholder(name)
        node.meta["val"] = fake
        self.table.add_fresh(fake, node)
        return node

    def read(self, tensor: torch.Tensor) -> torch.fx.Node:
        """The node holding `tensor`'s current value (regenerated if its storage was written)."""
        entry = self.table.get(tensor) or self.lift_unknown(tensor)
        state = entry.storage
        if entry.version == state.version and entry.node is not None:
            return entry.node
        if not entry.chain:
            node = entry.node if state.value is tensor else self.read(state.value)
        else:
            current = state.value
            with self:
                for step in entry.chain:
                    current = step.apply(current)
            node = self.read(current)
        entry.node, entry.version = node, state.version
        return node

    def lift_unknown(self, tensor: torch.Tensor) -> Entry:
        entry = self.table.add_unknown_alias(tensor) if isinstance(tensor, FakeTensor) else None
        if entry is None:
            raise UnsupportedOpError(
                "tensor",
                f"{tuple(tensor.shape)} {tensor.dtype} reached the trace from outside "
                "(not an input, not a constant, not made by a traced op)",
                "pass it to the traced function as an input",
            )
        return entry

    def call(self, op: OpOverload, *args: Any, **kwargs: Any) -> Any:
        """Runs `op` on program tensors through this tracer (decompositions, recording)."""
        with self:
            return op(*args, **kwargs)

    def write(self, target: torch.Tensor, new: torch.Tensor) -> None:
        """`target` (a program tensor) now holds `new`'s values: a functional write."""
        entry = self.table.get(target) or self.lift_unknown(target)
        if tuple(new.shape) != tuple(target.shape):
            new = self.call(aten.expand.default, new, list(target.shape))
        if new.dtype != target.dtype:
            new = self.call(aten._to_copy.default, new, dtype=target.dtype)
        state = entry.storage
        if state.uncontained:
            raise InputMutationError(
                state.input_index,
                "written while sharing storage with another input that it does not contain "
                "(or of another dtype)",
            )
        base = state.base
        if not entry.chain:
            if new.stride() != base.stride() and base.numel() > 1:
                # keep the base's layout: views are regenerated with its strides
                empty = self.call(
                    aten.empty_strided.default,
                    list(base.shape),
                    list(base.stride()),
                    dtype=base.dtype,
                    device=base.device,
                )
                new = self.call(aten.copy.default, empty, new)
        else:
            if not is_dense(base):
                raise UnsupportedOpError(
                    "write",
                    f"through a view of a non-dense tensor {tuple(base.shape)} "
                    f"strides {base.stride()}",
                    "make the tensor contiguous before mutating it",
                )
            offset = target.storage_offset() - base.storage_offset()
            new = self.call(
                aten.as_strided_scatter.default,
                base,
                new,
                list(target.shape),
                list(target.stride()),
                offset,
            )
        state.value = self._freeze(new)
        state.version += 1

    def snapshot(self, tensor: torch.Tensor) -> torch.Tensor:
        """`_freeze` from outside an op (a saved-tensor hook, while this tracer is active)."""
        with _disable_current_modes(), self.fake_mode:
            return self._freeze(tensor)

    def _freeze(self, tensor: torch.Tensor) -> torch.Tensor:
        """A private program tensor holding `tensor`'s current node: later writes to
        `tensor`'s storage (it may be a view the program still holds) cannot reach it."""
        node = self.read(tensor)
        with _disable_current_modes(), self.fake_mode:
            frozen = torch.empty_strided(
                tensor.shape, tensor.stride(), dtype=tensor.dtype, device=tensor.device
            )
        self.table.add_fresh(frozen, node)
        return frozen

    # -- dispatch ----------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        args = _numbers_as_tensors(func, args)
        if _may_hold_real_tensor(args) or _may_hold_real_tensor(kwargs.values()):
            args, kwargs = tree_map(self._lift_constant, (args, kwargs))
        if self.decompositions is not None and func in self.decompositions:
            self.report.decomposed[str(func)] += 1
            with self, stage("decompose"):  # its time shows as the decompose stage's
                return self.decompositions[func](*args, **kwargs)
        rule = SPECIAL_RULES.get(func)
        if rule is not None:
            return rule(self, func, args, kwargs)
        if func._schema.is_mutable:
            if not written_arguments(func):
                raise UnsupportedOpError(func, "mutates arguments its schema does not name")
            return functionalize_mutation(self, func, args, kwargs)
        return self.record(func, args, kwargs)

    def record(self, func: OpOverload, args: tuple, kwargs: dict) -> Any:
        """Runs a functional op on the fake tensors and appends it to the graph."""
        try:
            out = func(*args, **kwargs)
        except DataDependentOutputException as error:
            raise UnsupportedOpError(
                func,
                "reads tensor data into Python (data-dependent control flow, .item())",
                "keep it out of the traced region (a graph break) or make it tensor code",
            ) from error
        except DynamicOutputShapeException as error:
            raise UnsupportedOpError(
                func,
                "has an output shape that depends on tensor data",
                "keep it out of the traced region",
            ) from error
        if not _has_tensor(out):
            return out  # metadata queries (prim.device, sym_size): nothing to record
        _refuse_unstrided(func, out)
        name = str(func)
        if self.decompositions is not None and func.namespace == "aten":
            if self.strict:
                raise UndecomposedOpError(func)
            self.report.undecomposed[name] += 1
        self.report.recorded[name] += 1
        node_args, node_kwargs = _map_args(self._node_of, (args, kwargs))
        node = self.graph.call_function(func, tuple(node_args), node_kwargs)
        node.meta["val"] = tuple(out) if isinstance(out, list) else out
        mark(node)  # the checkpointed region it was recorded in (regions.py)
        source = self._view_source(func, args) if returns_views(func) else None
        if isinstance(out, torch.Tensor):
            self._register(out, node, source, func, args, kwargs, None)
            self.symbols.bind_unbacked(out, node)  # nonzero's length: read from its result
            return out
        for index, item in enumerate(out):
            if isinstance(item, torch.Tensor):
                item_node = self.graph.call_function(operator.getitem, (node, index))
                item_node.meta["val"] = item
                mark(item_node)
                self._register(item, item_node, source, func, args, kwargs, index)
            elif isinstance(item, list | tuple) and _has_tensor(item):
                # a Tensor[] result inside a tuple (`_amp_foreach_..._unscale`'s self_out)
                list_node = self.graph.call_function(operator.getitem, (node, index))
                list_node.meta["val"] = tuple(item)
                for inner, tensor in enumerate(item):
                    item_node = self.graph.call_function(operator.getitem, (list_node, inner))
                    item_node.meta["val"] = tensor
                    self.table.add_fresh(tensor, item_node)
        return out

    def _register(self, out, node, source, func, args, kwargs, index) -> None:
        if source is None:
            self.table.add_fresh(out, node)
            return
        step = ViewStep(func, tuple(args[1:]), dict(kwargs), index)
        self.table.add_view(out, source, step, node)

    def _view_source(self, func: OpOverload, args: tuple) -> Entry | None:
        if not args or not isinstance(args[0], torch.Tensor):
            return None
        return self.table.get(args[0])

    def _node_of(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return self.read(value)
        if isinstance(value, SYM_TYPES):
            return self.symbols.node_of(value)
        return value

    def _lift_constant(self, value: Any) -> Any:
        """Real tensors met inside the trace (torch.tensor(...), attributes) become get_attr."""
        if not isinstance(value, torch.Tensor) or isinstance(value, FakeTensor):
            return value
        known = self._constant_fakes.get(id(value))
        if known is not None:
            return known
        if value.requires_grad:
            raise UnsupportedOpError(
                "tensor",
                f"a real tensor {tuple(value.shape)} that requires grad is used as a "
                "constant inside the trace; its gradient would be lost",
                "pass it as an input (aot_module lifts the module's parameters)",
            )
        name = f"_tensor_constant{len(self.constants)}"
        self.constants[name] = value
        fake = static_fake(self.fake_mode, value)
        node = self.graph.get_attr(name)
        node.meta["val"] = fake
        self.table.add_fresh(fake, node)
        self._constant_fakes[id(value)] = fake
        self.report.constants += 1
        log.debug("lifted constant %s %s", name, tuple(value.shape))
        return fake
