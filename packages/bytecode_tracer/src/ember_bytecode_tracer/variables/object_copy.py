"""`copy.deepcopy` / `copy.copy` in a trace, made from what the trace knows of the value.

The copy is never made at trace time from the real object: it is built from the trackers of
the value's state, so every part of the original the copy depends on is read through its
source and guarded like any other read (a plain object's `__dict__`: its keys and each
value; a list's length and items; a dict's keys and values). Pending attribute writes of the
trace are seen. Mutable parts are copied into new trackers (lists, dicts, objects made in
the trace), immutable ones are shared, as `copy.deepcopy` does. Objects whose copying is
customised (`__deepcopy__`, `__reduce__`, `__getstate__`/`__setstate__`, `copyreg`, slots,
`__getattr__`, C types) and tensors are a graph break naming the value.

The copy of an object is a `CopiedObjectVariable`: a `TracedObjectVariable` (rebuilt after
the graph if it escapes) whose class may define Python attribute hooks (`__getattribute__`,
`__setattr__`, `__delattr__`, e.g. transformers' configs with their strict-dataclass
validation); they are inlined, and their `super()`/`object` calls reach the object's own
attribute table.
"""

from __future__ import annotations

import abc
import copy
import copyreg
import inspect
from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, Guard, GuardKind, TypeSource
from ember_bytecode_tracer.variables.attributes import store_attribute
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builtins import rule
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.dicts import ConstDictVariable, constant_keys
from ember_bytecode_tracer.variables.lists import ListVariable, TupleVariable
from ember_bytecode_tracer.variables.object_identity import canonical_source
from ember_bytecode_tracer.variables.objects import UserDefinedObjectVariable
from ember_bytecode_tracer.variables.sym_values import SymNodeVariable
from ember_bytecode_tracer.variables.traced_objects import TracedObjectVariable, _class_source

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator

_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement
_HOOKS = ("__getattribute__", "__setattr__", "__delattr__")
# Methods whose presence changes what copy.copy/deepcopy do with an instance.
_COPY_PROTOCOL = ("__deepcopy__", "__copy__", "__setstate__", "__getattr__")
_DEFAULT_PROTOCOL = {
    "__reduce_ex__": object.__reduce_ex__,
    "__reduce__": object.__reduce__,
    "__getstate__": getattr(object, "__getstate__", None),
}


def copy_refusal(cls: type) -> str | None:
    """Why instances of `cls` cannot be copied in the trace, or None when they can: the
    default protocol (`cls.__new__(cls)`, then the instance dict) over Python classes whose
    attribute hooks, if any, are Python functions."""
    if type(cls) not in (type, abc.ABCMeta):
        return f"its metaclass is {type(cls).__name__}"
    if cls in copyreg.dispatch_table:
        return "copyreg registers a reducer for it"
    for name, default in _DEFAULT_PROTOCOL.items():
        if default is not None and getattr(cls, name, default) is not default:
            return f"it customises {name}"
    for name in _COPY_PROTOCOL:
        if hasattr(cls, name):
            return f"it defines {name}"
    for klass in cls.__mro__[:-1]:
        own = vars(klass)
        if not klass.__flags__ & _HEAPTYPE:
            return f"it derives from {klass.__name__}, implemented in C"
        if own.get("__slots__", ()) or "__new__" in own or "__del__" in own:
            return "it defines __slots__, __new__ or __del__"
        for hook in _HOOKS:
            if hook in own and not inspect.isfunction(own[hook]):
                return f"its {hook} is not a Python function"
    return None


class CopiedObjectVariable(TracedObjectVariable):
    """An object made in the trace by copying another (the original is left alone)."""

    def __repr__(self) -> str:
        return f"CopiedObjectVariable({self.cls.__qualname__})"


