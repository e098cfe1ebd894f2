"""Guards on what a user's autograd.Function reads besides its arguments.

`MyFunction.apply` is one graph node whose forward and backward run as written under the
eager backend, but a backend that retraces the graph with autograd (AOT, inductor) runs
them once, when it compiles, and keeps what they read then: a global `SCALE`, a closure
cell, a constant attribute of an object they name. Those values are guarded here, so that
a change retraces instead of running the old value. What is guarded is what the functions
name (their globals, including those of nested code, and their closure cells), the user
functions they name in turn (up to a bound), and one level into what those hold: the
constant attributes of objects read by name, and the items of lists and dicts. Constants
are guarded by value, everything else by identity. Like variables/function_state.py, it
follows what the code names; what it reaches through arguments is the graph's business.
"""

from __future__ import annotations

import inspect
import sys
import types
from typing import Any

import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, GlobalSource, GuardKind, ItemSource, Source
from ember_bytecode_tracer.guards.constants import check_constant
from ember_bytecode_tracer.variables.builder import guard

_MAX_FUNCTIONS = 32  # user functions looked into, from forward and backward outward
_MAX_ITEMS = 16
_MISSING = object()  # items of a list or dict guarded one by one (longer: by identity only)


def _is_constant(value: Any) -> bool:
    try:
        check_constant(value)
    except TypeError:
        return False
    return True


def _is_user(value: Any) -> bool:
    """Defined in user code: not torch's, not the standard library's."""
    module = getattr(value, "__module__", None) or getattr(value, "__name__", "")
    if not isinstance(module, str):
        return False
    top = module.partition(".")[0]
    return top not in ("torch", "builtins", "") and top not in sys.stdlib_module_names


def _names_of(code: types.CodeType) -> set[str]:
    """Global and attribute names `code` and the code nested in it (lambdas,
    comprehensions, inner functions) read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_of(const)
    return names


class _Reads:
    def __init__(self, tx) -> None:
        self.tx = tx
        self.todo: list[tuple[Source | None, Any]] = []
        self.done: set[int] = set()
        self.lists: dict[int, tuple[list, Source]] = {}  # lists read by name, with sources

    def function(self, source: Source | None, fn: Any) -> None:
        """`fn` read at `source`; None for a method of a class defined in the traced frame
        (made at trace time from the frame's code, closing over nothing)."""
        wrapped = getattr(fn, "__wrapped__", None)
        if wrapped is not None:  # a functools.wraps decorator (once_differentiable, amp's)
            inner = AttrSource(source, "__wrapped__") if source is not None else None
            self.todo.append((inner, wrapped))
        if isinstance(fn, types.FunctionType) and _is_user(fn) and id(fn) not in self.done:
            self.todo.append((source, fn))

    def run(self) -> None:
        while self.todo and len(self.done) < _MAX_FUNCTIONS:
            source, fn = self.todo.pop()
            if id(fn) in self.done:
                continue
            self.done.add(id(fn))
            names = _names_of(fn.__code__)
            for name in sorted(names):
                if name in fn.__globals__:
                    where = self.global_source(source, fn, name)
                    self.value(where, fn.__globals__[name], names)
            if source is None:
                continue  # no closure (class_definition.py makes only plain functions)
            for i, cell in enumerate(fn.__closure__ or ()):
                try:
                    held = cell.cell_contents
                except ValueError:  # an empty cell: nothing read yet
                    continue
                cell = ItemSource(AttrSource(source, "__closure__"), i)
                self.value(AttrSource(cell, "cell_contents"), held, names)

    def global_source(self, source: Source | None, fn: Any, name: str) -> Source:
        if source is not None:
            return ItemSource(AttrSource(source, "__globals__"), name)
        tx = self.tx
        if fn.__globals__ is not tx.f_globals:
            raise Unsupported(
                f"{fn.__qualname__} (of a class defined in the traced frame) reads the "
                f"global {name!r} of another module"
            )
        if tx.globals_source is None:
            return GlobalSource(name)
        return ItemSource(tx.globals_source, name)

    def value(self, source: Source, value: Any, names: set[str], depth: int = 0) -> None:
        if _is_constant(value):
            guard(self.tx, source, GuardKind.EQUALS_MATCH, value)
            return
        guard(self.tx, source, GuardKind.ID_MATCH, value)
        if depth:
            return
        if isinstance(value, types.FunctionType) or hasattr(value, "__wrapped__"):
            self.function(source, value)
        elif type(value) is list and len(value) <= _MAX_ITEMS:
            self.lists.setdefault(id(value), (value, source))
            guard(self.tx, source, GuardKind.LEN_MATCH, (list, len(value)))
            for i, item in enumerate(value):
                self.value(ItemSource(source, i), item, names, depth + 1)
        elif type(value) is dict and len(value) <= _MAX_ITEMS and _literal_keys(value):
            guard(self.tx, source, GuardKind.DICT_KEYS, (dict, tuple(value)))
            for key, item in value.items():
                self.value(ItemSource(source, key), item, names, depth + 1)
        elif _is_user(value):
            self.attributes(source, value, names)

    def attributes(self, source: Source, value: Any, names: set[str]) -> None:
        """The attributes of a user object, class or module that the code names (its own
        or its class's; properties and other descriptors are left alone)."""
        if isinstance(value, torch.nn.Module | torch.Tensor):
            return  # a module's state is read through its own rules, not guarded here
        for name in sorted(names):
            if name.startswith("__"):
                continue
            found = inspect.getattr_static(value, name, _MISSING)
            if isinstance(found, staticmethod):
                found = found.__func__
            elif found is _MISSING or _is_descriptor(found):
                continue
            owned = isinstance(value, type | types.ModuleType) or name in getattr(
                value, "__dict__", {}
            )
            if isinstance(found, types.FunctionType) and not owned:
                continue  # a method of its class: bound anew on each read
            live = _live(value, name)
            if live is not found and not _is_constant(live):
                continue  # a __getattribute__ of its own makes it anew on each read
            self.value(AttrSource(source, name), live, names, 1)
            if isinstance(found, types.FunctionType) and isinstance(value, type | types.ModuleType):
                self.function(AttrSource(source, name), found)


def _live(value: Any, name: str) -> Any:
    """The attribute as a guard reads it (getattr), or _MISSING when that raises."""
    try:
        return getattr(value, name)
    except Exception:
        return _MISSING


def _is_descriptor(value: Any) -> bool:
    """A property, classmethod, method or slot: what getattr computes rather than holds."""
    return isinstance(value, classmethod | property) or (
        hasattr(type(value), "__get__") and not isinstance(value, types.FunctionType | type)
    )


def _literal_keys(value: dict) -> bool:
    return all(type(k) in (str, int) for k in value)


def guard_reads(tx, functions: list[tuple[Source | None, Any]]) -> dict[int, tuple[list, Source]]:
    """Guards what `functions` (each with the source it is read from, None for the
    methods of a class defined in the traced frame) read by name. Returns the lists they
    name (id -> (list, source)): what a forward may append to (autograd_function.py)."""
    reads = _Reads(tx)
    for source, fn in functions:
        reads.function(source, fn)
    reads.run()
    return reads.lists
