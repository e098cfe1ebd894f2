"""torch.distributed collectives inside a traced frame: graph nodes, not Python to inline.

Functional collectives (`torch.distributed._functional_collectives.all_reduce`,
`all_gather_tensor`, `reduce_scatter_tensor`, `wait_tensor`) become the `_c10d_functional`
ops they are built on, each followed by its `wait_tensor` (later stages move the wait as
late as its first reader allows). The in-place c10d calls a user writes (`dist.all_reduce(t)`,
`dist.all_gather_into_tensor(out, t)`, `dist.reduce_scatter_tensor(out, t)`) become the
same functional ops plus a `copy_` back into the tensor they write, which aot turns into
an input mutation. `async_op=True` (a Work handle) is a graph break.

The process group is read at trace time and named in the graph by its group name; the
trace is guarded on the group's identity (a group passed in) or on the default group's
identity (`group=None`), since the group's size fixes output shapes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import GuardKind, TorchStateSource
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard, guard_identity, in_rule_table, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.tensor import TensorVariable, as_node_arg, wrap_graph_value
from ember_bytecode_tracer.variables.torch_functions import TorchFunctionVariable

if TYPE_CHECKING:
    from ember_bytecode_tracer.variables.base import Translator

Rule = Callable[["Translator", dict[str, VariableTracker]], VariableTracker]
RULES: dict[Any, tuple[tuple[tuple[str, Any], ...], Rule]] = {}
_REQUIRED = object()


def _rule(fn_path: tuple[str, ...], *params: tuple[str, Any]):
    """Registers a rule for `module.name` (and more names) with its parameters (name,
    default) in order."""

    def register(rule: Rule) -> Rule:
        module, *names = fn_path
        for name in names:  # aliases (a deprecated name and its successor) share a rule
            try:
                owner = __import__(module, fromlist=[name])
                RULES[getattr(owner, name)] = (params, rule)
            except (ImportError, AttributeError):  # a torch without distributed support
                pass
        return rule

    return register


def _ops():
    return torch.ops._c10d_functional


def _value(tracker: VariableTracker) -> Any:
    if isinstance(tracker, TensorVariable):
        raise Unsupported("a tensor where a collective takes a Python value")
    if tracker.is_python_constant():
        return tracker.as_python_constant()
    if hasattr(tracker, "value"):
        return tracker.value
    raise Unsupported(f"collective argument {tracker} is not known at trace time")


def _group_name(tx: Translator, group: VariableTracker) -> tuple[str, int]:
    """The group's name and size, guarding the group by identity."""
    value = _process_group(tx, group)
    return value.group_name, value.size()


def _process_group(tx: Translator, group: VariableTracker) -> Any:
    """The ProcessGroup a collective runs over (None: the default one), guarded by identity."""
    import torch.distributed as dist

    if not (group.is_python_constant() and group.as_python_constant() is None):
        value = getattr(group, "value", None)
        if not isinstance(value, dist.ProcessGroup):
            raise Unsupported(
                "a collective over something other than a ProcessGroup object (ranks, a "
                "DeviceMesh, a group name) is not traced"
            )
        if group.source is None:
            raise Unsupported("a ProcessGroup created inside the traced frame")
        guard(tx, group.source, GuardKind.ID_MATCH, value)
    else:
        if not dist.is_initialized():
            raise Unsupported("a collective before torch.distributed is initialized")
        value = dist.distributed_c10d._get_default_group()
        guard(tx, TorchStateSource("default_process_group"), GuardKind.ID_MATCH, value)
    return value


def _reduce_op(tx: Translator, op: VariableTracker) -> str:

    value = _value(op)
    if isinstance(value, str):
        return value.lower()
    if op.source is not None and not isinstance(op, ConstantVariable):
        guard(tx, op.source, GuardKind.ID_MATCH, value)  # ReduceOp members: one object each
    name = getattr(value, "name", None)
    if name not in ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"):
        raise Unsupported(f"reduce op {value!r} in a traced collective")
    return name.lower()


def _node(tx: Translator, op: Any, *args: Any) -> VariableTracker:

    node_args = tuple(as_node_arg(tx, a) if isinstance(a, VariableTracker) else a for a in args)
    return wrap_graph_value(tx, *tx.output.create_node("call_function", op, node_args, {}))


def _issue(tx: Translator, op: Any, *args: Any) -> VariableTracker:
    """The collective and its wait, as two nodes (a later stage spreads them apart)."""
    return _node(tx, _ops().wait_tensor.default, _node(tx, op, *args))


def _torch_call(tx: Translator, fn: Any, args: list, kwargs: dict) -> VariableTracker:

    constants = {k: ConstantVariable(v) for k, v in kwargs.items()}
    return TorchFunctionVariable(fn).call_function(tx, args, constants)


def _all_gather(tx, tensor: VariableTracker, dim: int, group: VariableTracker) -> VariableTracker:
    name, size = _group_name(tx, group)
    out = _issue(tx, _ops().all_gather_into_tensor.default, tensor, size, name)
    if dim != 0:  # gathered along dim 0: move the pieces to `dim`
        pieces = _torch_call(tx, torch.chunk, [out, ConstantVariable(size)], {"dim": 0})
        out = _torch_call(tx, torch.cat, [pieces], {"dim": dim})
    return out


