"""Python modules, classes and other user objects reached from the frame."""

from __future__ import annotations

import inspect
import threading
import types
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import (
    AttrSource,
    DictValuesSource,
    GenericAttrSource,
    Guard,
    GuardKind,
    ItemSource,
    TypeSource,
)
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard, guard_identity, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.descriptors import descriptor_get, descriptor_set
from ember_bytecode_tracer.variables.dicts import (
    TRACKER_KEYS,
    ConstDictVariable,
    IdentityKey,
    hashes_by_identity,
)
from ember_bytecode_tracer.variables.functions import UserMethodVariable
from ember_bytecode_tracer.variables.logging_calls import LoggingCallVariable, is_logging_call
from ember_bytecode_tracer.variables.object_identity import note_object, record_write

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator


class PythonModuleVariable(VariableTracker):
    """A module object such as `torch`, `math` or a user's helper module."""

    def __init__(self, module: Any, *, source: Source | None) -> None:
        super().__init__(source=source)
        self.module = module

    def python_type(self) -> type:
        return type(self.module)

    def as_python_constant(self) -> Any:
        return self.module

    def var_getattr(self, tx, name):
        if not hasattr(self.module, name):
            raise Unsupported(f"module {self.module.__name__} has no attribute {name!r}")
        value = getattr(self.module, name)
        if self.source is None:
            return tx.wrap(value, None)
        return tx.wrap(value, AttrSource(self.source, name))

    def is_torch_namespace(self) -> bool:
        name = self.module.__name__
        return name == "torch" or name.startswith("torch.")

    def __repr__(self) -> str:
        return f"PythonModuleVariable({self.module.__name__})"


# Classes made at trace time from a class statement of the traced frame
# (class_definition.py): private to the trace (eager makes a new one on every call), so
# they are no constants, and neither they nor their instances are rebuilt after the graph.
FRAME_LOCAL_CLASSES: weakref.WeakSet[type] = weakref.WeakSet()


class TypeVariable(VariableTracker):
    """A class. Calling it constructs an object only for a few known value types."""

    def __init__(self, cls: type, *, source: Source | None = None) -> None:
        super().__init__(source=source)
        self.cls = cls

    def python_type(self) -> type:
        return type(self.cls)

    def as_python_constant(self) -> Any:
        if self.cls in FRAME_LOCAL_CLASSES:
            raise Unsupported(f"class {self.cls.__qualname__}, defined inside the traced frame")
        return self.cls

    def var_getattr(self, tx, name):
        attribute = inspect.getattr_static(self.cls, name, None)
        if isinstance(attribute, staticmethod):
            attribute = attribute.__func__
        source = AttrSource(self.source, name) if self.source is not None else None
        return tx.wrap(getattr(self.cls, name), source)

    def call_method(self, tx, name, args, kwargs):
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            alias = _builtin_alias(self.cls, args[0])
            if alias is not None:
                return ConstantVariable(alias)
        return super().call_method(tx, name, args, kwargs)

    def call_function(self, tx, args, kwargs):
        for construct in _ORDERED_CONSTRUCTORS:
            made = construct(tx, self, args, kwargs)
            if made is not None:
                return made
        raise Unsupported(f"constructing a {self.cls.__qualname__} inside a traced region")

    def __repr__(self) -> str:
        return f"TypeVariable({self.cls.__qualname__})"


# Modules whose `__class_getitem__` only builds an immutable alias from its key (typing's
# Generic, collections.abc.Callable): run now on a known key.
_PURE_ALIAS_MODULES = frozenset({"typing", "_collections_abc", "collections.abc"})


def _pure_class_getitem(method: Any) -> bool:
    if isinstance(method, types.BuiltinMethodType | types.ClassMethodDescriptorType):
        return True  # C: list[int], dict[str, Tensor]
    if not isinstance(method, classmethod):
        return False
    return getattr(method.__func__, "__module__", None) in _PURE_ALIAS_MODULES


def _c_getter(fget: Any) -> bool:
    """A property's getter implemented in C (pybind11's `instancemethod`, a builtin)."""
    python = inspect.isfunction(fget) or inspect.ismethod(fget)
    return callable(fget) and not python and type(fget).__module__ == "builtins"


