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

from ember_bytecode_tracer.directives import is_allowed_in_graph
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


def applier(
    cls: type, lists: tuple[int, ...] = (), objects: tuple = (), *, writes=False, effects=()
):
    """A plain function calling `cls.apply`: FX names a bound classmethod by its defining
    module (`torch.autograd.function.apply`), which does not exist, so graphs call this.
    With `lists` (positions of list arguments), it returns `(result, *final contents of
    those lists)`: what forward appended or replaced, for the trace to replay on the lists
    of the frame (the graph passes forward lists of its own). `objects` are (position,
    class, field names) of dataclass arguments, which the graph passes as the tuple of
    their fields and forward gets as a copy. With `writes` (forward writes to an input in
    place), its name ends in `_`, as an in-place op's does, so that graph passes keep the
    call whether or not its result is used. `effects` are lists forward reaches by name
    (a closure cell, a global) and appends to: what it appends is taken back off and
    returned after those contents, for the trace to append after the graph (a backend that
    retraces the graph runs forward once, when it compiles)."""
    known = _APPLIERS.setdefault(cls, {})
    key = (lists, objects, writes, tuple(id(e) for e in effects))
    if key not in known:
        owner = weakref.ref(cls)  # the table's value must not keep its key alive

        def apply(*args, **kwargs):
            if objects:
                args = _with_copies(args, objects)
            sizes = [len(effect) for effect in effects]
            result = owner().apply(*args, **kwargs)
            added = []
            for effect, size in zip(effects, sizes, strict=True):
                added.append(tuple(effect[size:]))
                del effect[size:]
            if not lists and not effects:
                return result
            return (result, *(tuple(args[i]) for i in lists), *added)

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
        return state.changes() + state.breaks


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


def _replay_appends(tx, effect, node, index: int, added: tuple, known) -> None:
    """Appends what forward appended to a list it reaches by name, read from the node."""
    contents = tx.output.graph.call_function(operator.getitem, (node, index))
    contents.meta["example_value"] = added
    made = wrap_graph_value(tx, contents, added).items
    items = [
        known.get(id(value), item) if isinstance(value, torch.Tensor) else item
        for value, item in zip(added, made, strict=True)
    ]
    target = tx.wrap(effect[0], effect[1])
    target.call_method(tx, "extend", [TupleVariable(items)], {})


_APPENDABLE = (torch.Tensor, type(None), bool, int, float, str)


def _appends_only(appended: dict, changed: list[str], read_lists: dict) -> list | None:
    """What forward changed, when all it did is append tensors or constants to lists it
    names (each with the source it was read at): [(list, source, items added)]; else None."""
    if len(appended) != len(changed):
        return None
    effects = []
    for key, (value, added) in appended.items():
        read = read_lists.get(key)
        if read is None or read[0] is not value:
            return None
        if not all(isinstance(item, _APPENDABLE) for item in added):
            return None
        effects.append((value, read[1], added))
    return effects


class AutogradFunctionApplyVariable(VariableTracker):
    def __init__(self, cls: type, read_lists: dict | None = None) -> None:
        super().__init__()
        self.cls = cls
        self.read_lists = read_lists or {}  # lists forward names, with sources

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
        node, value, effects = self._run(tx, target, node_args, node_kwargs)
        # forward wrote to an input in place (ctx.mark_dirty): the node is an in-place op,
        # kept however its output is used (the caller may drop it); the graph's later uses
        # of the input read the written tensor, with its rebased history
        writes = [t._version for t in inputs] != versions
        if writes or effects:
            lists_of = tuple(effect[0] for effect in effects)
            node.target = applier(self.cls, lists, tuple(objects), writes=writes, effects=lists_of)
        if effects:
            value = (*(value if lists else (value,)), *(effect[2] for effect in effects))
            node.meta["example_value"] = value
        if not lists and not effects:
            return _wrap_result(tx, node, value)
        result_node = tx.output.graph.call_function(operator.getitem, (node, 0))
        result_node.meta["example_value"] = value[0]
        result = _wrap_result(tx, result_node, value[0])
        known = _trackers_by_example([*args, result])
        for k, i in enumerate(lists):
            _replay_list(tx, args[i], node, k + 1, value[k + 1], known)
        for k, effect in enumerate(effects):
            _replay_appends(tx, effect, node, 1 + len(lists) + k, effect[2], known)
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
                    appended = state.appends()
                    changed, breaks = state.changes(), state.breaks
        finally:
            _COPIES = None
        if breaks and not is_allowed_in_graph(self.cls):
            # forward asks for a graph break: apply runs eagerly, forward compiled alone
            raise Unsupported(
                f"{self.cls.__qualname__}.forward asks for a graph break: {breaks[0]}"
            )
        effects = _appends_only(appended, changed, self.read_lists) if changed else []
        if effects is None:
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
        return node, value, effects

    def __repr__(self) -> str:
        return f"AutogradFunctionApplyVariable({self.cls.__qualname__})"


