"""`MyFunction.apply(...)` for a user's `torch.autograd.Function` subclass.

The call becomes one graph node whose target is the class's `apply`: the eager backend
runs it as written (the user's forward, and their backward when autograd needs it), and a
backend that retraces the graph with autograd (AOT) runs forward and, through autograd's
engine, the user's backward, so custom gradients are kept rather than re-derived from the
forward's ops. The example value comes from running `apply` on the fake inputs. The class
is guarded by identity and its `forward`/`backward` by identity too, so redefining either
retraces.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import operator
import warnings
import weakref
from typing import Any

import torch
import torch.fx
from torch.utils._pytree import tree_leaves

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, GuardKind
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.constructed import ConstructedObjectVariable
from ember_bytecode_tracer.variables.dicts import ConstDictVariable
from ember_bytecode_tracer.variables.function_reads import guard_reads
from ember_bytecode_tracer.variables.function_state import watch
from ember_bytecode_tracer.variables.lists import BaseListVariable, ListVariable, TupleVariable
from ember_bytecode_tracer.variables.objects import FRAME_LOCAL_CLASSES, constructor
from ember_bytecode_tracer.variables.tensor import TensorVariable, as_node_arg, wrap_graph_value

# Function's own `apply` descriptor: a Python classmethod up to torch 2.13, a C
# classmethod_descriptor from 2.14 (whose bound form is a builtin method, with no __func__)
_APPLY = torch.autograd.Function.__dict__["apply"]
_BASE_SETUP_CONTEXT = torch.autograd.Function.setup_context


def autograd_function_of(value: Any) -> type | None:
    """The Function subclass whose bound `apply` `value` is, else None."""
    if not (inspect.ismethod(value) or inspect.isbuiltin(value)):
        return None  # asked first: reading `__self__` of a user's object runs its __getattr__
    cls = getattr(value, "__self__", None)
    if not (isinstance(cls, type) and issubclass(cls, torch.autograd.Function)):
        return None
    # the class inherits Function's `apply` (a subclass may define its own) and `value` is
    # that very method bound to it
    owner = next((c for c in cls.__mro__ if "apply" in c.__dict__), None)
    if owner is None or owner.__dict__["apply"] is not _APPLY:
        return None
    return cls if value == cls.apply else None


_APPLIERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def applier(cls: type, lists: tuple[int, ...] = (), objects: tuple = (), *, writes=False):
    """A plain function calling `cls.apply`: FX names a bound classmethod by its defining
    module (`torch.autograd.function.apply`), which does not exist, so graphs call this.
    With `lists` (positions of list arguments), it returns `(result, *final contents of
    those lists)`: what forward appended or replaced, for the trace to replay on the lists
    of the frame (the graph passes forward lists of its own). `objects` are (position,
    class, field names) of dataclass arguments, which the graph passes as the tuple of
    their fields and forward gets as a copy. With `writes` (forward writes to an input in
    place), its name ends in `_`, as an in-place op's does, so that graph passes keep the
    call whether or not its result is used."""
    known = _APPLIERS.setdefault(cls, {})
    key = (lists, objects, writes)
    if key not in known:
        owner = weakref.ref(cls)  # the table's value must not keep its key alive

        def apply(*args, **kwargs):
            if objects:
                args = _with_copies(args, objects)
            result = owner().apply(*args, **kwargs)
            if not lists:
                return result
            return (result, *(tuple(args[i]) for i in lists))

        name = f"{cls.__name__}_apply" + ("_" if writes else "")
        apply.__name__ = apply.__qualname__ = name
        known[key] = apply
    return known[key]


_COPIES: list | None = None  # set while the trace runs forward on example values


def _with_copies(args: tuple, objects: tuple) -> tuple:
    args = list(args)
    for position, kind, names in objects:
        copy = kind.__new__(kind)
        for name, value in zip(names, args[position], strict=True):
            object.__setattr__(copy, name, value)
        if _COPIES is not None:
            _COPIES.append((copy, names, args[position]))
        args[position] = copy
    return tuple(args)


def _fields_of(tx, tracker: VariableTracker) -> tuple[type, tuple[str, ...], list] | None:
    """A dataclass argument as (class, names, field trackers), or None: not one."""
    kind = tracker.python_type()
    if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
        return None
    value = getattr(tracker, "value", None)
    if value is not None:  # a real object: its instance dict must hold just the fields
        names = tuple(getattr(value, "__dict__", {"": None}))
        if not set(names) <= {f.name for f in dataclasses.fields(kind)}:
            raise Unsupported(f"a {kind.__qualname__} with attributes beyond its fields")
    elif getattr(tracker, "attrs", None) or not hasattr(tracker, "_fields"):
        raise Unsupported(f"a {kind.__qualname__} made in the trace as a Function argument")
    else:
        names = tuple(f.name for f in dataclasses.fields(kind))
    return kind, names, [tracker.var_getattr(tx, n) for n in names]


def _check_copies(copies: list, qualname: str) -> None:
    for copy, names, values in copies:
        now = vars(copy)
        if tuple(now) != names or any(now[n] is not v for n, v in zip(names, values, strict=True)):
            raise Unsupported(f"{qualname}.forward sets attributes of a dataclass argument")


def _backward_changes(tx, cls: type, node_args: tuple, value: Any) -> list[str]:
    """What the user's backward, run once on the example values, changes in the Python
    state it names ([] when nothing, or when it cannot run on them). Eager runs it on every
    backward pass; a backend that retraces the graph with autograd runs it once."""
    nodes = [n for n in tree_leaves(node_args) if isinstance(n, torch.fx.Node)]
    leaves = [n.meta.get("example_value") for n in nodes]
    inputs = [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]
    outputs = [t for t in tree_leaves(value) if isinstance(t, torch.Tensor) and t.grad_fn]
    if not (inputs and outputs and torch.is_grad_enabled()):
        return []
    with tx.output.fake_mode, watch([cls.backward]) as state:
        try:
            grads = [torch.ones_like(t) for t in outputs]
            torch.autograd.grad(outputs, inputs, grads, retain_graph=True, allow_unused=True)
        except Exception:  # fake values it cannot take: nothing learnt
            pass
        return state.changes()


def _user_functions(cls: type) -> list[Any]:
    """forward and, when the class defines one, setup_context: what apply runs."""
    functions = [cls.forward]
    if cls.setup_context is not _BASE_SETUP_CONTEXT:
        functions.append(cls.setup_context)
    return functions


# what a graph passes to forward as it is: values, with nothing for forward to read later
_LITERALS = (
    torch.fx.Node, type(None), bool, int, float, complex, str, bytes, slice, type(Ellipsis),
    torch.dtype, torch.device, torch.layout, torch.memory_format, enum.Enum,
)  # fmt: skip


def _check_passable(value: Any, top_level: bool) -> None:
    """Lists are passed by value in a graph: one as a direct argument has its final
    contents replayed; one nested in another argument would lose forward's writes. Other
    objects (modules, functions, user objects) would be read by forward when the graph
    runs, unguarded (or baked in by a backend that traces the call): a break."""
    if isinstance(value, list) and not top_level:
        raise Unsupported("a list nested in an autograd.Function argument (forward may mutate it)")
    if type(value) in (list, tuple, torch.Size):
        for item in value:
            _check_passable(item, top_level=False)
    elif not isinstance(value, _LITERALS):
        raise Unsupported(f"a {type(value).__name__} as an autograd.Function argument")


def _trackers_by_example(trackers) -> dict[int, VariableTracker]:
    """id(example value) -> tracker, for tensors among (and inside) `trackers`."""
    found: dict[int, VariableTracker] = {}
    for tracker in trackers:
        if isinstance(tracker, TensorVariable):
            found.setdefault(id(tracker.node.meta["example_value"]), tracker)
        elif isinstance(tracker, BaseListVariable):
            found.update(_trackers_by_example(tracker.items))
    return found


def _unchanged(final: tuple, items: list[VariableTracker]) -> bool:
    if len(final) != len(items):
        return False
    for value, item in zip(final, items, strict=True):
        if isinstance(item, TensorVariable):
            if value is not item.node.meta["example_value"]:
                return False
        elif not (item.is_python_constant() and item.as_python_constant() is value):
            return False
    return True


def _replay_list(tx, lst: ListVariable, node, index: int, final: tuple, known) -> None:
    """Writes forward's final contents of the list argument `lst` into it (when changed)."""
    if _unchanged(final, lst.items):
        return
    contents = tx.output.graph.call_function(operator.getitem, (node, index))
    contents.meta["example_value"] = final
    made = wrap_graph_value(tx, contents, final).items
    items = [
        known.get(id(value), item) if isinstance(value, torch.Tensor) else item
        for value, item in zip(final, made, strict=True)
    ]
    lst.call_method(tx, "__setitem__", [ConstantVariable(slice(None)), TupleVariable(items)], {})


