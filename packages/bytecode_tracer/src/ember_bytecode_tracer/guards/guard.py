"""Guard kinds and the Guard record: one fact a trace depended on, stated over a source."""

from __future__ import annotations

import enum
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ember_bytecode_tracer.guards.constants import check_constant, typed_key
from ember_bytecode_tracer.guards.sources import Source
from ember_bytecode_tracer.guards.tensor_spec import TensorSpec
from ember_bytecode_tracer.guards.weak_pins import is_weak, pin, unpin


class GuardKind(enum.Enum):
    """What a guard checks about the value `v` its source reaches; `expected` per kind."""

    TYPE_MATCH = "type_match"  # type(v) is expected (a type)
    ID_MATCH = "id_match"  # v is expected (held weakly where it may die: weak_pins.py)
    EQUALS_MATCH = "equals_match"  # same type at every level and v == expected (a constant)
    NONE_MATCH = "none_match"  # v is None (expected: None)
    NOT_NONE = "not_none"  # v is not None (expected: None)
    TENSOR_MATCH = "tensor_match"  # expected: TensorSpec (exact class, dtype, ..., strides)
    LEN_MATCH = "len_match"  # expected: (type, n): type(v) is type and len(v) == n
    DICT_KEYS = "dict_keys"  # expected: (type, keys): type(v) is type and tuple(v) == keys
    MODULE_TRAINING = "module_training"  # v.training is expected (a bool)
    TENSOR_ALIASING = "tensor_aliasing"  # v is the value of expected (a Source)
    NO_TENSOR_ALIASING = "no_tensor_aliasing"  # v and expected (Sources) are distinct objects
    ABSENT = "absent"  # the source's last attribute/key is missing (expected: None)
    # expected: (sources, order): a set built by adding the values at `sources` in turn
    # (v is the first) iterates as `sources[i] for i in order` (objects hashed by address)
    SET_ORDER = "set_order"


def _expect_type(guard: Guard) -> None:
    if not isinstance(guard.expected, type):
        raise TypeError(f"{guard.kind.name} expects a type, got {guard.expected!r}")


def _expect_none(guard: Guard) -> None:
    if guard.expected is not None:
        raise TypeError(f"{guard.kind.name} takes no expected value, got {guard.expected!r}")


def _expect_spec(guard: Guard) -> None:
    if not isinstance(guard.expected, TensorSpec):
        raise TypeError(f"TENSOR_MATCH expects a TensorSpec, got {guard.expected!r}")


def _is_pair(value: Any, first: type, second: type) -> bool:
    return (
        type(value) is tuple
        and len(value) == 2
        and isinstance(value[0], first)
        and type(value[1]) is second
    )


def _expect_typed_count(guard: Guard) -> None:
    if not _is_pair(guard.expected, type, int):
        raise TypeError(f"LEN_MATCH expects (type, length), got {guard.expected!r}")


def _expect_typed_keys(guard: Guard) -> None:
    mappings = dict | set | types.MappingProxyType
    if not (_is_pair(guard.expected, type, tuple) and issubclass(guard.expected[0], mappings)):
        raise TypeError(
            "DICT_KEYS expects (dict, set or mappingproxy type, tuple of keys), "
            f"got {guard.expected!r}"
        )
    for key in guard.expected[1]:
        try:
            check_constant(key)
        except TypeError:
            raise TypeError(
                f"DICT_KEYS can only guard constant keys (str, int, ...), got {key!r}; "
                f"guard such a dict through its items' sources instead"
            ) from None


def _expect_bool(guard: Guard) -> None:
    if type(guard.expected) is not bool:
        raise TypeError(f"MODULE_TRAINING expects a bool, got {guard.expected!r}")


def _expect_source(guard: Guard) -> None:
    if not isinstance(guard.expected, Source):
        raise TypeError(f"TENSOR_ALIASING expects the other Source, got {guard.expected!r}")


def _expect_sources(guard: Guard) -> None:
    others = guard.expected
    if not (type(others) is tuple and others and all(isinstance(s, Source) for s in others)):
        raise TypeError(f"NO_TENSOR_ALIASING expects a tuple of Sources, got {others!r}")


def _expect_set_order(guard: Guard) -> None:
    expected = guard.expected
    if not (
        _is_pair(expected, tuple, tuple)
        and expected[0]
        and all(isinstance(s, Source) for s in expected[0])
        and expected[0][0] == guard.source
        and all(type(i) is int for i in expected[1])
    ):
        raise TypeError(f"SET_ORDER expects (sources, iteration order), got {expected!r}")


def _expect_absent(guard: Guard) -> None:
    _expect_none(guard)
    if type(guard.source).absent is Source.absent:
        raise TypeError(
            f"ABSENT needs an attribute, item, local or global source, got {guard.source}"
        )


def _expect_constant(guard: Guard) -> None:
    check_constant(guard.expected)


_VALIDATE: dict[GuardKind, Callable[[Guard], None]] = {
    GuardKind.TYPE_MATCH: _expect_type,
    GuardKind.ID_MATCH: lambda guard: None,
    GuardKind.EQUALS_MATCH: _expect_constant,
    GuardKind.NONE_MATCH: _expect_none,
    GuardKind.NOT_NONE: _expect_none,
    GuardKind.TENSOR_MATCH: _expect_spec,
    GuardKind.LEN_MATCH: _expect_typed_count,
    GuardKind.DICT_KEYS: _expect_typed_keys,
    GuardKind.MODULE_TRAINING: _expect_bool,
    GuardKind.TENSOR_ALIASING: _expect_source,
    GuardKind.NO_TENSOR_ALIASING: _expect_sources,
    GuardKind.ABSENT: _expect_absent,
    GuardKind.SET_ORDER: _expect_set_order,
}

