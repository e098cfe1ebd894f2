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
from ember_bytecode_tracer.variables.builtins import rule
from ember_bytecode_tracer.variables.constant import ConstantVariable, register_constant_kind
from ember_bytecode_tracer.variables.dicts import ConstDictVariable
from ember_bytecode_tracer.variables.functions import UserFunctionVariable
from ember_bytecode_tracer.variables.objects import TypeVariable

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


def _annotations_of(owner: Any) -> list[dict]:
    """The annotation dicts get_type_hints reads: a class's along its MRO, or a function's."""
    if isinstance(owner, type):
        return [vars(base).get("__annotations__", {}) for base in owner.__mro__]
    return [getattr(owner, "__annotations__", {})]


@rule(typing.get_type_hints)
def _get_type_hints(tx: Translator, args: list, kwargs: dict) -> VariableTracker:
    """`typing.get_type_hints(cls_or_fn)` of a class or function the trace guards by
    identity: answered now when every annotation is already a type (a string or ForwardRef
    would be evaluated in module globals the trace does not guard)."""
    if len(args) != 1 or set(kwargs) - {"include_extras"}:
        raise Unsupported("typing.get_type_hints() with namespaces")
    (target,) = args
    if isinstance(target, TypeVariable) and target.source is not None:
        owner: Any = target.cls
    elif isinstance(target, UserFunctionVariable) and target.source is not None:
        owner = target.fn
    else:
        raise Unsupported(f"typing.get_type_hints() of {target}")
    extras = kwargs["include_extras"].as_python_constant() if kwargs else False
    if any(
        isinstance(hint, str | typing.ForwardRef)
        for annotations in _annotations_of(owner)
        for hint in annotations.values()
    ):
        raise Unsupported("typing.get_type_hints() of string annotations")
    try:
        hints = typing.get_type_hints(owner, include_extras=extras)
    except Exception as exc:  # a bad annotation: as eager raises it
        raise TracedException(type(exc), *exc.args) from None
    if not all(isinstance(h, type) or is_typing_value(h) or h is None for h in hints.values()):
        raise Unsupported("typing.get_type_hints() with annotations that are not types")
    return ConstDictVariable({name: tx.wrap(hint, None) for name, hint in hints.items()})


__all__ = ["TypingVariable", "is_typing_value"]