def _is_record(value: Any) -> bool:
    """A dict or dataclass in forward's result, or a tuple/list holding one."""
    if isinstance(value, tuple | list):
        return any(_is_record(v) for v in value)
    return type(value) is dict or (dataclasses.is_dataclass(value) and not isinstance(value, type))


def _read(tx, node, how, key, value):
    read = tx.output.graph.call_function(how, (node, key))
    read.meta["example_value"] = value
    return _wrap_result(tx, read, value)


def _wrap_record(tx, node, value: Any) -> VariableTracker:
    if type(value) is dict:
        if not all(type(k) in (str, int) for k in value):
            raise Unsupported("a dict with other keys than str or int in forward's result")
        return ConstDictVariable(
            {k: _read(tx, node, operator.getitem, k, v) for k, v in value.items()}
        )
    kind = type(value)
    names = [f.name for f in dataclasses.fields(kind)]
    plain = not hasattr(kind, "__post_init__") and all(f.init for f in dataclasses.fields(kind))
    if not plain or list(getattr(value, "__dict__", ())) != names:
        raise Unsupported(f"a {kind.__qualname__} in forward's result (rebuilt by calling it)")
    fields = {n: _read(tx, node, getattr, n, getattr(value, n)) for n in names}
    return ConstructedObjectVariable(kind, [], fields)


