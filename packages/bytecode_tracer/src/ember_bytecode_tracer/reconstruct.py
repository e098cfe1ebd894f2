"""Recipes that rebuild the real value of a tracker after the graph has run.

A recipe is a function `(outputs, L, G) -> value`: `outputs` are the compiled graph's
results, `L` the frame's locals at entry and `G` its globals. Tensors come from graph
outputs, constants are baked in, values with a source are loaded again through it, and
containers are rebuilt from their items.

A source names a value as the frame saw it at entry, so a recipe only reads: writes to
objects that existed before the frame (a mutated list or dict, an attribute, a global) are
`Write`s, run in two phases per call: every write first reads what it needs (its target and
its new value) while the recipes read theirs, and only then do all of them apply. Nothing is
read after something was written, and each write happens once per call.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch.fx

import ember_frame_hook as fh
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.rebuild_codegen import RebuildCode, emits

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import VariableTracker

Recipe = Callable[[tuple, dict, dict], Any]
# A write reads what it needs and returns the step that applies it (phase two).
Write = Callable[[tuple, dict, dict], Callable[[], None]]
# Per-call scratch kept in the runner's `L` (no local can have this name): the objects built
# in the trace, rebuilt once per call.
REBUILT_OBJECTS = "<rebuilt objects>"

# How each kind of tracker is rebuilt, keyed by tracker class (the closest class in the
# tracker's MRO wins); filled by recipe_rules.py. A tracker with no rule is loaded through
# its source, or baked in as a constant.
RecipeRule = Callable[["RecipeBuilder", Any], Recipe]
RECIPES: dict[type, RecipeRule] = {}


def recipe_for(*classes: type) -> Callable[[RecipeRule], RecipeRule]:
    """Registers the decorated `(builder, tracker) -> Recipe` for trackers of `classes`."""

    def register(fn: RecipeRule) -> RecipeRule:
        for cls in classes:
            if cls in RECIPES:
                raise ValueError(f"two recipe rules for {cls.__name__}")
            RECIPES[cls] = fn
        return fn

    return register


def recipe_rule(cls: type) -> RecipeRule | None:
    return next((RECIPES[k] for k in cls.__mro__ if k in RECIPES), None)


def source_loader(source: Source) -> Callable[[dict, dict], Any]:
    """A compiled `lambda L, G: <source expression>`."""
    return eval(compile(f"lambda L, G: {source.expr()}", f"<ember source {source.expr()}>", "eval"))


def load_recipe(source: Source) -> Recipe:
    load = source_loader(source)
    expr = source.expr()
    return emits(lambda outs, L, G: load(L, G), lambda code: code.temp(expr))


def output_recipe(index: int) -> Recipe:
    return emits(lambda outs, L, G: outs[index], lambda code: f"outs[{index}]")


def constant_recipe(constant: Any) -> Recipe:
    return emits(lambda outs, L, G: constant, lambda code: code.const(constant))


def items_code(code: RebuildCode, parts: list[Recipe]) -> str:
    return "".join(f"{code.value(p)}, " for p in parts)


def entries_code(code: RebuildCode, parts: dict[Any, Recipe]) -> str:
    return "".join(f"{code.const(k)}: {code.value(p)}, " for k, p in parts.items())


class RecipeBuilder:
    """Collects the graph outputs the recipes need while building them."""

    def __init__(self, mutated: set[int] | None = None) -> None:
        self.outputs: list[torch.fx.Node] = []
        self._index: dict[torch.fx.Node, int] = {}
        # ids of containers that existed before the frame and were mutated by the trace:
        # only those are rewritten in place; the others are loaded back as they are.
        self.mutated = mutated or set()
        self._objects: dict[int, Recipe] = {}
        self._keep: list[VariableTracker] = []
        # same-object writes of mutated containers (one per container, whichever recipe
        # reaches it first), then attribute and global writes (convert_frame)
        self.writes: list[Write] = []
        self._written: set[int] = set()
        # At a graph break in a frame with cell variables, the frame keeps its cells (the
        # resume function closes over them): (its translator, their names). A function made
        # in the trace over one of them is rebuilt over the frame's cell itself, which the
        # runner is handed as FREE_CELL + name (listed in `cells_read`).
        self.frame_cells: tuple[Any, tuple[str, ...]] | None = None
        self.cells_read: list[str] = []

    @property
    def builds_objects(self) -> bool:
        """Whether a recipe rebuilds an object of the trace (identity kept per call)."""
        return bool(self._objects)

    def output_index(self, node: torch.fx.Node) -> int:
        if node not in self._index:
            self._index[node] = len(self.outputs)
            self.outputs.append(node)
        return self._index[node]

    def object_recipe(self, value: VariableTracker) -> Recipe:
        """An object built in the trace: made once per call (identity and cycles are kept),
        as `object.__new__(cls)` (a Python `__new__` of the class is not run again) with its final instance dict and slots, set past the class's
        attribute hooks; its __init__ is not run again."""
        known = self._objects.get(id(value))
        if known is not None:
            return known
        cls, key = value.cls, id(value)
        slot_names = list(getattr(value, "slots", {}))
        descriptors = tuple(inspect.getattr_static(cls, name) for name in slot_names)

        def build(outs, L, G):
            made = L.setdefault(REBUILT_OBJECTS, {})
            obj = made.get(key)
            if obj is None:
                obj = made[key] = object.__new__(cls)
                values = [slots[name](outs, L, G) for name in slot_names]
                set_state(
                    obj, {name: p(outs, L, G) for name, p in parts.items()}, descriptors, values
                )
            return obj

        def emit(code: RebuildCode) -> str:
            name = code.objects.get(key)
            if name is None:  # made once, before its parts (which may refer back to it)
                name = code.objects[key] = code.name("o")
                kind = code.const(cls)
                code.line(f"{name} = object.__new__({kind})")
                values = "".join(f"{code.value(slots[n])}, " for n in slot_names)
                code.line(
                    f"{code.const(set_state)}({name}, {{{entries_code(code, parts)}}}, "
                    f"{code.const(descriptors)}, [{values}])"
                )
            return name

        self._objects[key] = emits(build, emit)
        self._keep.append(value)  # ids stay unique while the recipes are built
        parts = {name: self.recipe(v) for name, v in value.attrs.items()}
        slots = {name: self.recipe(v) for name, v in getattr(value, "slots", {}).items()}
        return build

    def once_per_call(self, value: VariableTracker, recipe: Recipe) -> Recipe:
        """`recipe` for the object built in the trace that `value` tracks, run once per call:
        every place that holds the object (a local, the stack, the return value) gets the
        same one, as in eager (an attribute set on it after a break stays on it)."""
        known = self._objects.get(id(value))
        if known is not None:
            return known
        key = id(value)

        def build(outs, L, G):
            made = L.setdefault(REBUILT_OBJECTS, {})
            if key not in made:
                made[key] = recipe(outs, L, G)
            return made[key]

        def emit(code: RebuildCode) -> str:
            name = code.objects.get(key)
            if name is None:
                name = code.objects[key] = code.temp(code.value(recipe))
            return name

        self._objects[key] = emits(build, emit)
        self._keep.append(value)  # ids stay unique while the recipes are built
        return self._objects[key]

    def cell_recipe(self, key: tuple, owner: Any, contents: Callable[[], Any]) -> Recipe:
        """A cell of the trace, made once per call: empty first, then filled with the
        recipe of `contents()` (its final value, which may hold the cell again)."""
        known = self._objects.get(key)  # type: ignore[call-overload]
        if known is not None:
            return known

        def build(outs, L, G):
            made = L.setdefault(REBUILT_OBJECTS, {})
            cell = made.get(key)
            if cell is None:
                cell = made[key] = types.CellType()
                cell.cell_contents = value(outs, L, G)
            return cell

        def emit(code: RebuildCode) -> str:
            name = code.objects.get(key)
            if name is None:
                name = code.objects[key] = code.name("cell")
                code.line(f"{name} = {code.const(types.CellType)}()")
                code.line(f"{name}.cell_contents = {code.value(value)}")
            return name

        self._objects[key] = emits(build, emit)  # type: ignore[index]
        self._keep.append(owner)  # ids stay unique while the recipes are built
        value = self.recipe(contents())
        return self._objects[key]  # type: ignore[index]

    def write_once(self, value: VariableTracker, write: Write) -> None:
        if id(value) not in self._written:
            self._written.add(id(value))
            self._keep.append(value)  # ids stay unique while the recipes are built
            self.writes.append(write)

    def recipe(self, value: VariableTracker) -> Recipe:
        """A closure rebuilding `value`; most also carry their code form (`emit`, see
        rebuild_codegen.py), which must do the same reads, calls and writes in order."""
        rule = recipe_rule(type(value))
        if rule is not None:
            return rule(self, value)
        if value.source is not None:
            return load_recipe(value.source)
        if value.is_python_constant():
            return constant_recipe(value.as_python_constant())
        raise Unsupported(f"cannot rebuild {value} after the graph")


def set_state(obj: Any, attrs: dict, descriptors: tuple, values: list) -> None:
    """An object's instance dict and slots, written past its class's __setattr__."""
    if attrs:
        object.__getattribute__(obj, "__dict__").update(attrs)
    for descriptor, value in zip(descriptors, values, strict=True):
        descriptor.__set__(obj, value)


def sequence_code(code: RebuildCode, kind: type, parts: list[Recipe]) -> str:
    items = items_code(code, parts)
    if kind is list:
        return f"[{items}]"
    if kind is tuple:
        return f"({items})"
    return f"{code.const(kind)}([{items}])"


def mapping_code(code: RebuildCode, kind: type, parts: dict[Any, Recipe]) -> str:
    pairs = "".join(f"({code.const(k)}, {code.value(p)}), " for k, p in parts.items())
    return f"{code.const(kind)}([{pairs}])"


def construct_recipe(cls: type, positional: list[Recipe], keywords: dict[str, Recipe]) -> Recipe:
    def construct(outs, L, G):
        args = [p(outs, L, G) for p in positional]
        kwargs = {k: p(outs, L, G) for k, p in keywords.items()}
        # The class's own __init__/__post_init__ run as plain Python: tracing them
        # as frames of their own would only find a constructor (and cost a guard
        # check, or a break, on every call).
        previous = fh.set_eval_frame(None)
        try:
            return cls(*args, **kwargs)
        finally:
            fh.set_eval_frame(previous)

    def emit(code: RebuildCode) -> str:
        args = code.temp(f"[{items_code(code, positional)}]")
        kwargs = code.temp(f"{{{entries_code(code, keywords)}}}")
        setting, made = code.const(fh.set_eval_frame), code.name()
        previous = code.temp(f"{setting}(None)")
        code.line(f"try: {made} = {code.const(cls)}(*{args}, **{kwargs})")
        code.line(f"finally: {setting}({previous})")
        return made

    return emits(construct, emit)