def _builtin_alias(cls: type, key: VariableTracker) -> Any:
    """`cls[key]` (`list[int]`, `Callable[[int], int]`, `MyGeneric[T]`) for a class whose
    `__class_getitem__` is C or typing's (it only makes an immutable alias), the key known;
    None otherwise."""
    if inspect.getattr_static(type(cls), "__getitem__", None) is not None:
        return None  # a metaclass's own subscript
    if not _pure_class_getitem(inspect.getattr_static(cls, "__class_getitem__", None)):
        return None
    try:
        value = key.as_python_constant()
    except Unsupported:
        return None
    return cls[value]


def hook_truth(name: str, result: VariableTracker) -> bool:
    """What bool() makes of a Python `__bool__` / `__len__` result: a bool / an int >= 0
    known now; anything else (eager raises TypeError or ValueError) is a break."""
    value = result.as_python_constant() if result.is_python_constant() else None
    if name == "__bool__" and type(value) is bool:
        return value
    if name == "__len__" and type(value) is int and value >= 0:
        return value != 0
    raise Unsupported(f"{name} returned {result}, not what bool() accepts")


def _python_getattribute(cls: type) -> bool:
    return inspect.isfunction(inspect.getattr_static(cls, "__getattribute__"))


def _plain_instance_dict(cls: type) -> bool:
    """Whether `object.__getattribute__(obj, '__dict__')` is the dict object's own lookup
    reads: the class's `__dict__` is the slot descriptor every class with a dict gets."""
    for klass in cls.__mro__:
        if "__dict__" in vars(klass):
            return type(vars(klass)["__dict__"]) is types.GetSetDescriptorType
    return False


def _own_dict(value: Any) -> bool:
    return _plain_instance_dict(type(value)) and not isinstance(value, threading.local)


def _thread_local_dict(value: threading.local) -> dict:
    """The entries a threading.local holds for the calling thread (its C getattr swaps them
    in on each access; `object.__getattribute__` does not see them)."""
    return threading.local.__getattribute__(value, "__dict__")


