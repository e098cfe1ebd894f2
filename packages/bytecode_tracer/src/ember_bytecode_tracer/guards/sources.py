"""Sources: how to reach a value from a frame's locals `L`, globals `G` or builtins `B`.

A source is a frozen, hashable chain of steps ("L['self'].layers[0].weight"). The tracer
attaches one to every value it read from outside the trace, and guards are stated over
sources. Each step knows two things: the Python expression that performs it on a base
expression (`access`, used both for display and for generated guard code) and how to
perform it on a live base value (`step`, used by the slow paths).
"""

from __future__ import annotations

import builtins
import keyword
import math
from dataclasses import dataclass, field
from typing import Any

import torch

# The keys an ItemSource may hold: their repr() is a literal that evaluates back to them.
_LITERAL_KEY_TYPES = (int, str, bytes, bool, type(None))


class Source:
    """Base of all sources. Subclasses are frozen dataclasses (hashable, comparable)."""

    # The source this one steps from; None for a root (L, G, B, torch state). Declared,
    # not assigned: the step classes hold it as their first dataclass field.
    base: Source | None

    def access(self, base_expr: str) -> str:
        """The expression for this step applied to `base_expr` (ignored by roots)."""
        raise NotImplementedError

    def absent(self, base_expr: str) -> str:
        """An expression that is true when this step's key/attribute is missing."""
        raise TypeError(f"{type(self).__name__} has no notion of a missing value")

    def step(self, base_value: Any, scope: Scope) -> Any:
        """Perform this step on a live base value (roots read `scope` instead)."""
        raise NotImplementedError

    def expr(self) -> str:
        """The Python expression reaching the value, given `L`, `G` and `B`."""
        base = self.base
        return self.access(base.expr() if base is not None else "")

    def root(self) -> Source:
        source = self
        while source.base is not None:
            source = source.base
        return source

    def is_local(self) -> bool:
        """Rooted in the frame's locals (arguments and closure variables)."""
        return isinstance(self.root(), LocalSource)

    def depth(self) -> int:
        base = self.base
        return 0 if base is None else base.depth() + 1

    def get(
        self,
        f_locals: dict[str, Any],
        f_globals: dict[str, Any],
        f_builtins: dict[str, Any] | None = None,
    ) -> Any:
        """The value this source reaches in a frame (raises like the expression would)."""
        scope = Scope(
            f_locals, f_globals, builtins_of(f_globals) if f_builtins is None else f_builtins
        )
        return self._get(scope)

    def _get(self, scope: Scope) -> Any:
        base = self.base
        return self.step(None if base is None else base._get(scope), scope)

    def shown(self) -> str:
        """The source as users read it (guards, recompile reasons); expr() is for code."""
        base = self.base
        return self.access(base.shown() if base is not None else "")

    def __str__(self) -> str:
        return self.shown()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}  # hashes are per process


def source_class(cls: type) -> type:
    """A frozen dataclass of a source whose hash is computed once: guards, trackers and
    their tables hash sources over and over, and the fields' hash walks the whole chain
    (``L['self'].encoder.layer[3].attention...``), over a million times in a BERT trace."""
    cls = dataclass(frozen=True)(cls)
    fields_hash = cls.__hash__

    def __hash__(self: Source) -> int:
        try:
            return self.__dict__["_hash"]
        except KeyError:
            value = fields_hash(self)
            object.__setattr__(self, "_hash", value)
            return value

    cls.__hash__ = __hash__
    return cls


class RootSource(Source):
    """A source read straight from the frame's namespaces (no base)."""

    @property
    def base(self) -> None:  # type: ignore[override]
        return None


@dataclass(frozen=True)
class Scope:
    """The three namespaces a frame's sources are rooted in."""

    L: dict[str, Any]
    G: dict[str, Any]
    B: dict[str, Any]


def builtins_of(f_globals: dict[str, Any]) -> dict[str, Any]:
    """The builtins a function defined over `f_globals` sees (CPython's own rule)."""
    found = f_globals.get("__builtins__", builtins)
    return found.__dict__ if isinstance(found, type(builtins)) else found


