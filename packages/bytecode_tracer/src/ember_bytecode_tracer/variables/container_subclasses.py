"""Instances of the user's subclasses of list and dict built during a trace.

`MyList([x])` for a class deriving from list (or dict) through Python classes only: the
tracker is the list (dict) tracker of its items, with the class and the instance's own
attribute table. Methods the class defines in Python run inlined with the tracker as self;
list's (dict's) own methods, reached directly or through `super()`, act on the items. After
the graph the runner makes the object as `cls.__new__(cls)`, fills it through list's
(dict's) own methods and sets its attributes, so its `__init__` does not run again.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import (
    AttrSource,
    GenericAttrSource,
    Guard,
    GuardKind,
    ItemSource,
    TypeSource,
)
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import aliased_container, guard, wrap_rule
from ember_bytecode_tracer.variables.builtins import RULES
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.dicts import ConstDictVariable
from ember_bytecode_tracer.variables.functions import UserMethodVariable
from ember_bytecode_tracer.variables.lists import BoundMethodOfTracker, ListVariable
from ember_bytecode_tracer.variables.objects import TypeVariable, constructor

_HEAPTYPE = 1 << 9
_REFUSED_HOOKS = ("__new__", "__getattribute__", "__setattr__", "__delattr__", "__del__",
                  "__class_getitem__")  # fmt: skip


def subclass_refusal(cls: type, base: type) -> str | None:
    """Why instances of `cls`, a subclass of `base`, cannot be built in the trace."""
    if type(cls) is not type:
        return f"its metaclass is {type(cls).__name__}"
    for klass in cls.__mro__[: cls.__mro__.index(base)]:
        if not klass.__flags__ & _HEAPTYPE:
            return f"it derives from {klass.__name__}, implemented in C"
        if vars(klass).get("__slots__", ()):
            return "it has __slots__"
        for hook in _REFUSED_HOOKS:
            if hook in vars(klass):
                return f"it defines {hook}"
    return None


class _SubclassMixin:
    """What a list or dict subclass instance adds to its container tracker."""

    cls: type
    cls_source: Any
    attrs: dict[str, VariableTracker]
    base: type

    @property
    def owns_attributes(self) -> bool:
        """Made in the trace: its attribute writes go to its own table (an input's break)."""
        return self.source is None

    def _method(self, fn: Any, name: str) -> VariableTracker:
        # the class is guarded (by identity, or by type for an input): its methods with it
        fn_source = AttrSource(self.cls_source, name) if self.cls_source is not None else None
        return UserMethodVariable(fn, self, fn_source=fn_source)

    def _user_attribute(self, name: str) -> Any:
        """`name` as the Python classes above list/dict define it, or None."""
        mro = self.cls.__mro__
        for klass in mro[: mro.index(self.base)]:
            if name in vars(klass):
                return vars(klass)[name]
        return None

    def python_type(self) -> type:
        return self.cls

    def as_python_constant(self) -> Any:
        raise Unsupported(f"a {self.cls.__qualname__} is not a constant")

    def has_attribute(self, name: str) -> bool | None:
        if name in self.attrs or name in getattr(self, "value_dict", {}) or hasattr(self.cls, name):
            return True
        return None if self._user_attribute("__getattr__") is not None else False

    def var_getattr(self, tx, name):
        attribute = self._user_attribute(name)
        if isinstance(attribute, property) and attribute.fget is not None:
            return tx.inline_call(attribute.fget, None, [self], {})
        if name in self.attrs:
            return self.attrs[name]
        if self.source is not None and name in getattr(self, "value_dict", {}):
            return tx.wrap(self.value_dict[name], AttrSource(self.source, name))
        if name == "__class__":
            return TypeVariable(self.cls, source=self.cls_source)
        if inspect.isfunction(attribute):
            return self._method(attribute, name)
        if isinstance(attribute, staticmethod | classmethod):
            return tx.wrap(getattr(self.cls, name), None)
        if attribute is not None and is_constant_value(attribute):
            return ConstantVariable(attribute)
        if attribute is None and callable(getattr(self.base, name, None)):
            return BoundMethodOfTracker(self, name)
        if attribute is None and not hasattr(self.base, name):
            return self._missing(tx, name)
        raise Unsupported(f"attribute {name!r} of a {self.cls.__qualname__}")

    def _missing(self, tx, name: str) -> VariableTracker:
        """Nothing of that name on the instance or its class: the class's Python
        __getattr__ answers, inlined, or an AttributeError is raised (an input: guarded by
        the name's absence from its instance dict and its class)."""
        if self.source is not None:
            where = tx.location()
            for source in (ItemSource(GenericAttrSource(self.source, "__dict__"), name),
                           AttrSource(self.cls_source, name)):  # fmt: skip
                tx.output.add_guard(Guard(source, GuardKind.ABSENT, user_location=where))
        hook = self._user_attribute("__getattr__")
        if not inspect.isfunction(hook):
            raise TracedException(
                AttributeError, f"{self.cls.__qualname__!r} object has no attribute {name!r}"
            )
        return self._method(hook, "__getattr__").call_function(tx, [ConstantVariable(name)], {})

    def store_attribute(self, tx, name: str, value: VariableTracker) -> None:
        if self.source is not None:
            raise Unsupported(f"setting attribute {name!r} on an input {self.cls.__qualname__}")
        if inspect.getattr_static(self.cls, name, None) is not None:
            raise Unsupported(f"setting {self.cls.__qualname__}.{name}, a class attribute")
        self.attrs[name] = value

    def call_method(self, tx, name, args, kwargs):
        attribute = self._user_attribute(name)
        if inspect.isfunction(attribute):
            return self._method(attribute, name).call_function(tx, args, kwargs)
        if attribute is not None:
            raise Unsupported(f"{self.cls.__qualname__}.{name} is a {type(attribute).__name__}")
        return self.builtin_method(tx, name, args, kwargs)

    def builtin_method(self, tx, name, args, kwargs):
        """list's (dict's) own `name` on the items (`super().append(v)` comes here)."""
        if name == "__init__":
            made = RULES[self.base](tx, args, kwargs)
            self.items = made.items  # (a fresh instance: no one else sees the items yet)
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)  # type: ignore[misc]

    def _overridden(self, name: str) -> bool:
        return self._user_attribute(name) is not None

    def unpack(self, tx) -> list[VariableTracker]:
        if self._overridden("__iter__"):
            return self.call_method(tx, "__iter__", [], {}).unpack(tx)
        return super().unpack(tx)  # type: ignore[misc]

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        if self._overridden("__getitem__"):
            return self.call_method(tx, "__getitem__", [key], {})
        if self.base is list and isinstance(key.as_python_constant(), slice):
            return ListVariable(self.items[key.as_python_constant()])  # a plain list
        missing = self.base is dict and key.as_python_constant() not in self.items
        if missing and self._overridden("__missing__"):
            return self.call_method(tx, "__missing__", [key], {})
        return super().getitem(tx, key)  # type: ignore[misc]

    def python_len(self, tx) -> VariableTracker:
        return self.call_method(tx, "__len__", [], {})

    def truthiness(self, tx) -> bool:
        for name in ("__bool__", "__len__"):
            if self._overridden(name):
                return self.call_method(tx, name, [], {}).truthiness(tx)
        return bool(self.items)


