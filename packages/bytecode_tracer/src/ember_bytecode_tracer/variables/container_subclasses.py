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
from typing import Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builtins import RULES
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.dicts import ConstDictVariable
from ember_bytecode_tracer.variables.functions import UserMethodVariable
from ember_bytecode_tracer.variables.lists import BoundMethodOfTracker, ListVariable
from ember_bytecode_tracer.variables.objects import TypeVariable, constructor

_HEAPTYPE = 1 << 9
_REFUSED_HOOKS = ("__new__", "__getattribute__", "__setattr__", "__delattr__", "__getattr__",
                  "__del__", "__class_getitem__")  # fmt: skip


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
    attrs: dict[str, VariableTracker]
    base: type
    owns_attributes = True  # made in the trace: its attribute writes are its own table

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

    def has_attribute(self, name: str) -> bool:
        return name in self.attrs or hasattr(self.cls, name)

    def var_getattr(self, tx, name):
        attribute = self._user_attribute(name)
        if isinstance(attribute, property) and attribute.fget is not None:
            return tx.inline_call(attribute.fget, None, [self], {})
        if name in self.attrs:
            return self.attrs[name]
        if name == "__class__":
            return TypeVariable(self.cls)
        if inspect.isfunction(attribute):
            return UserMethodVariable(attribute, self)
        if isinstance(attribute, staticmethod | classmethod):
            return tx.wrap(getattr(self.cls, name), None)
        if attribute is not None and is_constant_value(attribute):
            return ConstantVariable(attribute)
        if attribute is None and callable(getattr(self.base, name, None)):
            return BoundMethodOfTracker(self, name)
        raise Unsupported(f"attribute {name!r} of a {self.cls.__qualname__}")

    def store_attribute(self, tx, name: str, value: VariableTracker) -> None:
        if inspect.getattr_static(self.cls, name, None) is not None:
            raise Unsupported(f"setting {self.cls.__qualname__}.{name}, a class attribute")
        self.attrs[name] = value

    def call_method(self, tx, name, args, kwargs):
        attribute = self._user_attribute(name)
        if inspect.isfunction(attribute):
            return UserMethodVariable(attribute, self).call_function(tx, args, kwargs)
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

    def __init__(self, cls: type, items: list[VariableTracker]) -> None:
        super().__init__(items)
        self.cls = cls
        self.attrs = {}

    def __repr__(self) -> str:
        return f"UserListVariable({self.cls.__qualname__})"


class UserDictVariable(_SubclassMixin, ConstDictVariable):
    base = dict

    def __init__(self, cls: type, items: dict[Any, VariableTracker]) -> None:
        super().__init__(items)
        self.cls = cls
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
    base = next((b for b in _TRACKERS if isinstance(cls, type) and issubclass(cls, b)), None)
    if base is None or cls is base:
        return None
    refusal = subclass_refusal(cls, base)
    if refusal is not None:
        raise Unsupported(f"constructing a {cls.__qualname__} inside a traced region ({refusal})")
    made = _TRACKERS[base](cls, [] if base is list else {})
    init = made._user_attribute("__init__")
    if init is None:
        made.builtin_method(tx, "__init__", args, kwargs)
    elif inspect.isfunction(init):
        UserMethodVariable(init, made).call_function(tx, args, kwargs)
    else:
        raise TracedException(TypeError, f"{cls.__qualname__}.__init__ is not a function")
    return made