class AutogradFunctionInstanceVariable(VariableTracker):
    """`MyFunction()`: an instance made in the trace (deprecated in eager, where it warns),
    used for its `apply`; anything else read from it is a break."""

    def __init__(self, cls: type, read_lists: dict | None = None) -> None:
        super().__init__()
        self.cls = cls
        self.read_lists = read_lists

    def python_type(self) -> type:
        return self.cls

    def var_getattr(self, tx, name):
        if name == "apply" and autograd_function_of(self.cls.apply) is self.cls:
            return AutogradFunctionApplyVariable(self.cls, self.read_lists)
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


def _guard_methods(tx, owner, function_class: type) -> dict:
    """The class's forward/backward (and setup_context) by identity: redefining retraces.
    Returns the lists they name, with their sources."""
    methods = []
    for name, method in _named_methods(function_class):
        guard(tx, AttrSource(owner, name), GuardKind.ID_MATCH, method)
        methods.append((AttrSource(owner, name), method))
    # what they read by name (globals, closure cells): a backend that retraces the graph
    # with autograd keeps the values it saw, so a change must retrace
    return guard_reads(tx, methods)


def _guard_class(tx, owner, function_class: type) -> dict:
    """Guards on the class reached at `owner` (None: defined in the traced frame, or
    reached without a source); returns the lists its methods name, with their sources."""
    if owner is not None:
        return _guard_methods(tx, owner, function_class)
    if function_class in FRAME_LOCAL_CLASSES:  # defined in the frame: what it reads
        return guard_reads(tx, [(None, m) for m in _methods(function_class)])
    return {}


@constructor("autograd_function")
def _construct_instance(tx, kind, args, kwargs) -> VariableTracker | None:
    cls = kind.cls
    if not (issubclass(cls, torch.autograd.Function) and cls is not torch.autograd.Function):
        return None
    if "__init__" in vars(cls) or "__new__" in vars(cls) or args or kwargs:
        return None  # a constructor of its own: the general refusal stands
    read_lists = _guard_class(tx, kind.source, cls)
    warnings.warn(  # Function.__init__'s own warning, given when the call is traced
        f"{cls} should not be instantiated. Methods on autograd functions are all static, "
        "so you should invoke them on the class itself. Instantiating an autograd function "
        "will raise an error in a future version of PyTorch.",
        DeprecationWarning,
        stacklevel=2,
    )
    return AutogradFunctionInstanceVariable(cls, read_lists)


# ---- wrapping real values (variables/builder.py) ----------------------------------------
@wrap_rule("autograd_function_apply")
def _wrap_apply(tx, value: Any, source) -> VariableTracker | None:
    function_class = autograd_function_of(value)
    if function_class is None:
        return None
    owner = None
    if source is not None:  # MyFunction.apply of a torch.autograd.Function
        owner = AttrSource(source, "__self__")
        guard(tx, owner, GuardKind.ID_MATCH, function_class)
    return AutogradFunctionApplyVariable(function_class, _guard_class(tx, owner, function_class))