def _wrap_result(tx, node, value: Any) -> VariableTracker:
    """forward's result: tensors, tuples and numbers as any graph value; dicts and
    dataclasses (which apply returns as forward made them, their tensors untouched by
    autograd) read from the node item by item and rebuilt after the graph."""
    if not _is_record(value):
        return wrap_graph_value(tx, node, value)
    if isinstance(value, tuple | list) and type(value) in (tuple, list):
        items = [_read(tx, node, operator.getitem, i, v) for i, v in enumerate(value)]
        return TupleVariable(items) if type(value) is tuple else ListVariable(items)
    if isinstance(value, tuple | list):
        raise Unsupported(f"a {type(value).__name__} holding a dict or dataclass from forward")
    return _wrap_record(tx, node, value)


class AutogradFunctionApplyVariable(VariableTracker):
    def __init__(self, cls: type) -> None:
        super().__init__()
        self.cls = cls

    def python_type(self) -> type:
        return type(self.cls.apply)

    def as_python_constant(self) -> Any:
        return self.cls.apply

    def call_function(self, tx, args, kwargs):
        args, objects = list(args), []
        for position, arg in enumerate(args):
            fields = None if isinstance(arg, TensorVariable) else _fields_of(tx, arg)
            if fields is not None:
                objects.append((position, fields[0], fields[1]))
                args[position] = TupleVariable(fields[2])
        node_args = tuple(as_node_arg(tx, a) for a in args)
        node_kwargs = {k: as_node_arg(tx, v) for k, v in kwargs.items()}
        for arg in node_args:
            _check_passable(arg, top_level=True)
        _check_passable(tuple(node_kwargs.values()), top_level=False)
        lists = tuple(i for i, a in enumerate(args) if isinstance(a, ListVariable))
        target = applier(self.cls, lists, tuple(objects))
        inputs = [t for t in _trackers_by_example(args).values() if isinstance(t, TensorVariable)]
        inputs = [t.node.meta["example_value"] for t in inputs]
        versions = [t._version for t in inputs]
        node, value = self._run(tx, target, node_args, node_kwargs)
        if [t._version for t in inputs] != versions:
            # forward wrote to an input in place (ctx.mark_dirty): the node is an in-place
            # op, kept however its output is used (the caller may drop it); the graph's
            # later uses of the input read the written tensor, with its rebased history
            node.target = applier(self.cls, lists, tuple(objects), writes=True)
        if not lists:
            return _wrap_result(tx, node, value)
        result_node = tx.output.graph.call_function(operator.getitem, (node, 0))
        result_node.meta["example_value"] = value[0]
        result = _wrap_result(tx, result_node, value[0])
        known = _trackers_by_example([*args, result])
        for k, i in enumerate(lists):
            _replay_list(tx, args[i], node, k + 1, value[k + 1], known)
        return result

    def _run(self, tx, target, node_args, node_kwargs):
        """The node, with its example value from running apply on fake tensors, once
        forward is seen to leave Python state and its dataclass arguments as they were."""
        global _COPIES
        _COPIES = copies = []
        try:
            with watch(_user_functions(self.cls)) as state:
                try:
                    node, value = tx.output.create_node(
                        "call_function", target, node_args, node_kwargs
                    )
                finally:
                    changed = state.changes()
        finally:
            _COPIES = None
        if changed:
            raise Unsupported(
                f"{self.cls.__qualname__}.forward changes Python state ({', '.join(changed)}): "
                "run on example values it would do so at trace time"
            )
        _check_copies(copies, self.cls.__qualname__)
        changed = _backward_changes(tx, self.cls, node_args, value)
        if changed:
            raise Unsupported(
                f"{self.cls.__qualname__}.backward changes Python state ({', '.join(changed)}): "
                "a backend that traces the backward would do so once, when it compiles"
            )
        return node, value

    def __repr__(self) -> str:
        return f"AutogradFunctionApplyVariable({self.cls.__qualname__})"