# The expected value a kind takes, derived from the live value the trace saw.
_FROM_VALUE: dict[GuardKind, Callable[[Any], Any]] = {
    GuardKind.TYPE_MATCH: type,
    GuardKind.ID_MATCH: lambda v: v,
    GuardKind.EQUALS_MATCH: lambda v: v,
    GuardKind.NONE_MATCH: lambda v: None,
    GuardKind.NOT_NONE: lambda v: None,
    GuardKind.TENSOR_MATCH: TensorSpec.of,
    GuardKind.LEN_MATCH: lambda v: (type(v), len(v)),
    GuardKind.DICT_KEYS: lambda v: (type(v), tuple(v)),
    GuardKind.MODULE_TRAINING: lambda v: bool(v.training),
    GuardKind.ABSENT: lambda v: None,
}


@dataclass(frozen=True, eq=False)
class Guard:
    """`source` satisfies `kind` with `expected`. Equal guards (ignoring user_location)
    hash alike, so sets of guards deduplicate; ID_MATCH compares its object by identity
    and EQUALS_MATCH its constant type-strictly (1, True and 1.0 are three guards)."""

    source: Source
    kind: GuardKind
    expected: Any = None
    user_location: str | None = None  # "file.py:12" where the trace read the value

    def __post_init__(self) -> None:
        if self.kind in _PINNING:  # the id is the key's: stable even after a weak one died
            object.__setattr__(self, "_pinned_id", id(self.expected))
        if not isinstance(self.source, Source):
            raise TypeError(f"Guard.source must be a Source, got {self.source!r}")
        if not isinstance(self.kind, GuardKind):
            raise TypeError(f"Guard.kind must be a GuardKind, got {self.kind!r}")
        _VALIDATE[self.kind](self)

    @classmethod
    def from_value(
        cls, source: Source, kind: GuardKind, value: Any, user_location: str | None = None
    ) -> Guard:
        """The guard of `kind` that `value` (what the trace saw at `source`) satisfies."""
        if kind not in _FROM_VALUE:
            raise ValueError(f"{kind.name} relates sources; build it with Guard(...)")
        if kind is GuardKind.TENSOR_MATCH and not isinstance(value, torch.Tensor):
            raise TypeError(f"TENSOR_MATCH on {source} needs a tensor, got {type(value)}")
        return cls(source, kind, _FROM_VALUE[kind](value), user_location)

    def key(self) -> tuple[Any, ...]:
        """What makes two guards the same check."""
        kind = self.kind
        if kind in _PINNING:
            expected: Any = self._pinned_id  # taken while the object was alive
        elif kind is GuardKind.EQUALS_MATCH:
            expected = typed_key(self.expected)
        elif kind is GuardKind.DICT_KEYS:
            expected = (self.expected[0], typed_key(self.expected[1]))
        else:
            expected = self.expected
        return (self.source, kind, expected)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Guard):
            return NotImplemented
        # a guard whose object died is not the guard of a new object that took its id
        same_object = self.kind not in _PINNING or self.expected is other.expected
        return self.key() == other.key() and same_object

    def __hash__(self) -> int:
        return hash(self.key())

    def weak_ref(self) -> Any:
        """The weak reference an ID_MATCH/TYPE_MATCH guard holds its object by, or None
        where it holds it strongly (weak_pins.py)."""
        held = self.__dict__.get("_held")
        return held if is_weak(held) else None

    def sources(self) -> tuple[Source, ...]:
        """Every source this guard reads (its own first)."""
        if self.kind is GuardKind.TENSOR_ALIASING:
            return (self.source, self.expected)
        if self.kind is GuardKind.NO_TENSOR_ALIASING:
            return (self.source, *self.expected)
        if self.kind is GuardKind.SET_ORDER:
            return tuple(dict.fromkeys(self.expected[0]))
        return (self.source,)

    def describe(self) -> str:
        """Human text for the fact, e.g. "L['x'] is a tensor float32[2, 3] ... cpu ..."."""
        return DESCRIBERS[self.kind](self)

    def __str__(self) -> str:
        where = f"  # {self.user_location}" if self.user_location else ""
        return f"{self.describe()}{where}"


def _read_expected(guard: Guard) -> Any:
    return unpin(guard.__dict__["_held"])


def _write_expected(guard: Guard, value: Any) -> None:
    # the dataclass __init__ sets `expected` through here (kind is set before it)
    held = pin(value) if guard.__dict__.get("kind") in _PINNING else value
    guard.__dict__["_held"] = held


# `expected` of an ID_MATCH/TYPE_MATCH guard holds an object that may die weakly
# (weak_pins.py): the dataclass field is stored through this property.
_PINNING = (GuardKind.ID_MATCH, GuardKind.TYPE_MATCH)
Guard.expected = property(_read_expected, _write_expected)  # type: ignore[assignment]


#: GuardKind -> the human text of a guard of that kind. Filled by guards/describe.py, which
#: the package imports, so the wording lives beside the failure explanations and this
#: module does not import it back.
DESCRIBERS: dict[GuardKind, Callable[[Guard], str]] = {}
