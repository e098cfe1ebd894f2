"""Python constants known at trace time: numbers, strings, None, dtypes, devices..."""

from __future__ import annotations

import enum
import re
import types
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
from torch.torch_version import TorchVersion

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import GuardKind
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard, wrap_rule

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator

CONSTANT_TYPES = (
    int, float, complex, bool, str, bytes, type(None), type(Ellipsis), slice, range,
    torch.dtype, torch.device, torch.memory_format, torch.layout, torch.finfo, torch.iinfo,
)  # fmt: skip

# Methods of constants that are pure and safe to run at trace time, by the constant's type.
# str and bytes are immutable and their methods read nothing else: every public one is pure
# (isalnum, split, join, format, upper, replace, strip...).
PURE_METHODS = {
    str: {name for name in dir(str) if not name.startswith("_")},
    bytes: {name for name in dir(bytes) if not name.startswith("_")},
    int: {"bit_length", "bit_count", "to_bytes", "__index__", "conjugate", "as_integer_ratio"},
    float: {"is_integer", "conjugate", "hex", "as_integer_ratio"},
    complex: {"conjugate"},
    # sets built by the trace (BUILD_SET): mutating them changes nothing outside it
    set: {"add", "update", "discard", "remove", "clear", "union", "intersection",
          "difference", "issubset", "issuperset", "isdisjoint", "copy"},
    # immutable: every public method reads only the frozenset and its (constant) arguments
    frozenset: {name for name in dir(frozenset) if not name.startswith("_")},
    tuple: {"count", "index"},
    # compiled regular expressions and their matches are immutable (not sub(): its `repl`
    # may be a function, which would run untraced)
    re.Pattern: {"match", "fullmatch", "search", "findall", "split"},
    re.Match: {"group", "groups", "groupdict", "span", "start", "end", "expand"},
}  # fmt: skip


def is_constant_value(value: Any) -> bool:
    """Immutable values compared by equality (exact types: an IntEnum is not an int here)."""
    if type(value) in (tuple, frozenset):
        return all(is_constant_value(v) for v in value)
    return type(value) in CONSTANT_TYPES


_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
# The tracker of a symbolic value, registered by sym_values.py (which imports this module).
_SYMBOLIC_TRACKER: list[Callable[[Any], VariableTracker]] = []


def register_symbolic_tracker(make: Callable[[Any], VariableTracker]) -> None:
    _SYMBOLIC_TRACKER[:] = [make]


# Subclasses of ConstantVariable for constants of a kind with their own attribute reads and
# subscripts (typing objects: typing_values.py), keyed by a predicate on the value; any
# ConstantVariable(value) made of such a value is one of them.
_CONSTANT_KINDS: list[tuple[Callable[[Any], bool], type]] = []


def register_constant_kind(when: Callable[[Any], bool], kind: type) -> None:
    _CONSTANT_KINDS.append((when, kind))


# The tracker of a method's list result (str.split gives a list the code may mutate or
# iterate), registered by builtins.py (which imports this module).
_RESULT_TRACKER: list[Callable[[Any], VariableTracker]] = []


def register_result_tracker(make: Callable[[Any], VariableTracker]) -> None:
    _RESULT_TRACKER[:] = [make]


class ConstantVariable(VariableTracker):
    def __new__(cls, value: Any = None, *args: Any, **kwargs: Any) -> Any:
        # A symbolic size or int computed at trace time (`len(x)`, `x.numel()`, torch.numel)
        # is not a constant: whoever wraps one gets a SymNodeVariable (sym_values.py).
        if isinstance(value, _SYM_TYPES) and value.node.is_symbolic():
            return _SYMBOLIC_TRACKER[0](value)
        if cls is ConstantVariable:
            for when, kind in _CONSTANT_KINDS:
                if when(value):
                    return super().__new__(kind)
        return super().__new__(cls)

    def __init__(self, value: Any, *, source: Source | None = None) -> None:
        super().__init__(source=source)
        if isinstance(value, _SYM_TYPES):  # a SymInt whose expression is a number
            value = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}[type(value)](
                value
            )
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self) -> Any:
        return self.value

    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        try:
            attribute = getattr(self.value, name)
        except AttributeError:
            raise Unsupported(f"{type(self.value).__name__} has no attribute {name!r}") from None
        if callable(attribute):
            return ConstantMethodVariable(self.value, name)
        if is_constant_value(attribute) or isinstance(attribute, torch.dtype | torch.device):
            return ConstantVariable(attribute)
        raise Unsupported(f"attribute {name!r} of a {type(self.value).__name__}")

    def unpack(self, tx: Translator) -> list[VariableTracker]:
        if isinstance(self.value, str | bytes | range | tuple | frozenset | set):
            return [ConstantVariable(v) for v in self.value]
        raise Unsupported(f"iterating over {type(self.value).__name__}")

    def __repr__(self) -> str:
        return f"ConstantVariable({self.value!r})"