class AutogradFunctionInstanceVariable(VariableTracker):
    """`MyFunction()`: an instance made in the trace (deprecated in eager, where it warns),
    used for its `apply`; anything else read from it is a break."""

    def __init__(self, cls: type) -> None:
        super().__init__()
        self.cls = cls

    def python_type(self) -> type:
        return self.cls

    def var_getattr(self, tx, name):
        if name == "apply" and autograd_function_of(self.cls.apply) is self.cls:
            return AutogradFunctionApplyVariable(self.cls)
        raise Unsupported(f"reading {name!r} of a {self.cls.__qualname__} instance")

    def __repr__(self) -> str:
        return f"AutogradFunctionInstanceVariable({self.cls.__qualname__})"


_METHODS = ("forward", "setup_context", "backward", "vjp", "jvp", "vmap")
_OVERRIDDEN_ONLY = {"vjp", "jvp", "vmap"}  # guarded where the class defines its own


def _named_methods(function_class: type) -> list[tuple[str, Any]]:
    found = []
    for name in _METHODS:
        method = getattr(function_class, name, None)
        base = getattr(torch.autograd.Function, name, None)
        if method is None or (name in _OVERRIDDEN_ONLY and method is base):
            continue
        found.append((name, method))
    return found


def _methods(function_class: type) -> list[Any]:
    return [method for _, method in _named_methods(function_class)]


def _guard_methods(tx, owner, function_class: type) -> None:
    """The class's forward/backward (and setup_context) by identity: redefining retraces."""
    methods = []
    for name, method in _named_methods(function_class):
        guard(tx, AttrSource(owner, name), GuardKind.ID_MATCH, method)
        methods.append((AttrSource(owner, name), method))
    # what they read by name (globals, closure cells): a backend that retraces the graph
    # with autograd keeps the values it saw, so a change must retrace
    guard_reads(tx, methods)


@constructor("autograd_function")
def _construct_instance(tx, kind, args, kwargs) -> VariableTracker | None:
    cls = kind.cls
    if not (issubclass(cls, torch.autograd.Function) and cls is not torch.autograd.Function):
        return None
    if "__init__" in vars(cls) or "__new__" in vars(cls) or args or kwargs:
        return None  # a constructor of its own: the general refusal stands
    if kind.source is not None:
        _guard_methods(tx, kind.source, cls)
    elif cls in FRAME_LOCAL_CLASSES:
        guard_reads(tx, [(None, m) for m in _methods(cls)])
    warnings.warn(  # Function.__init__'s own warning, given when the call is traced
        f"{cls} should not be instantiated. Methods on autograd functions are all static, "
        "so you should invoke them on the class itself. Instantiating an autograd function "
        "will raise an error in a future version of PyTorch.",
        DeprecationWarning,
        stacklevel=2,
    )
    return AutogradFunctionInstanceVariable(cls)


# ---- wrapping real values (variables/builder.py) ----------------------------------------
@wrap_rule("autograd_function_apply")
def _wrap_apply(tx, value: Any, source) -> VariableTracker | None:
    function_class = autograd_function_of(value)
    if function_class is None:
        return None
    if source is not None:  # MyFunction.apply of a torch.autograd.Function
        owner = AttrSource(source, "__self__")
        guard(tx, owner, GuardKind.ID_MATCH, function_class)
        _guard_methods(tx, owner, function_class)
    elif function_class in FRAME_LOCAL_CLASSES:  # defined in the frame: what it reads
        guard_reads(tx, [(None, m) for m in _methods(function_class)])
    return AutogradFunctionApplyVariable(function_class)