class UserDefinedObjectVariable(VariableTracker):
    """Any other object: attribute reads are guarded on the way; methods inline."""

    def __init__(self, value: Any, *, source: Source | None) -> None:
        super().__init__(source=source)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    @property
    def cls_source(self) -> Source | None:
        """Where `type(obj)` lives: the object's type is guarded when it is read through a
        source (TYPE_MATCH), so its class is that one object (`type(obj).__dict__`)."""
        if self.source is None or self.python_type() is not type(self.value):
            return None
        return TypeSource(self.source)

    def var_getattr(self, tx, name):
        hook = inspect.getattr_static(type(self.value), "__getattribute__")
        if inspect.isfunction(hook) and self.source is not None:
            # A Python __getattribute__ (transformers' configs map attribute aliases): run
            # it; its super().__getattribute__ comes back to generic_getattr.
            fn_source = AttrSource(TypeSource(self.source), "__getattribute__")
            try:
                return tx.inline_call(hook, fn_source, [self, ConstantVariable(name)], {})
            except TracedException as exc:  # type.__getattribute__'s slot: then __getattr__
                fallback = inspect.getattr_static(type(self.value), "__getattr__", None)
                if exc.exc_type is not AttributeError or not inspect.isfunction(fallback):
                    raise
            fn_source = AttrSource(TypeSource(self.source), "__getattr__")
            guard_identity(tx, fallback, fn_source)
            return tx.inline_call(fallback, fn_source, [self, ConstantVariable(name)], {})
        return self.generic_getattr(tx, name)

    def unpack(self, tx) -> list[VariableTracker]:
        """Iterating it: its class's Python __iter__, inlined and run to its end."""
        method = inspect.getattr_static(type(self.value), "__iter__", None)
        if not inspect.isfunction(method):
            raise Unsupported(f"iterating over {self}")
        if inspect.isgeneratorfunction(method) and self.source is not None:
            fn_source = AttrSource(TypeSource(self.source), "__iter__")
            return tx.run_generator(method, fn_source, [self])
        return self.var_getattr(tx, "__iter__").call_function(tx, [], {}).unpack(tx)

    def truthiness(self, tx) -> bool:
        """bool(obj): its type's Python __bool__, else its __len__, run inline; a class with
        neither (guarded by type) is always true. A C slot is refused."""
        cls = type(self.value)
        for name in ("__bool__", "__len__"):
            method = inspect.getattr_static(cls, name, None)
            if method is None:
                continue
            if not inspect.isfunction(method) or self.source is None:
                raise Unsupported(f"bool() of a {cls.__name__} ({name} is not a Python method)")
            fn_source = AttrSource(TypeSource(self.source), name)
            return hook_truth(name, tx.inline_call(method, fn_source, [self], {}))
        return True

    def generic_getattr(self, tx, name):
        """object.__getattribute__: instance dict, then the class (descriptors first)."""
        if self.source is None:
            raise Unsupported(f"attribute {name} of an object without a source")
        value = self.value
        kind = TypeVariable(type(value), source=TypeSource(self.source))
        through = descriptor_get(tx, self, type(value), kind, name)
        if through is not None:  # a Python data descriptor of the type wins over the dict
            return through
        try:  # the dict object's lookup reads, never what a Python hook calls `__dict__`
            instance_dict = object.__getattribute__(value, "__dict__")
        except AttributeError:
            instance_dict = {}
        if isinstance(value, threading.local):  # the calling thread's own dict (guards
            instance_dict = _thread_local_dict(value)  # read `obj.name` in theirs)
        seen = tx.output.containers_by_id.get(id(instance_dict))
        if seen is not None and seen[0] is instance_dict and isinstance(seen[1], ConstDictVariable):
            # the dict is already a tracker (read as `obj.__dict__` by a hook or a
            # descriptor, or reached through another object): its entries as the trace left
            # them (written or deleted there), each guarded once
            tracker = tx.wrap(instance_dict, GenericAttrSource(self.source, "__dict__"))
            if tracker is seen[1] and name in tracker.items:  # (the same dict, guarded)
                return tracker.items[name]
        elif name in instance_dict:
            return tx.wrap(instance_dict[name], self._instance_entry_source(name))
        try:
            attribute = inspect.getattr_static(value, name)
        except AttributeError:
            return self._missing(tx, name)
        if isinstance(attribute, property):
            if _c_getter(attribute.fget):
                # a C getter (pybind11's def_readonly / def_property): read now, and the
                # guard reads it again through the same property on each call
                return tx.wrap(getattr(value, name), AttrSource(self.source, name))
            return tx.inline_call(attribute.fget, None, [self], {})
        if is_logging_call(value, name):
            return LoggingCallVariable(self, name)
        if inspect.isfunction(attribute):
            fn_source = AttrSource(TypeSource(self.source), name)
            return UserMethodVariable(attribute, self, fn_source=fn_source)
        if name == "__dict__" and hasattr(type(value), "__getattr__") and _own_dict(value):
            # the instance dict's own slot never raises, so the class's __getattr__ is not
            # reached: the dict the lookups above read, guarded through object's lookup
            return tx.wrap(instance_dict, GenericAttrSource(self.source, "__dict__"))
        if hasattr(type(value), "__getattr__") and hasattr(type(attribute), "__get__"):
            # a descriptor raising AttributeError would fall back to __getattr__
            raise Unsupported(f"{type(value).__name__} customizes attribute access")
        if _python_getattribute(type(value)):
            # Reached through the hook's super(): the guard reads what was read here,
            # object's own lookup, without running the hook on every guard call.
            found = object.__getattribute__(value, name)
            return tx.wrap(found, GenericAttrSource(self.source, name))
        elif type(type(value).__getattribute__) is not type(object.__getattribute__):
            raise Unsupported(f"{type(value).__name__} customizes attribute access")
        else:
            found = getattr(value, name)
        return tx.wrap(found, AttrSource(self.source, name))

    def traces_getattribute(self) -> bool:
        """Whether attribute reads run the class's Python __getattribute__ (inlined)."""
        return self.source is not None and _python_getattribute(type(self.value))

    def _missing(self, tx, name: str) -> VariableTracker:
        """object.__getattribute__ finds nothing: the class's Python __getattr__ answers,
        inlined, guarded by the absence of `name` where object's lookup looked (the
        instance dict and the class); without one, an AttributeError (_raise_missing)."""
        cls = type(self.value)
        hook = inspect.getattr_static(cls, "__getattr__", None)
        if (
            not inspect.isfunction(hook)
            or self.source is None
            or not _plain_instance_dict(cls)
            or type(cls.__getattribute__) is not type(object.__getattribute__)
        ):
            self._raise_missing(tx, name)
        where, kind = tx.location(), TypeSource(self.source)
        for source in (ItemSource(GenericAttrSource(self.source, "__dict__"), name),
                       AttrSource(kind, name)):  # fmt: skip
            tx.output.add_guard(Guard(source, GuardKind.ABSENT, user_location=where))
        fn_source = AttrSource(kind, "__getattr__")
        return tx.inline_call(hook, fn_source, [self, ConstantVariable(name)], {})

    def _raise_missing(self, tx, name: str) -> NoReturn:
        """object.__getattribute__ finds nothing. Under a Python __getattribute__ hook
        (transformers' configs: `getattr(config, "sliding_window", None)`) that is an
        AttributeError, guarded by what object.__getattribute__ looked at: `name` is not in
        the instance dict, not on the class or its bases, and the class has no __getattr__
        to fall back to. The guard `not hasattr(obj, name)` would run the hook on every
        guard call (~1.5 us each)."""

        cls = type(self.value)
        # A Python __getattr__ is the hook's caller's fallback (var_getattr), not this
        # lookup's: object.__getattribute__ raises all the same.
        fallback = inspect.getattr_static(cls, "__getattr__", None)
        if (
            not self.traces_getattribute()
            or hasattr(cls, name)
            or (fallback is not None and not inspect.isfunction(fallback))
            or not _plain_instance_dict(cls)
        ):
            raise Unsupported(f"{cls.__name__} has no attribute {name!r}")
        where = tx.location()
        kind = TypeSource(self.source)
        absent = [
            ItemSource(GenericAttrSource(self.source, "__dict__"), name),
            AttrSource(kind, name),
        ]
        if fallback is None:
            absent.append(AttrSource(kind, "__getattr__"))
        for source in absent:
            tx.output.add_guard(Guard(source, GuardKind.ABSENT, user_location=where))
        raise TracedException(AttributeError, f"{cls.__name__!r} object has no attribute {name!r}")

    def _instance_entry_source(self, name: str) -> Source:
        """Where the guards read an instance-dict entry that object.__getattribute__ found.
        Under a Python __getattribute__ (transformers' configs), `obj.name` would run that
        hook on every guard call and repeat the guard of a read of the instance dict: the
        entry is read from the dict instead (`object.__getattribute__(obj, '__dict__')`, as
        generic_getattr read it), which is what the program read, as long as no data
        descriptor of the type shadows it and the type's `__dict__` is the plain one."""

        cls = type(self.value)
        if not _python_getattribute(cls):
            return AttrSource(self.source, name)  # a C getattr: reading `obj.name` is cheap
        shadow = inspect.getattr_static(cls, name, None)
        if hasattr(type(shadow), "__set__") or hasattr(type(shadow), "__delete__"):
            return AttrSource(self.source, name)
        if not _plain_instance_dict(cls):
            return AttrSource(self.source, name)
        return ItemSource(GenericAttrSource(self.source, "__dict__"), name)

    def generic_setattr(self, tx, name: str, value: VariableTracker) -> None:
        """object.__setattr__ reached from a Python __setattr__: a write replayed later
        (or the type's data descriptor, run inline)."""
        if not self.descriptor_set(tx, name, value):
            record_write(tx, self, name, value, generic=True)

    def descriptor_set(self, tx, name: str, value: VariableTracker) -> bool:
        """`self.name = value` through a property or Python data descriptor of the type."""
        source = TypeSource(self.source) if self.source is not None else None
        return descriptor_set(tx, self, type(self.value), source, name, value)

    def dict_contents(self, tx) -> VariableTracker:
        """The entries of a dict subclass instance, as dict's own methods see them: guarded
        by its keys and each value, read through dict's lookup. Where the subclass's
        `__getitem__` is its own (transformers' ClassInstantier builds an object per
        lookup), a value is read by position from `list(obj.values())` (dict's C view,
        which never calls it); an iteration or `values` of its own Python is refused."""
        value, cls = self.value, type(self.value)
        own = [n for n in ("__iter__", "values") if _python_override(cls, n)]
        if not isinstance(value, dict) or own or self.source is None:
            raise Unsupported(f"dict methods of a {cls.__name__} ({own or 'no source'})")
        if not all(is_constant_value(k) for k in value):
            raise Unsupported("dict with non-constant keys")
        tx.output.add_guard(
            Guard(
                self.source, GuardKind.DICT_KEYS, (cls, tuple(value)), user_location=tx.location()
            )
        )
        if cls.__getitem__ is dict.__getitem__:
            items = {k: tx.wrap(v, ItemSource(self.source, k)) for k, v in value.items()}
        else:
            values = DictValuesSource(self.source)
            items = {k: tx.wrap(v, ItemSource(values, i)) for i, (k, v) in enumerate(value.items())}
        return ConstDictVariable(items)

    def call_method(self, tx, name, args, kwargs):
        # Dunder methods (obj[k], len(obj)...) dispatch on the type: inline Python ones.
        attribute = inspect.getattr_static(type(self.value), name, None)
        if inspect.isfunction(attribute) and self.source is not None:
            fn_source = AttrSource(TypeSource(self.source), name)
            return tx.inline_call(attribute, fn_source, [self, *args], kwargs)
        if isinstance(attribute, staticmethod | classmethod) and self.source is not None:
            return _call_static_or_class(tx, self, attribute, name, args, kwargs)
        if name.startswith("__") and name.endswith("__"):
            raise Unsupported(f"{type(self.value).__name__}.{name} is not a Python method")
        return super().call_method(tx, name, args, kwargs)

    def call_function(self, tx, args, kwargs):
        if _implemented_in_c(self.value):
            name = getattr(self.value, "__qualname__", None) or repr(self.value)
            raise Unsupported(
                f"call to {name}, a function implemented in C (its effects are not in the graph)"
            )
        return self.call_method(tx, "__call__", args, kwargs)

    def __repr__(self) -> str:
        return f"UserDefinedObjectVariable({type(self.value).__name__})"