def _reduce_scatter(tx, tensor, op: VariableTracker, dim: int, group) -> VariableTracker:
    name, size = _group_name(tx, group)
    if dim != 0:  # scattered along dim 0: bring `dim`'s pieces there first
        pieces = _torch_call(tx, torch.chunk, [tensor, ConstantVariable(size)], {"dim": dim})
        tensor = _torch_call(tx, torch.cat, [pieces], {"dim": 0})
    return _issue(tx, _ops().reduce_scatter_tensor.default, tensor, _reduce_op(tx, op), size, name)


def _copy_back(tx, target: VariableTracker, value: VariableTracker) -> VariableTracker:
    target.call_method(tx, "copy_", [value], {})
    return ConstantVariable(None)


def _synchronous(args: dict[str, VariableTracker]) -> None:
    if _value(args["async_op"]):
        raise Unsupported("a collective with async_op=True (a Work handle) is not traced")


FC = "torch.distributed._functional_collectives"
C10D = "torch.distributed"
GROUP = ("group", _REQUIRED)


@_rule((FC, "all_reduce"), ("self", _REQUIRED), ("reduceOp", _REQUIRED), GROUP, ("tag", ""))
def _fc_all_reduce(tx, a):
    name, _ = _group_name(tx, a["group"])
    return _issue(tx, _ops().all_reduce.default, a["self"], _reduce_op(tx, a["reduceOp"]), name)


@_rule(
    (FC, "all_gather_tensor", "all_gather_single"),
    ("self", _REQUIRED), ("gather_dim", _REQUIRED), GROUP, ("tag", ""),
)  # fmt: skip
def _fc_all_gather(tx, a):
    return _all_gather(tx, a["self"], _value(a["gather_dim"]), a["group"])


@_rule(
    (FC, "reduce_scatter_tensor", "reduce_scatter_single"),
    ("self", _REQUIRED), ("reduceOp", _REQUIRED), ("scatter_dim", _REQUIRED), GROUP, ("tag", ""),
)  # fmt: skip
def _fc_reduce_scatter(tx, a):
    return _reduce_scatter(tx, a["self"], a["reduceOp"], _value(a["scatter_dim"]), a["group"])


@_rule((FC, "wait_tensor"), ("tensor", _REQUIRED))
def _fc_wait(tx, a):
    return _node(tx, _ops().wait_tensor.default, a["tensor"])


SUM = ("op", "sum")
NO_GROUP = ("group", None)
SYNC = ("async_op", False)


@_rule((C10D, "all_reduce"), ("tensor", _REQUIRED), SUM, NO_GROUP, SYNC)
def _c10d_all_reduce(tx, a):
    _synchronous(a)
    name, _ = _group_name(tx, a["group"])
    out = _issue(tx, _ops().all_reduce.default, a["tensor"], _reduce_op(tx, a["op"]), name)
    return _copy_back(tx, a["tensor"], out)


@_rule(
    (C10D, "all_gather_into_tensor"),
    ("output_tensor", _REQUIRED), ("input_tensor", _REQUIRED), NO_GROUP, SYNC,
)  # fmt: skip
def _c10d_all_gather(tx, a):
    _synchronous(a)
    return _copy_back(tx, a["output_tensor"], _all_gather(tx, a["input_tensor"], 0, a["group"]))


@_rule(
    (C10D, "reduce_scatter_tensor"),
    ("output", _REQUIRED), ("input", _REQUIRED), SUM, NO_GROUP, SYNC,
)  # fmt: skip
def _c10d_reduce_scatter(tx, a):
    _synchronous(a)
    out = _reduce_scatter(tx, a["input"], a["op"], 0, a["group"])
    return _copy_back(tx, a["output"], out)


@_rule((C10D, "get_rank"), NO_GROUP)
def _c10d_get_rank(tx, a):
    """The rank in the group: a constant of the trace, which is guarded on the group."""
    return ConstantVariable(_process_group(tx, a["group"]).rank())


@_rule((C10D, "get_world_size"), NO_GROUP)
def _c10d_get_world_size(tx, a):
    return ConstantVariable(_process_group(tx, a["group"]).size())


class CollectiveVariable(VariableTracker):
    """A torch.distributed collective before it is called."""

    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def as_python_constant(self) -> Any:
        return self.fn

    def call_function(self, tx, args, kwargs):
        params, rule = RULES[self.fn]
        bound = _bind(self.fn, params, args, kwargs)
        return rule(tx, bound)

    def __repr__(self) -> str:
        return f"CollectiveVariable({self.fn.__module__}.{self.fn.__name__})"


def _bind(fn, params, args, kwargs) -> dict[str, VariableTracker]:
    names = [name for name, _ in params]
    if len(args) > len(names) or set(kwargs) - set(names):
        raise Unsupported(f"{fn.__name__}() called with arguments it does not take")
    bound = dict(zip(names, args, strict=False))
    for name, default in params:
        if name in kwargs:
            if name in bound:
                raise Unsupported(f"{fn.__name__}() got {name!r} twice")
            bound[name] = kwargs[name]
        elif name not in bound:
            if default is _REQUIRED:
                raise Unsupported(f"{fn.__name__}() missing argument {name!r}")
            bound[name] = ConstantVariable(default)
    return bound


def collective_tracker(value: Any) -> VariableTracker | None:
    return CollectiveVariable(value) if in_rule_table(value, RULES) else None


# ---- wrapping real values (variables/builder.py) ----------------------------------------
@wrap_rule("collective")
def _wrap_collective(tx: Translator, value: Any, source) -> VariableTracker | None:
    tracker = collective_tracker(value)
    if tracker is not None:
        guard_identity(tx, value, source)
    return tracker
