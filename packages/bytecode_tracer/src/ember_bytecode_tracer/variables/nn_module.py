"""nn.Module instances: attribute reads are guarded, calls inline `forward`."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, Guard, GuardKind, ItemSource, TypeSource
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.dicts import ConstDictVariable
from ember_bytecode_tracer.variables.functions import UserMethodVariable
from ember_bytecode_tracer.variables.iterators import ListIteratorVariable
from ember_bytecode_tracer.variables.lists import BoundMethodOfTracker, ListVariable, TupleVariable
from ember_bytecode_tracer.variables.module_hooks import call_with_hooks
from ember_bytecode_tracer.variables.object_identity import note_object
from ember_bytecode_tracer.variables.objects import TypeVariable, constructor

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source


class NNModuleVariable(VariableTracker):
    def __init__(self, module: nn.Module, *, source: Source | None) -> None:
        super().__init__(source=source)
        self.module = module

    def python_type(self) -> type:
        return type(self.module)

    def as_python_constant(self) -> Any:
        return self.module

    def _child(self, tx, name: str, value: Any) -> VariableTracker:
        if self.source is None:
            # A module built during the trace from constants: its attributes are too.
            return tx.wrap(value, None)
        return tx.wrap(value, AttrSource(self.source, name))

    def var_getattr(self, tx, name: str) -> VariableTracker:
        # Python's order: the class's data descriptors, the instance dict, other class
        # attributes (a method named like a submodule wins), and only then nn.Module's
        # __getattr__ over its parameters, buffers and submodules.
        module = self.module
        d = module.__dict__
        attribute = _class_attribute(type(module), name)
        if name in d and not _is_data_descriptor(attribute):
            return self._child(tx, name, d[name])
        if attribute is _MISSING:
            for table in ("_parameters", "_buffers", "_modules"):
                if name in d.get(table, {}):
                    value = d[table][name]
                    if value is None:
                        return ConstantVariable(None)
                    return self._child(tx, name, value)
            raise Unsupported(f"{type(module).__name__} has no attribute {name!r}")
        if isinstance(attribute, property):
            return tx.inline_call(attribute.fget, None, [self], {})
        if isinstance(attribute, staticmethod):
            return self._child(tx, name, getattr(module, name))
        if isinstance(attribute, classmethod):
            # bound to the class (guarded by the module's type); reached by its __func__
            owner_source = None if self.source is None else TypeSource(self.source)
            owner = TypeVariable(type(module), source=owner_source)
            fn_source = None
            if self.source is not None:
                fn_source = AttrSource(_class_attr_source(self.source, name), "__func__")
            return UserMethodVariable(attribute.__func__, owner, fn_source=fn_source)
        if name in _LISTINGS and attribute is getattr(nn.Module, name):
            # `model.parameters()` as a method load + call: the same listing as call_method
            # (nn.Module's own generators, not traced as generator frames)
            return BoundMethodOfTracker(self, name)
        if inspect.isfunction(attribute):
            return UserMethodVariable(
                attribute, self, fn_source=_class_attr_source(self.source, name)
            )
        return self._child(tx, name, getattr(module, name))

    def call_function(self, tx, args, kwargs):
        module = self.module
        call = inspect.getattr_static(type(module), "__call__")
        if call is not _MODULE_CALL and not _plain_graph_module_call(module, call):
            # The class replaces nn.Module.__call__ (hooks, forward): Python runs its own.
            if not inspect.isfunction(call):
                raise Unsupported(f"{type(module).__name__}.__call__ is not a plain method")
            source = (
                _class_attr_source(self.source, "__call__") if self.source is not None else None
            )
            return tx.inline_call(call, source, [self, *args], kwargs)
        return self.module_call(tx, args, kwargs)

    def module_call(self, tx, args, kwargs) -> VariableTracker:
        """nn.Module.__call__ itself (also as `super().__call__(...)` from an override)."""

        return call_with_hooks(tx, self, list(args), dict(kwargs), self._forward_call(tx))

    def _forward_call(self, tx):
        """What nn.Module.__call__ runs between the hooks: the instance's `forward` where one
        is set on it, else the class's."""
        module = self.module

        def call(args, kwargs):
            if "forward" in module.__dict__:
                forward = self._child(tx, "forward", module.__dict__["forward"])
                return forward.call_function(tx, args, kwargs)
            forward = inspect.getattr_static(module, "forward")
            if isinstance(forward, staticmethod) and inspect.isfunction(forward.__func__):
                source = None if self.source is None else _class_attr_source(self.source, "forward")
                return tx.inline_call(forward.__func__, source, list(args), kwargs)
            if not inspect.isfunction(forward):
                raise Unsupported(f"{type(module).__name__}.forward is not a plain method")
            source = None
            if self.source is not None:
                # The class's forward stands only while the instance sets none of its own.
                entry = ItemSource(AttrSource(self.source, "__dict__"), "forward")
                tx.output.add_guard(Guard(entry, GuardKind.ABSENT, user_location=tx.location()))
                source = _class_attr_source(self.source, "forward")
            return tx.inline_call(forward, source, [self, *args], kwargs)

        return call

    def call_method(self, tx, name, args, kwargs):
        module = self.module
        if name in _LISTINGS:
            return self._listing(tx, name, args, kwargs)
        if name == "__len__" and isinstance(module, _CONTAINERS + _PARAMETER_CONTAINERS):
            return self.python_len(tx)
        if name == "__getitem__" and isinstance(module, _CONTAINERS + _PARAMETER_CONTAINERS):
            return self.getitem(tx, args[0])
        if name in ("keys", "values", "items") and isinstance(
            module, nn.ModuleDict | nn.ParameterDict
        ):
            keys = self._container_keys(tx)
            children = [self.getitem(tx, ConstantVariable(k)) for k in keys]
            if name == "keys":
                return ListVariable([ConstantVariable(k) for k in keys])
            if name == "values":
                return ListVariable(children)
            return ListVariable(
                [
                    TupleVariable([ConstantVariable(k), c])
                    for k, c in zip(keys, children, strict=True)
                ]
            )
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def python_len(self, tx) -> VariableTracker:
        """len(module): the class's own Python __len__ inlined, a container's children
        counted (their keys guarded)."""
        own = self._own_method("__len__")
        if own is not None:
            return tx.inline_call(own, self._method_source("__len__"), [self], {})
        if isinstance(self.module, _CONTAINERS + _PARAMETER_CONTAINERS):
            return ConstantVariable(len(self._container_keys(tx)))
        raise Unsupported(f"len() of {type(self.module).__name__}")

    def _container_keys(self, tx) -> list:
        """A container's keys in order (ModuleList, Sequential and ParameterList: their
        indices), guarded: a ParameterList by its length, a ParameterDict by its `_keys`,
        the others by their `_modules` keys."""
        module = self.module
        if isinstance(module, nn.ParameterList):
            size = tx.wrap(module._size, AttrSource(self.source, "_size"))
            return list(range(size.as_python_constant()))
        if isinstance(module, nn.ParameterDict):
            guard(tx, AttrSource(self.source, "_keys"), GuardKind.DICT_KEYS,
                  (type(module._keys), tuple(module._keys)))  # fmt: skip
            return list(module._keys)
        self._guard_children(tx)
        return (
            list(module.keys()) if isinstance(module, nn.ModuleDict) else list(range(len(module)))
        )

    def _own_method(self, name: str) -> Any:
        """The class's Python-level `name` where user code defines it (not torch.nn's)."""
        method = _class_attribute(type(self.module), name)
        if not inspect.isfunction(method) or method.__module__.startswith("torch.nn."):
            return None
        return method

    def _method_source(self, name: str) -> Source | None:
        return None if self.source is None else _class_attr_source(self.source, name)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        own = self._own_method("__getitem__")
        if own is not None:
            return tx.inline_call(own, self._method_source("__getitem__"), [self, index], {})
        key = index.as_python_constant()
        if isinstance(self.module, nn.ParameterList | nn.ParameterDict):
            return self._parameter_item(tx, key)
        if isinstance(key, slice):
            # The children the slice picks, each reachable (and guarded) by its index.
            self._guard_children(tx)
            picked = range(len(self.module))[key]
            return TupleVariable(
                [tx.wrap(self.module[i], ItemSource(self.source, i)) for i in picked]
            )
        return tx.wrap(self.module[key], ItemSource(self.source, key))

    def _parameter_item(self, tx, key: Any) -> VariableTracker:
        """`plist[i]` / `pdict[k]`: the entry is the container's attribute `str(i)` / `k`
        (what their `__getitem__` reads), so it is guarded and read as one."""
        if isinstance(self.module, nn.ParameterDict):
            if type(key) is not str:
                raise Unsupported(f"ParameterDict[{type(key).__name__}]")
            return tx.wrap(self.module[key], AttrSource(self.source, key))
        if type(key) is not int:
            raise Unsupported(f"ParameterList[{type(key).__name__}] (slices build new lists)")
        size = len(self._container_keys(tx))
        if not -size <= key < size:
            raise Unsupported(f"ParameterList index {key} out of range")
        index = key % size
        return tx.wrap(self.module[index], AttrSource(self.source, str(index)))

    def _guard_children(self, tx) -> None:
        """The trace depends on which children a container module has."""

        children = self.module._modules
        guard(
            tx,
            AttrSource(self.source, "_modules"),
            GuardKind.DICT_KEYS,
            (type(children), tuple(children)),
        )

    def unpack(self, tx) -> list[VariableTracker]:
        module = self.module
        if isinstance(module, nn.ModuleDict):
            self._guard_children(tx)
            return [ConstantVariable(k) for k in module]
        if isinstance(module, nn.ModuleList | nn.Sequential):
            self._guard_children(tx)
            return [self.getitem(tx, ConstantVariable(i)) for i in range(len(module))]
        if isinstance(module, nn.ParameterDict) and self._own_method("__iter__") is None:
            return [ConstantVariable(k) for k in self._container_keys(tx)]
        if isinstance(module, nn.ParameterList) and self._own_method("__iter__") is None:
            return [self._parameter_item(tx, i) for i in self._container_keys(tx)]
        raise Unsupported(f"iterating over {type(module).__name__}")

    def _listing(self, tx, name, args, kwargs) -> VariableTracker:
        named = name.startswith("named_")
        plain = name.removeprefix("named_")
        options = _listing_options(name, args, kwargs)
        prefix = options.pop("prefix", "")
        if self.source is not None:
            self._guard_listing_keys(tx, _LISTED_TABLES[plain])
        items = []
        for path, value in getattr(self.module, f"named_{plain}")(**options):
            source = self.source
            for part in path.split("."):
                if part:
                    source = AttrSource(source, part)
            tracker = tx.wrap(value, source)
            shown = f"{prefix}.{path}" if prefix and path else prefix or path
            items.append(TupleVariable([ConstantVariable(shown), tracker]) if named else tracker)
        return ListIteratorVariable(items)

    def _guard_listing_keys(self, tx, tables: tuple[str, ...]) -> None:
        """A listing's order and members follow the keys of each module's tables (a
        parameter popped and re-added moves to the end): pin them, module by module."""

        for path, module in self.module.named_modules(remove_duplicate=False):
            source = self.source
            for part in path.split("."):
                if part:
                    source = AttrSource(source, part)
            for table in tables:
                entries = module.__dict__[table]
                guard(
                    tx,
                    AttrSource(source, table),
                    GuardKind.DICT_KEYS,
                    (type(entries), tuple(entries)),
                )

    def __repr__(self) -> str:
        return f"NNModuleVariable({type(self.module).__name__})"


