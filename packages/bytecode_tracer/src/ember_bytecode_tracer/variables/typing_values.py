"""Objects of the `typing` module (`List[int]`, `Optional[str]`, `Callable[[int], int]`,
`TypeVar`s, `int | None`) as constants of the trace.

They are immutable descriptions of types: reading one's attributes (`__origin__`, `__args__`)
or subscripting one (`List[int]`, a cached, pure constructor) is answered now, and `is` on
two of them, or on one and a class, is known now, however the trace reached them (a type
hint read from a dataclass's fields, `typing.get_args` of one, a subscript in the traced
code). Running typing's own Python code instead would trace its internals (`sys._getframe`,
its lru caches, identity tests on values without a source). One read through a source is
guarded by identity, as a class is.
"""

from __future__ import annotations

import types
import typing
from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import GuardKind
from ember_bytecode_tracer.variables.builder import guard, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable, register_constant_kind

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator, VariableTracker

# What the objects that describe types are instances of: typing's base of its aliases,
# special forms and type variables, and the C `list[int]` / `int | None` of `types`
# (`collections.abc.Callable[...]` is a GenericAlias subclass).
_TYPING_BASES = tuple(
    base
    for base in (
        getattr(typing, "_Final", None),  # typing's private base (CPython 3.8-3.13)
        types.GenericAlias,
        types.UnionType,
        typing.TypeVar,
        typing.ParamSpec,
    )
    if isinstance(base, type)
)


def is_typing_value(value: Any) -> bool:
    """An instance (never a class) of a typing class: `List`, `List[int]`, `Optional[T]`,
    `TypeVar("T")`, `Any`'s special forms, `list[int]`, `int | None`."""
    if isinstance(value, type | typing.ForwardRef):
        return False  # a ForwardRef caches what it evaluates to: not immutable
    return isinstance(value, _TYPING_BASES)


class TypingVariable(ConstantVariable):
    """A typing object: a constant whose attributes and subscripts are read now."""

    def var_getattr(self, tx: Translator, name: str) -> VariableTracker:
        try:
            attribute = getattr(self.value, name)
        except AttributeError as exc:
            raise TracedException(AttributeError, *exc.args) from None
        return tx.wrap(attribute, None)

    def getitem(self, tx: Translator, key: VariableTracker) -> VariableTracker:
        try:
            index = key.as_python_constant()
        except Unsupported:
            raise Unsupported(f"subscripting {self.value!r} with {key}") from None
        try:
            result = self.value[index]
        except Exception as exc:  # List[1, 2]: raised as eager raises it
            raise TracedException(type(exc), *exc.args) from None
        return tx.wrap(result, None)

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self.getitem(tx, args[0])
        return super().call_method(tx, name, args, kwargs)

    def __repr__(self) -> str:
        return f"TypingVariable({self.value!r})"


register_constant_kind(is_typing_value, TypingVariable)


@wrap_rule("typing", when=lambda tx, value, source: is_typing_value(value))
def _wrap_typing(tx: Translator, value: Any, source: Source | None) -> VariableTracker:
    if source is not None:
        guard(tx, source, GuardKind.ID_MATCH, value)
    return TypingVariable(value, source=source)


__all__ = ["TypingVariable", "is_typing_value"]