class _Copier:
    """One copy.deepcopy (deep=True) or copy.copy call: its memo keeps shared parts shared."""

    def __init__(self, tx: Translator, deep: bool) -> None:
        self.tx = tx
        self.deep = deep
        self.memo: dict[int, VariableTracker] = {}
        self.keep: list[Any] = []  # ids stay unique while the memo is in use
        # The mutable parts of real objects' state, by identity, with the source each was
        # first reached at: the copy shares what they share, so that is guarded.
        self.mutable_parts: dict[int, Source] = {}

    def copy(self, value: VariableTracker) -> VariableTracker:
        key = _memo_key(value)
        known = self.memo.get(key)
        if known is not None:
            return known
        self.keep.append(value)
        result = self._copy(value)
        self.memo[key] = result
        return result

    def guard_distinct_parts(self) -> None:
        """Mutable parts distinct when traced stay distinct (two copies, as deepcopy makes
        of two objects); parts reached twice are one object by the wrapping's own guards."""

        sources = list(self.mutable_parts.values())
        if len(sources) > 1:
            guard = Guard(sources[0], GuardKind.NO_TENSOR_ALIASING, tuple(sources[1:]))
            self.tx.output.add_guard(guard)

    def _note_mutable(self, real: Any, tracker: VariableTracker) -> None:
        if is_constant_value(real) or tracker.source is None:
            return
        self.keep.append(real)
        self.mutable_parts.setdefault(id(real), tracker.source)
        if type(real) in (list, tuple) and isinstance(tracker, TupleVariable | ListVariable):
            for item, part in zip(real, tracker.items, strict=False):
                self._note_mutable(item, part)
        elif type(real) is dict and isinstance(tracker, ConstDictVariable):
            for k, item in real.items():
                if k in tracker.items:
                    self._note_mutable(item, tracker.items[k])

    def part(self, value: VariableTracker) -> VariableTracker:
        return self.copy(value) if self.deep else value

    def _copy(self, value: VariableTracker) -> VariableTracker:

        if isinstance(value, ConstantVariable | SymNodeVariable):
            return value  # immutable: copies are the value itself
        if type(value) is TupleVariable:
            items = [self.part(item) for item in value.items]
            if all(a is b for a, b in zip(items, value.items, strict=True)):
                return value
            return TupleVariable(items)
        if type(value) is ListVariable:
            return ListVariable([self.part(item) for item in value.items])
        if type(value) is ConstDictVariable and value.dict_type is dict:
            constant_keys(value.items)  # a deep copy copies tensor keys too: not here
            return ConstDictVariable({k: self.part(v) for k, v in value.items.items()})
        if isinstance(value, TracedObjectVariable):
            self._check_class(value.cls)
            made = CopiedObjectVariable(value.cls, value.cls_source)
            self.memo[_memo_key(value)] = made  # cycles reach the copy
            made.attrs = {k: self.part(v) for k, v in value.attrs.items()}
            return made
        if type(value) is UserDefinedObjectVariable and value.source is not None:
            return self._copy_object(value)
        what = value.python_type().__name__ if _knows_type(value) else repr(value)
        raise Unsupported(f"copy.{'deepcopy' if self.deep else 'copy'} of a {what}")

    def _check_class(self, cls: type) -> None:
        refusal = copy_refusal(cls)
        if refusal is not None:
            raise Unsupported(f"copying a {cls.__qualname__} in the trace ({refusal})")

    def _copy_object(self, value: UserDefinedObjectVariable) -> VariableTracker:

        tx, cls = self.tx, type(value.value)
        self._check_class(cls)
        # The state copy.deepcopy reads: the instance dict (keys and values guarded).
        state = tx.wrap(vars(value.value), AttrSource(value.source, "__dict__"))
        if not isinstance(state, ConstDictVariable):
            raise Unsupported(f"copying a {cls.__qualname__}: its __dict__ is not a plain dict")
        attrs = dict(state.items)
        if self.deep:
            for name, real in vars(value.value).items():
                if name in attrs:
                    self._note_mutable(real, attrs[name])
        writes = tx.output.side_effects.attributes
        owner = canonical_source(tx, value)
        for (source, name), written in list(writes.items()):
            if source == owner:  # written earlier in this trace
                attrs[name] = written
        cls_source = _class_source(cls) or TypeSource(value.source)
        made = CopiedObjectVariable(cls, cls_source)
        self.memo[_memo_key(value)] = made
        made.attrs = {k: self.part(v) for k, v in attrs.items()}
        return made


def _memo_key(value: VariableTracker) -> int:
    """One copy per object: a real object reached at two sources is two trackers."""
    if type(value) is UserDefinedObjectVariable:
        return id(value.value)
    return id(value)


def _knows_type(value: VariableTracker) -> bool:
    try:
        value.python_type()
    except Exception:
        return False
    return True


def _copy_rule(deep: bool):
    def copy_call(tx, args, kwargs):
        if len(args) != 1 or kwargs:
            raise Unsupported(f"copy.{'deepcopy' if deep else 'copy'} with a memo")
        copier = _Copier(tx, deep)
        result = copier.copy(args[0])
        copier.guard_distinct_parts()
        return result

    return copy_call


rule(copy.deepcopy)(_copy_rule(deep=True))
rule(copy.copy)(_copy_rule(deep=False))


@rule(setattr)
def _setattr(tx, args, kwargs):

    if len(args) != 3 or kwargs:
        raise Unsupported("setattr() takes three arguments")
    store_attribute(tx, args[0], args[1].as_python_constant(), args[2])
    return ConstantVariable(None)


@rule(delattr)
def _delattr(tx, args, kwargs):
    if len(args) != 2 or kwargs:
        raise Unsupported("delattr() takes two arguments")
    delete_attribute(tx, args[0], args[1].as_python_constant())
    return ConstantVariable(None)


# object's own slots called on a tracker (`object.__setattr__(self, k, v)` in a class's
# __init__ or __setattr__): the plain lookup or write, without the class's hooks.
_GENERIC = {
    object.__getattribute__: ("generic_getattr", 2),
    object.__setattr__: ("generic_setattr", 3),
    object.__delattr__: ("generic_delattr", 2),
}


def _generic_slot(slot):
    method, arity = _GENERIC[slot]

    def call(tx, args, kwargs):
        if len(args) != arity or kwargs or not hasattr(args[0], method):
            raise Unsupported(f"object.{slot.__name__} on {args[0] if args else 'nothing'}")
        result = getattr(args[0], method)(tx, args[1].as_python_constant(), *args[2:])
        return ConstantVariable(None) if result is None else result

    return call


for _slot in _GENERIC:
    rule(_slot)(_generic_slot(_slot))


def delete_attribute(tx: Translator, obj: VariableTracker, name: str) -> None:
    """`del obj.name`: on objects made in the trace only (no replay of deletions)."""
    if not isinstance(obj, TracedObjectVariable):
        raise Unsupported(f"deleting attribute {name!r} of {obj}")
    obj.delete_attribute(tx, name)