def _listing_options(name: str, args, kwargs) -> dict[str, Any]:
    """A listing's arguments (constants), as keywords of its `named_` form."""
    try:
        values = [a.as_python_constant() for a in args]
        named = {k: v.as_python_constant() for k, v in kwargs.items()}
    except Unsupported:
        raise Unsupported(f"Module.{name} with arguments not known at trace time") from None
    bound = inspect.signature(getattr(nn.Module, name)).bind(None, *values, **named)
    options = dict(bound.arguments)
    options.pop(next(iter(options)))  # self
    if options.get("memo") is not None:
        raise Unsupported(f"Module.{name} with a memo set")
    options.pop("memo", None)
    return options


_LISTINGS = ("parameters", "named_parameters", "buffers", "named_buffers", "children",
             "named_children", "modules", "named_modules")  # fmt: skip


# The tables whose keys decide what (and in which order) each listing yields.
_LISTED_TABLES = {
    "parameters": ("_modules", "_parameters"),
    "buffers": ("_modules", "_buffers"),
    "children": ("_modules",),
    "modules": ("_modules",),
}


_CONTAINERS = (nn.ModuleList, nn.Sequential, nn.ModuleDict)
_PARAMETER_CONTAINERS = (nn.ParameterList, nn.ParameterDict)
_MODULE_CALL = inspect.getattr_static(nn.Module, "__call__")
# the `__call__` every fx GraphModule class gets (`call_wrapped`, one function per class, one
# code object): nn.Module.__call__ inside a try/except that only adds the generated code's
# line to an error's printout before raising it again
_GRAPH_MODULE_CALL = inspect.getattr_static(
    type(torch.fx.GraphModule(nn.Module(), torch.fx.Graph())), "__call__"
).__code__
_MISSING = object()