def _call_static_or_class(tx, obj, attribute, name: str, args, kwargs) -> VariableTracker:
    """`obj(...)` / `obj[k]` where the class defines the dunder as a staticmethod (torch's
    `comptime(fn)`) or a classmethod: the function is called without the instance, or with
    its class, as Python's type-level lookup binds it."""
    fn = attribute.__func__
    if not inspect.isfunction(fn):
        raise Unsupported(f"{type(obj.value).__name__}.{name} wraps {type(fn).__name__}")
    type_source = TypeSource(obj.source)
    if isinstance(attribute, staticmethod):
        return tx.inline_call(fn, AttrSource(type_source, name), list(args), kwargs)
    # a classmethod read from the type is a new bound method each time: its function
    fn_source = AttrSource(AttrSource(type_source, name), "__func__")
    owner = tx.wrap(type(obj.value), type_source)
    return tx.inline_call(fn, fn_source, [owner, *args], kwargs)


def _implemented_in_c(value: Any) -> bool:
    """A builtin, or a method of a function compiled to C (Cython's, whose __code__ holds
    no bytecode)."""
    if isinstance(value, types.BuiltinFunctionType | types.BuiltinMethodType):
        return True
    return isinstance(value, types.MethodType) and not inspect.isfunction(value.__func__)


