"""The runner's output rebuild as one generated function instead of a tree of closures.

A frame's recipes (reconstruct.py) rebuild its return value and apply its writes after the
graph ran: for an HF model that is a ModelOutput around a cache object with its layers, plus
a few attribute writes, a tree of ~30 closure calls, comprehensions and lambdas per call. Each
recipe that knows how (`recipe.emit(code) -> expression`) writes itself into one function

    def rebuild(outs, L, G):
        t0 = L['self'].config          # reads, in the order the closures would run them
        o1 = DynamicCache.__new__(DynamicCache)
        o1.__dict__.update({...})
        ...                            # then each write reads what it needs,
        setattr(w3, 'compiling', t4)   # then all of them apply
        return t5

that does the same reads, calls and writes in the same order. A recipe that cannot emit
itself is called as it is (`c3(outs, L, G)`); as such a closure rebuilds the objects of the
trace through `L` (reconstruct.REBUILT_OBJECTS), a frame whose recipes build objects keeps
its closures when one cannot emit (the two would each build their own copy), as it does when
one of its writes cannot.
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import torch

Rebuild = Callable[[tuple, dict, dict], Any]
_counter = itertools.count()


class RebuildCode:
    """The body being generated: statements, named constants, fresh names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {}
        self.objects: dict[int, str] = {}  # traced object (by recipe key) -> its local
        self.closure_calls = 0
        self._const_names: dict[int, str] = {}
        self._names = itertools.count()

    def const(self, obj: Any) -> str:
        name = self._const_names.get(id(obj))
        if name is None:
            name = self._const_names[id(obj)] = f"c{len(self.consts)}"
            self.consts[name] = obj  # kept alive: the id stays this object's
        return name

    def name(self, prefix: str = "t") -> str:
        return f"{prefix}{next(self._names)}"

    def temp(self, expr: str) -> str:
        """Evaluates `expr` here, in order, into a fresh local."""
        name = self.name()
        self.lines.append(f"{name} = {expr}")
        return name

    def line(self, text: str) -> None:
        self.lines.append(text)

    def value(self, recipe: Callable) -> str:
        """An expression for what `recipe(outs, L, G)` returns (its statements emitted)."""
        emit = getattr(recipe, "emit", None)
        if emit is None:
            self.closure_calls += 1
            return self.temp(f"{self.const(recipe)}(outs, L, G)")
        return emit(self)


def compile_rebuild(
    recipes: Sequence[Callable], writes: Sequence[Callable], *, single: bool, builds_objects: bool
) -> Rebuild | None:
    """`rebuild(outs, L, G)`: the frame's value (or tuple of values) after reading every
    recipe, reading every write's target and new value, then applying the writes in order.
    None when the closures must run instead (see the module docstring)."""
    if any(getattr(write, "emit_write", None) is None for write in writes):
        return None
    code = RebuildCode()
    values = [code.temp(code.value(recipe)) for recipe in recipes]  # all read before writes
    applies = [write.emit_write(code) for write in writes]  # type: ignore[attr-defined]
    if builds_objects and code.closure_calls:
        return None
    for steps in applies:
        code.lines.extend(steps)
    result = values[0] if single else "(" + "".join(f"{v}, " for v in values) + ")"
    body = "".join(f"        {line}\n" for line in code.lines)
    source = (
        f"def make({', '.join(code.consts)}):\n"
        f"    def rebuild(outs, L, G):\n{body}"
        f"        return {result}\n"
        f"    return rebuild\n"
    )
    namespace: dict[str, Any] = {"__builtins__": builtins, "torch": torch}
    exec(compile(source, f"<ember rebuild {next(_counter)}>", "exec"), namespace)
    rebuild = namespace["make"](*code.consts.values())
    rebuild.source_code = source  # for logs and tests
    return rebuild


def emits(fn: Callable, emit: Callable[[RebuildCode], str]) -> Callable:
    """`fn` (a recipe) with its code form attached."""
    fn.emit = emit  # type: ignore[attr-defined]
    return fn


def emits_write(fn: Callable, emit: Callable[[RebuildCode], list[str]]) -> Callable:
    """`fn` (a write) with its code form: emits the reads, returns the apply statements."""
    fn.emit_write = emit  # type: ignore[attr-defined]
    return fn


__all__ = ["RebuildCode", "compile_rebuild", "emits", "emits_write"]