def _class_attribute(cls: type, name: str) -> Any:
    """What the class's MRO holds under `name` (no descriptor run), or _MISSING."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return _MISSING


def _is_data_descriptor(attribute: Any) -> bool:
    kind = type(attribute)
    return hasattr(kind, "__set__") or hasattr(kind, "__delete__")


def _plain_graph_module_call(module: nn.Module, call: Any) -> bool:
    """A GraphModule called through fx's wrapper around nn.Module.__call__ (its class sets no
    `__call__` of its own): traced as nn.Module.__call__ (hooks, forward), as torch.compile
    does. The wrapper's except clause only prints where in the generated code an error was
    raised (to stderr) before raising it again; a graph that raises skips that printout."""
    if not isinstance(module, torch.fx.GraphModule) or getattr(call, "__code__", None) is not (
        _GRAPH_MODULE_CALL
    ):
        return False
    wrapped = inspect.getattr_static(type(module), "_wrapped_call", None)
    return getattr(wrapped, "cls_call", _MISSING) is None


def _class_attr_source(source: Source, name: str) -> Source:
    """type(obj).name: how generated guards reach a method (and its __globals__)."""

    return AttrSource(TypeSource(source), name)


def is_module(value: Any) -> bool:
    return isinstance(value, nn.Module)


def is_parameter_or_buffer(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


__all__ = ["ConstDictVariable", "NNModuleVariable", "is_module"]


# ---- calling a class: torch.nn's own stateless modules ----------------------------------
def _is_stateless_torch_module(cls: type) -> bool:
    """torch.nn's own parameter-free modules (losses, activations): safe to build at trace
    time, as their constructors only store the constant arguments."""
    return (
        isinstance(cls, type)
        and issubclass(cls, torch.nn.Module)
        and cls.__module__.startswith("torch.nn.modules.")
        and cls.__module__.rsplit(".", 1)[-1] in ("loss", "activation", "dropout", "flatten")
    )


@constructor("stateless_module")
def _build_stateless_module(tx, kind: TypeVariable, args, kwargs) -> VariableTracker | None:
    cls = kind.cls
    if not _is_stateless_torch_module(cls):
        return None
    try:
        a = [x.as_python_constant() for x in args]
        k = {n: x.as_python_constant() for n, x in kwargs.items()}
    except Unsupported:
        raise Unsupported(
            f"constructing {cls.__name__} from values unknown at trace time"
        ) from None
    module = cls(*a, **k)
    if any(True for _ in module.parameters()) or any(True for _ in module.buffers()):
        raise Unsupported(f"constructing {cls.__name__}, which has parameters, inside a trace")
    return NNModuleVariable(module, source=None)


# ---- wrapping real values (variables/builder.py) ----------------------------------------
@wrap_rule("nn_module", types=nn.Module)
def _wrap_module(tx, value: nn.Module, source: Source | None) -> VariableTracker:
    # Modules are guarded by class, not identity: every attribute a trace reads from
    # them is guarded on its own (parameters by tensor metadata, flags by value,
    # submodules by class), so the twelve layers of a BERT encoder share one trace.
    if source is not None:
        guard(tx, source, GuardKind.TYPE_MATCH, type(value))
        note_object(tx, value, source)
    return NNModuleVariable(value, source=source)