def _python_override(cls: type, name: str) -> bool:
    """`cls.name` is a Python function (a class of the user's), not a C slot of dict's."""
    return inspect.isfunction(inspect.getattr_static(cls, name, None))


class NullVariable(VariableTracker):
    """The NULL that 3.11+ pushes under a callable."""

    def __repr__(self) -> str:
        return "NULL"


# ---- calling a class: what it constructs ------------------------------------------------
# Rules registered by the modules that know the class (`@constructor(name)`), tried in this
# order; each is (tx, the class's tracker, args, kwargs) -> tracker, or None: not its class.
CONSTRUCT_ORDER = (
    "builtin_type",  # int(), str(), classes with a builtins rule (builtins.py)
    "method_wrapper",  # staticmethod(f) / classmethod(f) in a class body (class_definition.py)
    "generator_context",  # @contextmanager's _GeneratorContextManager (generator_context.py)
    "context_manager",  # no_grad, set_grad_enabled, nullcontext... (contexts.py)
    "autocast",  # torch.autocast (autocast_context.py)
    "catch_warnings",  # warnings.catch_warnings(): a block traced as a no-op (warning_calls.py)
    "keyed_output",  # HF ModelOutput dataclasses (keyed_output.py)
    "enum_member",  # Color(2): an enum's member by value (constructed.py)
    "struct_sequence",  # torch.return_types.max((v, i)) (constructed.py)
    "constructed",  # namedtuples, dataclasses... rebuilt by calling the class (constructed.py)
    "stateless_module",  # torch.nn's parameter-free modules (nn_module.py)
    "torch_value_type",  # torch.finfo/iinfo/device/Size of constants (builtins.py)
    "legacy_tensor_type",  # torch.LongTensor([...]) of constants: torch.tensor (torch_functions.py)
    "builtin_exception",  # ValueError(...) raised in the trace (exceptions.py)
    "weak_reference",  # weakref.ref(obj) of an object made in the trace (weak_refs.py)
    "container_subclass",  # user subclasses of list and dict (container_subclasses.py)
    "made_parameter",  # nn.Parameter(t, requires_grad=False) of a traced tensor (graph_leaves.py)
    "autograd_function",  # MyFunction(): an instance used for its .apply (autograd_function.py)
    "traced_object",  # plain Python classes: __init__ inlined, or the refusal (traced_objects.py)
)
Construct = Callable[
    ["Translator", TypeVariable, list[VariableTracker], dict[str, VariableTracker]],
    "VariableTracker | None",
]
_CONSTRUCTORS: dict[str, Construct] = {}
_ORDERED_CONSTRUCTORS: list[Construct] = []