#: `L[FREE_CELL + name]`: the cell object of the compiled frame's free variable `name`. The
#: runner alone is handed it (codegen loads it with LOAD_CLOSURE) to replay a write of the
#: variable; guards never read it (the frame's locals hold the cell's contents).
FREE_CELL = "___ember_cell_"


def is_frame_cell(source: Any) -> bool:
    return isinstance(source, LocalSource) and source.name.startswith(FREE_CELL)


@source_class
class LocalSource(RootSource):
    """`L['name']`: an argument or closure variable of the frame. `shown_as` replaces it in
    text for users where the name is the tracer's own (a resume function's saved stack)."""

    name: str
    shown_as: str | None = field(default=None, compare=False)

    def access(self, base_expr: str) -> str:
        return f"L[{self.name!r}]"

    def shown(self) -> str:
        return self.shown_as or self.access("")

    def absent(self, base_expr: str) -> str:
        return f"{self.name!r} not in L"

    def step(self, base_value: Any, scope: Scope) -> Any:
        return scope.L[self.name]


@source_class
class GlobalSource(RootSource):
    """`G['name']`: a global of the frame's module."""

    name: str

    def access(self, base_expr: str) -> str:
        return f"G[{self.name!r}]"

    def absent(self, base_expr: str) -> str:
        return f"{self.name!r} not in G"

    def step(self, base_value: Any, scope: Scope) -> Any:
        return scope.G[self.name]


@source_class
class BuiltinSource(RootSource):
    """`B['name']`: a builtin as the frame sees it (pair with ABSENT on GlobalSource(name))."""

    name: str

    def access(self, base_expr: str) -> str:
        return f"B[{self.name!r}]"

    def absent(self, base_expr: str) -> str:
        return f"{self.name!r} not in B"

    def step(self, base_value: Any, scope: Scope) -> Any:
        return scope.B[self.name]


# Thread-global torch state a trace can depend on, read through public functions.
TORCH_STATE: dict[str, str] = {
    "grad_enabled": "is_grad_enabled",
    "inference_mode": "is_inference_mode_enabled",
    "default_dtype": "get_default_dtype",
    "deterministic_algorithms": "are_deterministic_algorithms_enabled",
    # TF32 for float32 matmuls: what a backend's GPU matmul code is generated for
    "cublas_allow_tf32": "_C._get_cublas_allow_tf32",
    # Autocast a frame is called under changes the dtypes its ops produce.
    "any_autocast": "_C._is_any_autocast_enabled",
    "autocast_enabled": "is_autocast_enabled",  # with the device type as `arg`
    "autocast_dtype": "get_autocast_dtype",  # with the device type as `arg`
    # the default process group a traced collective with group=None runs over (it raises,
    # making the guard false, once torch.distributed is shut down)
    "default_process_group": "distributed.distributed_c10d._get_default_group",
}


@source_class
class TorchStateSource(RootSource):
    """`torch.is_grad_enabled()` and friends: global state a graph was traced under."""

    name: str
    arg: str | None = None  # a literal argument of the call (a device type)

    def __post_init__(self) -> None:
        if self.name not in TORCH_STATE and torch_state_query(self.name) is None:
            raise ValueError(
                f"unknown torch state {self.name!r}; known: {', '.join(sorted(TORCH_STATE))}"
                " or a dotted path of a function under torch"
            )

    def access(self, base_expr: str) -> str:
        arg = "" if self.arg is None else repr(self.arg)
        return f"torch.{torch_state_path(self.name)}({arg})"

    def step(self, base_value: Any, scope: Scope) -> Any:
        fn = torch_state_query(self.name)
        return fn() if self.arg is None else fn(self.arg)


def torch_state_path(name: str) -> str:
    """The dotted path under `torch` of a state query: a TORCH_STATE name, or the path itself
    (a query the trace read, e.g. "_C._autograd._profiler_enabled")."""
    return TORCH_STATE.get(name, name)


def torch_state_query(name: str) -> Any:
    """The function a TorchStateSource calls, or None where the path reaches nothing."""
    fn: Any = torch
    for part in torch_state_path(name).split("."):
        fn = getattr(fn, part, None)
    return fn if callable(fn) else None