class UserListVariable(_SubclassMixin, ListVariable):
    base = list

    def __init__(self, cls: type, items: list[VariableTracker], cls_source=None, **kw) -> None:
        super().__init__(items, **kw)
        self.cls = cls
        self.cls_source = cls_source
        self.attrs = {}

    def __repr__(self) -> str:
        return f"UserListVariable({self.cls.__qualname__})"


class UserDictVariable(_SubclassMixin, ConstDictVariable):
    base = dict

    def __init__(self, cls: type, items: dict[Any, VariableTracker], cls_source=None, **kw) -> None:
        super().__init__(items, **kw)
        self.cls = cls
        self.cls_source = cls_source
        self.attrs = {}

    def python_len(self, tx) -> VariableTracker:
        if self._overridden("__len__"):
            return self.call_method(tx, "__len__", [], {})
        return ConstantVariable(len(self.items))

    def __repr__(self) -> str:
        return f"UserDictVariable({self.cls.__qualname__})"


_TRACKERS = {list: UserListVariable, dict: UserDictVariable}


@constructor("container_subclass")
def _construct(tx, kind: TypeVariable, args, kwargs) -> VariableTracker | None:
    cls = kind.cls
    if isinstance(cls, type) and typing.is_typeddict(cls):  # calling one makes a plain dict
        return RULES[dict](tx, args, kwargs)
    base = next((b for b in _TRACKERS if isinstance(cls, type) and issubclass(cls, b)), None)
    if base is None or cls is base:
        return None
    refusal = subclass_refusal(cls, base)
    if refusal is not None:
        raise Unsupported(f"constructing a {cls.__qualname__} inside a traced region ({refusal})")
    made = _TRACKERS[base](cls, [] if base is list else {}, kind.source)
    init = made._user_attribute("__init__")
    if init is None:
        made.builtin_method(tx, "__init__", args, kwargs)
    elif inspect.isfunction(init):
        made._method(init, "__init__").call_function(tx, args, kwargs)
    else:
        raise TracedException(TypeError, f"{cls.__qualname__}.__init__ is not a function")
    return made


# ---- wrapping real values (variables/builder.py) ----------------------------------------
_GUARD_READS = ("__len__", "__iter__", "__getitem__")  # what the guards and item reads run


def _is_plain_subclass_instance(tx, value: Any, source) -> bool:
    cls = type(value)
    base = list if isinstance(value, list) else dict if isinstance(value, dict) else None
    if source is None or base is None or cls is base or subclass_refusal(cls, base):
        return False
    return all(getattr(cls, n) is getattr(base, n) for n in _GUARD_READS)


@wrap_rule("container_subclass", types=(list, dict), when=_is_plain_subclass_instance)
def _wrap_subclass_instance(tx, value: Any, source) -> VariableTracker | None:
    if isinstance(value, dict) and not all(is_constant_value(k) for k in value):
        return None
    return aliased_container(tx, value, source, _build_instance)


def _build_instance(tx, value: Any, source) -> VariableTracker:
    cls = type(value)
    if isinstance(value, list):
        guard(tx, source, GuardKind.LEN_MATCH, (cls, len(value)))
        items: Any = [tx.wrap(v, ItemSource(source, i)) for i, v in enumerate(value)]
        made: Any = UserListVariable(cls, items, TypeSource(source), source=source)
    else:
        guard(tx, source, GuardKind.DICT_KEYS, (cls, tuple(value)))
        items = {k: tx.wrap(v, ItemSource(source, k)) for k, v in value.items()}
        made = UserDictVariable(cls, items, TypeSource(source), source=source)
    made.value_dict = vars(value)  # its attributes, read through the source (guarded)
    return made
