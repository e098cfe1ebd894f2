"""Dataclasses and namedtuples constructed during a trace.

The object is not built at trace time: the runner builds it by calling the class with the
rebuilt arguments, exactly as eager code would (a `default_factory` field the call left out
is called in the trace and passed in, so the factory runs once). The trace may read its
fields where they cannot differ from the arguments (namedtuples; dataclasses without
__post_init__), write them with object.__setattr__ (set again on the rebuilt object), and
use a frozen dataclass of constants as a value (a constant; a dict key by value, see
`ValueKey`); anything else on the object is a graph break, after which it is a real object.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import inspect
import types
from typing import Any

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, GenericAttrSource, GuardKind, ItemSource
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard, wrap_rule
from ember_bytecode_tracer.variables.builtins import RULES
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.dicts import TRACKER_KEYS, ConstDictVariable, ValueKey
from ember_bytecode_tracer.variables.functions import UserFunctionVariable, UserMethodVariable
from ember_bytecode_tracer.variables.lists import (
    BoundMethodOfTracker,
    StructSequenceVariable,
    is_struct_sequence,
)
from ember_bytecode_tracer.variables.object_identity import note_object
from ember_bytecode_tracer.variables.objects import TypeVariable, constructor


def is_namedtuple_class(cls: type) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


def is_constructible(cls: type) -> bool:
    return is_namedtuple_class(cls) or dataclasses.is_dataclass(cls)


class ConstructedObjectVariable(VariableTracker):
    def __init__(self, cls: type, args: list[VariableTracker], kwargs: dict[str, VariableTracker]):
        super().__init__()
        self.cls = cls
        self.args = args
        self.kwargs = kwargs
        # attributes set on it in the trace (a namedtuple subclass's instance dict; a
        # dataclass's fields written with object.__setattr__)
        self.attrs: dict[str, VariableTracker] = {}
        self._constant: Any = _MISSING

    def python_type(self) -> type:
        return self.cls

    def _fields(self) -> list[str]:
        if is_namedtuple_class(self.cls):
            return list(self.cls._fields)
        return [f.name for f in dataclasses.fields(self.cls) if f.init]

    def _positional_fields(self) -> list[str]:
        """The fields positional arguments bind, in order (a dataclass's keyword-only
        fields come after the others in its __init__, wherever they were declared)."""
        if is_namedtuple_class(self.cls):
            return list(self.cls._fields)
        return [f.name for f in dataclasses.fields(self.cls) if f.init and not f.kw_only]

    def _field_value(self, name: str) -> VariableTracker:
        if name in self.kwargs:
            return self.kwargs[name]
        names = self._positional_fields()
        if name in names and names.index(name) < len(self.args):
            return self.args[names.index(name)]
        default = _default_of(self.cls, name)
        if default is not _MISSING and is_constant_value(default):
            return ConstantVariable(default)
        raise Unsupported(f"field {name!r} of {self.cls.__qualname__} is not known at trace time")

    def as_python_constant(self) -> Any:
        """A frozen dataclass of constants is a value: the equal object, made now (once)
        by calling the class as eager does; its dataclass-made __eq__ and __hash__ compare
        and hash the fields only. Anything else is not a constant."""
        if self._constant is _MISSING:
            if not _frozen_value_class(self.cls) or self.attrs:
                raise Unsupported(f"{self} is not a constant")
            args = [a.as_python_constant() for a in self.args]
            kwargs = {k: v.as_python_constant() for k, v in self.kwargs.items()}
            self._constant = self.cls(*args, **kwargs)
        return self._constant

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if hasattr(self.cls, "__post_init__"):
            raise Unsupported(
                f"reading {self.cls.__qualname__}.{name} of an object built in the trace"
            )
        if name in self.attrs:  # the instance dict as the trace wrote it
            return self.attrs[name]
        if name in self._fields():
            return self._field_value(name)
        if is_namedtuple_class(self.cls) and name in _NAMEDTUPLE_METHODS:
            return BoundMethodOfTracker(self, name)
        if is_namedtuple_class(self.cls) and name == "_fields":
            return ConstantVariable(self.cls._fields)
        return self._class_attribute(tx, name)

    def has_attribute(self, name: str) -> bool | None:
        """hasattr of a namedtuple or dataclass built here: its fields, what the trace set
        on it, its class's attributes (a property decides for itself: unknown; so does a
        dataclass field __init__ does not take); nothing else."""
        if hasattr(self.cls, "__getattr__") or hasattr(self.cls, "__post_init__"):
            return None
        if name in self.attrs or name in self._fields():
            return True
        if dataclasses.is_dataclass(self.cls) and name in _all_fields(self.cls):
            return None
        attribute = inspect.getattr_static(self.cls, name, _MISSING)
        if attribute is _MISSING:
            return False
        return None if isinstance(attribute, property) else True

    def _class_attribute(self, tx, name: str) -> VariableTracker:
        # Methods and properties defined in Python on the class run inlined with this
        # tracker as self (fields read as above; writes to a field are a graph break).
        attribute = inspect.getattr_static(self.cls, name, _MISSING)
        if isinstance(attribute, property) and inspect.isfunction(attribute.fget):
            return tx.inline_call(attribute.fget, None, [self], {})
        if inspect.isfunction(attribute) and attribute.__module__ != "collections":
            return UserMethodVariable(attribute, self)
        if isinstance(attribute, staticmethod) and inspect.isfunction(attribute.__func__):
            return UserFunctionVariable(attribute.__func__)
        if isinstance(attribute, classmethod) and inspect.isfunction(attribute.__func__):
            return UserMethodVariable(attribute.__func__, TypeVariable(self.cls))
        if attribute is not _MISSING and is_constant_value(attribute):
            return ConstantVariable(attribute)  # a class constant (the class is the same)
        raise Unsupported(f"reading {self.cls.__qualname__}.{name} of an object built in the trace")

    def store_attribute(self, tx, name: str, value: VariableTracker) -> None:
        """`obj.name = value` on a namedtuple subclass's or a dataclass's instance built in
        the trace, its class's __setattr__ object's (a frozen dataclass's raises: a break)."""
        if inspect.getattr_static(self.cls, "__setattr__") is not object.__setattr__:
            raise Unsupported(f"setting attribute {name!r} on a {self.cls.__qualname__}")
        self.generic_setattr(tx, name, value)

    def generic_setattr(self, tx, name: str, value: VariableTracker) -> None:
        """object.__setattr__ (a frozen dataclass's own __init__ and users reach it): kept
        in the instance dict and set on the rebuilt object past the class's __setattr__.
        A namedtuple's fields, other descriptors and classes without an instance dict break
        (eager raises or runs them)."""
        if self.source is not None or not self.instance_dict_write(name):
            raise Unsupported(f"setting attribute {name!r} on a {self.cls.__qualname__}")
        self.attrs[name] = value

    def instance_dict_write(self, name: str) -> bool:
        """Whether object.__setattr__(obj, name, ...) only puts an entry in the instance
        dict (no descriptor of the class runs, nothing __post_init__ derived is stale)."""
        cls = self.cls
        attribute = inspect.getattr_static(cls, name, _MISSING)
        plain_field = dataclasses.is_dataclass(cls) and name in _all_fields(cls)
        return not (
            hasattr(cls, "__post_init__")
            or not any("__dict__" in vars(k) for k in cls.__mro__)
            or (attribute is not _MISSING and not (plain_field and _plain_value(attribute)))
        )

    def unpack(self, tx) -> list[VariableTracker]:
        if not is_namedtuple_class(self.cls):
            raise Unsupported(f"iterating over a {self.cls.__qualname__}")
        return [self._field_value(n) for n in self._fields()]

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__" and is_namedtuple_class(self.cls):
            return self.unpack(tx)[args[0].as_python_constant()]
        if name == "_replace" and is_namedtuple_class(self.cls) and not args:
            fields = {n: self._field_value(n) for n in self._fields()}
            unknown = set(kwargs) - set(fields)
            if unknown:
                raise Unsupported(f"{self.cls.__qualname__}._replace() of unknown fields")
            return ConstructedObjectVariable(self.cls, [], {**fields, **kwargs})
        if name == "_asdict" and is_namedtuple_class(self.cls) and not args and not kwargs:
            return ConstDictVariable({n: self._field_value(n) for n in self._fields()})
        if inspect.isfunction(inspect.getattr_static(self.cls, name, None)):
            # a special method the class defines in Python (an operator's): inlined
            return self.var_getattr(tx, name).call_function(tx, args, kwargs)
        raise Unsupported(f"{self.cls.__qualname__}.{name} on an object built in the trace")

    def __repr__(self) -> str:
        return f"ConstructedObjectVariable({self.cls.__qualname__})"


_MISSING = object()
_NAMEDTUPLE_METHODS = ("_replace", "_asdict")


def _all_fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _plain_value(attribute: Any) -> bool:
    """A class attribute an instance dict entry hides (a field's default), no descriptor."""
    return not hasattr(type(attribute), "__get__")


def _made_by_dataclasses(fn: Any) -> bool:
    code = getattr(fn, "__code__", None)
    return code is not None and code.co_filename == "<string>"  # dataclasses' exec


def _frozen_value_class(cls: type) -> bool:
    """A frozen dataclass whose equality and hash are the ones dataclasses made (the
    fields' only), without __post_init__."""
    params = getattr(cls, "__dataclass_params__", None)
    return (
        params is not None
        and params.frozen
        and params.eq
        and not hasattr(cls, "__post_init__")
        and _made_by_dataclasses(inspect.getattr_static(cls, "__eq__"))
        and _made_by_dataclasses(inspect.getattr_static(cls, "__hash__"))
    )


def _value_key(tx, tracker: ConstructedObjectVariable) -> ValueKey | None:
    """A frozen dataclass made in the trace as a dict key: hashed by its constant fields."""
    if not _frozen_value_class(tracker.cls) or not tracker.is_python_constant():
        return None
    value = tracker.as_python_constant()
    try:
        hash(value)
    except TypeError:
        raise Unsupported(f"an unhashable {tracker.cls.__qualname__} as a dict key") from None
    return ValueKey(tracker, value)


TRACKER_KEYS[ConstructedObjectVariable] = _value_key


def _default_of(cls: type, name: str) -> Any:
    if is_namedtuple_class(cls):
        return cls._field_defaults.get(name, _MISSING)
    for f in dataclasses.fields(cls):
        if f.name == name and f.default is not dataclasses.MISSING:
            return f.default
    return _MISSING


@constructor("constructed")
def _construct(tx, kind: TypeVariable, args, kwargs) -> VariableTracker | None:
    if dataclasses.is_dataclass(kind.cls) and hasattr(kind.cls, "__post_init__"):
        return None  # its fields may differ from the arguments: __init__ is traced instead
    if dataclasses.is_dataclass(kind.cls):
        kwargs = _with_factory_defaults(tx, kind.cls, args, kwargs)
        if kwargs is None:
            return None
    if is_constructible(kind.cls):
        return ConstructedObjectVariable(kind.cls, args, kwargs)
    return None


def _with_factory_defaults(tx, cls: type, args, kwargs) -> dict | None:
    """The keyword arguments with each `default_factory` field left out called now, in
    field order as __init__ would, and passed in: the object rebuilt after the graph holds
    the trace's values (the factory is not run twice). None where a factory field is not
    an __init__ argument (it is made inside __init__, which is traced instead)."""
    fields = dataclasses.fields(cls)
    positional = [f.name for f in fields if f.init and not f.kw_only][: len(args)]  # bound
    filled = dict(kwargs)
    for f in fields:
        if f.default_factory is dataclasses.MISSING or f.name in kwargs or f.name in positional:
            continue
        if not f.init:
            return None
        filled[f.name] = tx.wrap(f.default_factory, None).call_function(tx, [], {})
    return filled


@constructor("enum_member")
def _enum_member(tx, kind: TypeVariable, args, kwargs) -> VariableTracker | None:
    """`Color(value)`: the member whose value that is, looked up now in the class's own
    table (fixed when the class was made); any other call (a value not in the table, which
    runs `_missing_`; the functional API) is a graph break."""
    cls = kind.cls
    if not (isinstance(cls, enum.EnumMeta) and issubclass(cls, enum.Enum)):
        return None
    if kwargs or len(args) != 1 or not args[0].is_python_constant():
        raise Unsupported(f"calling the enum {cls.__qualname__} with other than one constant")
    value = args[0].as_python_constant()
    try:
        member = cls._value2member_map_[value]
    except (KeyError, TypeError):
        raise Unsupported(f"{cls.__qualname__}({value!r}): not one of its values") from None
    return ConstantVariable(member)


# ---- wrapping real values (variables/builder.py) ----------------------------------------
def _is_sourced_namedtuple(tx, value: tuple, source) -> bool:
    return hasattr(type(value), "_fields") and source is not None


_TUPLE_FIELD = type(collections.namedtuple("_Pair", "a").a)  # a field's descriptor


def _namedtuple_item_sources(cls: type, source, length: int) -> list:
    """How guards and inputs read the items: by index, or, where the class replaces
    tuple's `__getitem__` (a user method, not the tuple's items), through the fields' own
    descriptors (what `p.a` reads)."""
    if cls.__getitem__ is tuple.__getitem__:
        return [ItemSource(source, i) for i in range(length)]
    fields = cls._fields
    if len(fields) != length or not all(
        isinstance(inspect.getattr_static(cls, f, None), _TUPLE_FIELD) for f in fields
    ):
        raise Unsupported(f"a {cls.__name__} whose __getitem__ and fields are both replaced")
    return [GenericAttrSource(source, f) for f in fields]


@wrap_rule("namedtuple", types=tuple, when=_is_sourced_namedtuple)
def _wrap_namedtuple(tx, value: tuple, source) -> VariableTracker:
    guard(tx, source, GuardKind.TYPE_MATCH, type(value))
    sources = _namedtuple_item_sources(type(value), source, len(value))
    items = [tx.wrap(item, s) for item, s in zip(value, sources, strict=True)]
    tracker = ConstructedObjectVariable(type(value), items, {})
    tracker.source = source
    note_object(tx, value, source)  # its attribute writes are keyed by one source
    return tracker


class NamedTupleMakeVariable(VariableTracker):
    """`P._make(iterable)` of a namedtuple class P: the object built as `P(*items)` is."""

    def __init__(self, cls: type) -> None:
        super().__init__()
        self.cls = cls

    def python_type(self) -> type:
        return types.MethodType  # a classmethod bound to the class

    def call_function(self, tx, args, kwargs):
        if kwargs or len(args) != 1:
            raise Unsupported(f"{self.cls.__qualname__}._make() takes one iterable")
        items = args[0].unpack(tx)
        if len(items) != len(self.cls._fields):
            raise Unsupported(f"{self.cls.__qualname__}._make() of {len(items)} items")
        return ConstructedObjectVariable(self.cls, items, {})


def _is_namedtuple_make(tx, value: Any, source) -> bool:
    fn = getattr(value, "__func__", None)
    owner = getattr(value, "__self__", None)
    code = getattr(fn, "__code__", None)
    return (
        is_namedtuple_class(owner)
        and code is not None
        and code.co_name == "_make"
        and code.co_filename == collections.namedtuple.__code__.co_filename
    )


@wrap_rule("namedtuple_make", when=_is_namedtuple_make)
def _wrap_namedtuple_make(tx, value: Any, source) -> VariableTracker:
    if source is not None:  # the class is guarded by identity; its _make stays collections'
        guard(tx, AttrSource(source, "__func__"), GuardKind.ID_MATCH, value.__func__)
    return NamedTupleMakeVariable(value.__self__)


def _namedtuple_factory(tx, args, kwargs) -> VariableTracker:
    """`collections.namedtuple(name, fields, ...)` with arguments known at trace time: the
    class made now (its module the frame's, as the caller's frame would give it), one class
    for every call of the compiled code where eager makes one per call."""
    try:
        a = [v.as_python_constant() for v in args]
        k = {n: v.as_python_constant() for n, v in kwargs.items()}
    except Unsupported:
        raise Unsupported("collections.namedtuple() of values unknown at trace time") from None
    k.setdefault("module", tx.f_globals.get("__name__"))
    return TypeVariable(collections.namedtuple(*a, **k))


RULES[collections.namedtuple] = _namedtuple_factory


@constructor("struct_sequence")
def _construct_struct_sequence(tx, kind: TypeVariable, args, kwargs) -> VariableTracker | None:
    """`torch.return_types.max((values, indices))`: a struct sequence from a sequence of
    exactly its fields (pytree's unflatten makes them so); other forms are a break."""
    if not is_struct_sequence(kind.cls):
        return None
    cls = kind.cls
    if kwargs or len(args) != 1 or cls.n_fields != cls.n_sequence_fields:
        raise Unsupported(f"{cls.__qualname__}() other than from a sequence of its fields")
    items = args[0].unpack(tx)
    if len(items) != cls.n_sequence_fields:
        raise Unsupported(f"{cls.__qualname__}() from {len(items)} items")
    return StructSequenceVariable(cls, items)
