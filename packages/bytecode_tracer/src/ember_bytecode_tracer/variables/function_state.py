"""What a user's Python function can reach and write besides its arguments: the globals it
names and its closure cells, and (one level down) the lists, dicts, sets and plain objects
they hold.

`MyFunction.apply` runs the user's forward (and setup_context) on fake tensors while the
trace is made, to learn its outputs, and its backward once, to learn what that changes. A
forward that appends to a global list, counts calls in a closure cell, sets an attribute
of a captured object or prints would do so with fake tensors at trace time, and never
again when the graph runs its own call (a backend that retraces the graph with autograd
runs the backward once, when it compiles). `watch` snapshots that state; `changes` tells,
after the run, whether it changed, restores it, and the caller breaks the graph so that
eager runs the call as written. Output to stdout counts too (it is captured, not shown).
The check reaches what the function names and what the user functions it names
(closures, globals, decorated ones) name in turn, up to a bound; what torch's or the
standard library's functions write, or what is reached through arguments and attributes,
it does not see: it catches the common patterns, it is not a proof.
"""

from __future__ import annotations

import contextlib
import io
import sys
import types
from typing import Any

from ember_bytecode_tracer.directives import registered_code_reason, registered_reason

_MISSING = object()
_MAX_FUNCTIONS = 32  # user functions looked into, from forward or backward outward
_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType)


def _state_of(value: Any) -> tuple[str, Any] | None:
    if isinstance(value, list):
        return "list", list(value)
    if isinstance(value, dict):
        return "dict", dict(value)
    if isinstance(value, set):
        return "set", set(value)
    if isinstance(value, _OPAQUE) or not hasattr(value, "__dict__"):
        return None
    try:
        return "attrs", dict(vars(value))
    except TypeError:
        return None


def _same(kind: str, before: Any, now: Any) -> bool:
    if kind == "list":
        return len(before) == len(now) and all(a is b for a, b in zip(before, now, strict=True))
    if kind == "set":
        return before == now
    return before.keys() == now.keys() and all(before[k] is now[k] for k in before)


def _restore(kind: str, value: Any, before: Any) -> None:
    if kind == "list":
        value[:] = before
    elif kind == "attrs":
        vars(value).clear()
        vars(value).update(before)
    else:
        value.clear()
        value.update(before)


def _user_function(value: Any) -> Any:
    """The Python function behind `value` when it is user code (not torch's, not the
    standard library's), else None; decorators made with functools.wraps are seen through."""
    value = getattr(value, "__wrapped__", value)
    if not isinstance(value, types.FunctionType):
        return None
    module = (value.__module__ or "").partition(".")[0]
    if module == "torch" or module in sys.stdlib_module_names:
        return None
    return value


class Watch:
    def __init__(self, functions: list[Any]) -> None:
        self.names: list[tuple[dict, str, Any]] = []  # (globals, name, value before)
        self.objects: list[tuple[Any, str, Any]] = []  # (object, kind, state before)
        seen: set[int] = set()
        todo = [f for f in functions if getattr(f, "__code__", None) is not None]
        done: set[int] = set()
        while todo and len(done) < _MAX_FUNCTIONS:
            fn = todo.pop()
            if id(fn) in done:
                continue
            done.add(id(fn))
            for value in self._held(fn):
                helper = _user_function(value)
                if helper is not None:
                    todo.append(helper)  # what the helpers it calls name, too
                state = _state_of(value)
                if state is not None and id(value) not in seen:
                    seen.add(id(value))
                    self.objects.append((value, *state))
        self.output = io.StringIO()
        self.breaks: list[str] = []  # graph-break directives called during the run

    def _held(self, fn: Any) -> list[Any]:
        code = fn.__code__
        held = [cell.cell_contents for cell in fn.__closure__ or () if _filled(cell)]
        for name in code.co_names:
            value = fn.__globals__.get(name, _MISSING)
            self.names.append((fn.__globals__, name, value))
            held.append(value)
        return held

    def appends(self) -> dict[int, tuple[list, tuple]]:
        """The lists whose only change is items added at their end: id -> (list, the
        items added). Asked before `changes()`, which restores them."""
        found = {}
        for value, kind, before in self.objects:
            if kind != "list" or len(value) <= len(before):
                continue
            if all(a is b for a, b in zip(before, value, strict=False)):
                found[id(value)] = (value, tuple(value[len(before) :]))
        return found

    def changes(self) -> list[str]:
        """What changed since the snapshot (each restored); [] when nothing did."""
        found = []
        for scope, name, before in self.names:
            if scope.get(name, _MISSING) is not before:
                found.append(f"global {name}")
                if before is _MISSING:
                    scope.pop(name, None)
                else:
                    scope[name] = before
        for value, kind, before in self.objects:
            now = set(value) if kind == "set" else (vars(value) if kind == "attrs" else value)
            if not _same(kind, before, now):
                found.append(f"a {type(value).__name__} it reaches")
                _restore(kind, value, before)
        if self.output.getvalue():
            found.append("output to stdout")
        return found


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
    except ValueError:  # an empty cell
        return False
    return True


@contextlib.contextmanager
def watch(functions: list[Any]):
    """Snapshots what `functions` reach; yields the Watch to ask `changes()` after the run."""
    state = Watch(functions)
    with contextlib.redirect_stdout(state.output), _directive_calls(state.breaks):
        yield state


@contextlib.contextmanager
def _directive_calls(found: list[str]):
    """Appends to `found` the reason of each graph-break directive (ember.graph_break, one
    registered with register_graph_break) called, at any depth, while the block runs: the
    user asked for the call to run outside any graph. A profiler set before is kept."""
    previous = sys.getprofile()

    def profile(frame, event, arg):
        if event == "call":
            reason = registered_code_reason(frame.f_code)
        elif event == "c_call":
            reason = registered_reason(arg)
        else:
            reason = None
        if reason is not None and reason not in found:
            found.append(reason)
        if previous is not None:
            previous(frame, event, arg)

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(previous)