def constructor(name: str) -> Callable[[Construct], Construct]:
    """Registers the decorated rule for calling a class, under `name` (in CONSTRUCT_ORDER)."""
    if name not in CONSTRUCT_ORDER:
        raise ValueError(f"constructor rule {name!r} is not in CONSTRUCT_ORDER")

    def register(fn: Construct) -> Construct:
        if name in _CONSTRUCTORS:
            raise ValueError(f"two constructor rules named {name!r}")
        _CONSTRUCTORS[name] = fn
        _ORDERED_CONSTRUCTORS[:] = [_CONSTRUCTORS[n] for n in CONSTRUCT_ORDER if n in _CONSTRUCTORS]
        return fn

    return register


# ---- wrapping real values (variables/builder.py) ----------------------------------------
@wrap_rule("python_module", types=types.ModuleType)
def _wrap_module(tx: Translator, value: types.ModuleType, source: Source | None) -> VariableTracker:
    if source is not None:
        guard(tx, source, GuardKind.ID_MATCH, value)
    return PythonModuleVariable(value, source=source)


@wrap_rule("class", types=type)
def _wrap_class(tx: Translator, value: type, source: Source | None) -> VariableTracker:
    if source is not None:
        guard(tx, source, GuardKind.ID_MATCH, value)
    return TypeVariable(value, source=source)


@wrap_rule("object")
def _wrap_object(tx: Translator, value: Any, source: Source | None) -> VariableTracker:
    if source is None:
        raise Unsupported(f"a {type(value).__name__} without a source")
    guard(tx, source, GuardKind.TYPE_MATCH, type(value))
    note_object(tx, value, source)
    return UserDefinedObjectVariable(value, source=source)


def _identity_key(tx, tracker: UserDefinedObjectVariable) -> IdentityKey | None:
    """A frame object hashed by identity as a dict key (a handler table keyed by objects):
    what its lookups find holds for this object only, guarded by identity."""
    if tx is None or tracker.source is None or not hashes_by_identity(tracker.value):
        return None
    guard(tx, tracker.source, GuardKind.ID_MATCH, tracker.value)
    return IdentityKey(tracker)


TRACKER_KEYS[UserDefinedObjectVariable] = _identity_key


__all__ = ["ConstantVariable", "NullVariable", "PythonModuleVariable", "TypeVariable"]