def _is_pure_method(cls: type, name: str) -> bool:
    """`name` is a pure method of `cls`: listed for it, or for the base it inherits it from
    unchanged (torch.__version__'s str methods)."""
    base = next((b for b in cls.__mro__ if b in PURE_METHODS), None)
    return (
        base is not None
        and name in PURE_METHODS[base]
        and getattr(cls, name, None) is getattr(base, name, None)
    )


class ConstantMethodVariable(VariableTracker):
    """A bound method of a constant, e.g. "{}x".format."""

    def __init__(self, owner: Any, name: str) -> None:
        super().__init__()
        self.owner = owner
        self.name = name

    def call_function(self, tx, args, kwargs):
        if not _is_pure_method(type(self.owner), self.name) and not self.name.startswith("__"):
            raise Unsupported(f"method {type(self.owner).__name__}.{self.name}")
        try:
            a = [x.as_python_constant() for x in args]
            k = {n: x.as_python_constant() for n, x in kwargs.items()}
        except Unsupported:
            raise Unsupported(f"{type(self.owner).__name__}.{self.name} on non-constants") from None
        try:
            result = getattr(self.owner, self.name)(*a, **k)
        except Exception as exc:  # "abc".index("z"): raised as eager would (args are guarded)
            raise TracedException(type(exc), *exc.args) from None
        if (type(result) is list or isinstance(result, Iterator)) and _RESULT_TRACKER:
            return _RESULT_TRACKER[0](result)
        return ConstantVariable(result)


# ---- wrapping real values (variables/builder.py) ----------------------------------------
def _is_constant(tx: Translator, value: Any, source: Source | None) -> bool:
    # a tuple read from the frame is a TupleVariable (lists.py): its length is guarded and
    # each entry by value when the trace reads it, not the whole tuple at once
    return is_constant_value(value) and not (type(value) is tuple and source is not None)


@wrap_rule("constant", when=_is_constant)
def _wrap_constant(tx: Translator, value: Any, source: Source | None) -> VariableTracker:
    if source is not None:
        guard(tx, source, GuardKind.EQUALS_MATCH, value)
    return ConstantVariable(value, source=source)


@wrap_rule("code", types=types.CodeType)
def _wrap_code(tx: Translator, value: types.CodeType, source: Source | None) -> VariableTracker:
    if source is not None:
        guard(tx, source, GuardKind.ID_MATCH, value)
    return ConstantVariable(value, source=source)


# Immutable objects that are constants of the trace but not EQUALS_MATCH values: guarded by
# identity. torch.__version__ (a str that compares as a version) and compiled regular
# expressions (their match results are constants too: PURE_METHODS).
_IDENTITY_CONSTANTS = (TorchVersion, re.Pattern)


@wrap_rule("identity_constant", types=_IDENTITY_CONSTANTS, exact=True)
def _wrap_identity_constant(tx: Translator, value: Any, source: Source | None) -> VariableTracker:
    if source is not None:
        guard(tx, source, GuardKind.ID_MATCH, value)
    return ConstantVariable(value, source=source)


def is_enum_member(value: Any) -> bool:
    """A member of a Python Enum, or of a C++ enum bound by pybind11 (SDPBackend.MATH,
    torch._C._autograd.DeviceType...: one object per member, listed in `__members__`)."""
    if isinstance(value, enum.Enum):
        return True
    cls = type(value)
    if type(cls).__name__ != "pybind11_type" or "__members__" not in cls.__dict__:
        return False
    members = getattr(cls, "__members__", None)
    return isinstance(members, dict) and any(m is value for m in members.values())


@wrap_rule("enum", when=lambda tx, value, source: is_enum_member(value))
def _wrap_enum(tx: Translator, value: Any, source: Source | None) -> VariableTracker:
    # Enum members are singletons: identity is the right guard, the value is constant.
    if source is not None:
        guard(tx, source, GuardKind.ID_MATCH, value)
    return ConstantVariable(value, source=source)