@source_class
class AttrSource(Source):
    """`base.attr` (through getattr() when `attr` is not a plain identifier)."""

    base: Source
    attr: str

    def __post_init__(self) -> None:
        if not isinstance(self.attr, str):
            raise TypeError(f"AttrSource attr must be a str, got {type(self.attr).__name__}")

    def access(self, base_expr: str) -> str:
        if self.attr.isidentifier() and not keyword.iskeyword(self.attr):
            return f"{base_expr}.{self.attr}"
        return f"getattr({base_expr}, {self.attr!r})"

    def absent(self, base_expr: str) -> str:
        return f"not hasattr({base_expr}, {self.attr!r})"

    def step(self, base_value: Any, scope: Scope) -> Any:
        return getattr(base_value, self.attr)


@source_class
class GenericAttrSource(Source):
    """`object.__getattribute__(base, attr)`: the attribute as object's own lookup finds it
    (type's data descriptors, the instance dict, the class), which is what a class's
    Python `__getattribute__` reads through `super()` (transformers' configs). Guards read
    the value the program read, without running the hook on every guard call."""

    base: Source
    attr: str

    def access(self, base_expr: str) -> str:
        return f"object.__getattribute__({base_expr}, {self.attr!r})"

    def step(self, base_value: Any, scope: Scope) -> Any:
        return object.__getattribute__(base_value, self.attr)


@source_class
class ItemSource(Source):
    """`base[key]` for a constant key: list/tuple index or dict key."""

    base: Source
    key: Any

    def __post_init__(self) -> None:
        if not _is_literal_key(self.key):
            raise TypeError(
                f"ItemSource key must be an int, str, bytes, bool, None, finite float or a "
                f"tuple of those, got {self.key!r}; reach other keys through another source"
            )

    def access(self, base_expr: str) -> str:
        return f"{base_expr}[{self.key!r}]"

    def absent(self, base_expr: str) -> str:
        return f"{self.key!r} not in {base_expr}"

    def step(self, base_value: Any, scope: Scope) -> Any:
        return base_value[self.key]


@source_class
class DictKeysSource(Source):
    """`list(base)`: a dict's keys in order, for keys that have no literal (tensors,
    dtypes). A key is then `ItemSource(DictKeysSource(d), i)`, guarded by identity or
    value, and its value `ItemSource(DictValuesSource(d), i)`: position plus a guard on the
    key at that position identify the entry soundly."""

    base: Source

    def access(self, base_expr: str) -> str:
        return f"list({base_expr})"

    def step(self, base_value: Any, scope: Scope) -> Any:
        return list(base_value)


@source_class
class DictValuesSource(Source):
    """`list(base.values())`: a dict's values in key order (see DictKeysSource)."""

    base: Source

    def access(self, base_expr: str) -> str:
        return f"list({base_expr}.values())"

    def step(self, base_value: Any, scope: Scope) -> Any:
        return list(base_value.values())


@source_class
class MethodCallSource(Source):
    """`base.method()`: a no-argument method whose answer is the value read, without
    changing the object: `__reduce__` of a C iterator (a range or str iterator,
    itertools.count) pickles its state `(callable, args[, position])` without advancing it;
    `get` of a `contextvars.ContextVar` reads its value in the current context."""

    base: Source
    method: str

    def access(self, base_expr: str) -> str:
        return f"{base_expr}.{self.method}()"

    def step(self, base_value: Any, scope: Scope) -> Any:
        return getattr(base_value, self.method)()


def dict_item_source(base: Source, key: Any, index: int) -> Source:
    """The source of `d[key]` for the entry at position `index` of the dict at `base`:
    by key when it has a literal, else by position (the caller guards the keys)."""
    if _is_literal_key(key):
        return ItemSource(base, key)
    return ItemSource(DictValuesSource(base), index)


@source_class
class TypeSource(Source):
    """`type(base)`."""

    base: Source

    def access(self, base_expr: str) -> str:
        return f"type({base_expr})"

    def step(self, base_value: Any, scope: Scope) -> Any:
        return type(base_value)


def _is_literal_key(key: Any) -> bool:
    if type(key) is float:
        return math.isfinite(key)
    if type(key) is tuple:
        return all(_is_literal_key(k) for k in key)
    return type(key) in _LITERAL_KEY_TYPES
