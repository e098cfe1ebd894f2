"""`class C(Base): ...` executed inside a traced frame (LOAD_BUILD_CLASS).

The class body is traced like a function whose locals are the class namespace (LOAD_NAME /
STORE_NAME), so what it does -- defining methods, reading globals, side effects -- is
followed as eager code would run it. The trace keeps a description of the class that can be
stored and dropped (`torch.masked` defines an autograd.Function this way on every call and
uses it only for MaskedTensor inputs). Calling the class or reading its attributes builds a
real class at trace time from the body's namespace (constants, and methods that close over
nothing, made into plain functions), private to this trace: its instances are traced
objects (traced_objects.py), and neither the class nor an instance may leave the compiled
region (eager makes a new class on every call): returning or storing one is a graph break.

Building a class runs more than its body: the metaclass and the bases' __init_subclass__.
Only metaclasses whose construction has no effect a program could rely on are accepted
(`type`; autograd's FunctionMeta, which makes the backward class and draws an id from
a counter), with no custom __init_subclass__ on any base.
"""

from __future__ import annotations

import types
from typing import Any

import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.functions import (
    NestedUserFunctionVariable,
    UserFunctionVariable,
)
from ember_bytecode_tracer.variables.objects import (
    FRAME_LOCAL_CLASSES,
    TypeVariable,
    constructor,
)

# Metaclasses whose class construction has no observable effect beyond the class object.
HARMLESS_METACLASSES = {type, torch.autograd.function.FunctionMeta}
# What a class body may bind: values without __set_name__ hooks or other class-time effects.
_NAMESPACE_VALUES = (
    ConstantVariable,
    NestedUserFunctionVariable,
    UserFunctionVariable,
    TypeVariable,
)


class MethodWrapperVariable(VariableTracker):
    """staticmethod(f) / classmethod(f) made in a class body."""

    def __init__(self, kind: type, func: VariableTracker) -> None:
        super().__init__()
        self.kind = kind
        self.func = func

    def python_type(self) -> type:
        return self.kind


class TracedClassVariable(VariableTracker):
    """A class whose definition ran in the trace; the class object is built when used."""

    def __init__(self, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> None:
        super().__init__()
        self.name = name
        self.bases = bases
        self.namespace = namespace
        self._built: type | None = None

    def python_type(self) -> type:
        return type

    def built(self) -> TypeVariable:
        """The class as a real one, made once per trace (never seen outside it)."""
        if self._built is None:
            namespace = {k: _real_value(self.name, k, v) for k, v in self.namespace.items()}
            metaclass = types.prepare_class(self.name, self.bases)[0]  # checked harmless
            self._built = metaclass(self.name, self.bases, namespace)
            FRAME_LOCAL_CLASSES.add(self._built)
        return TypeVariable(self._built)

    def var_getattr(self, tx, name):
        return self.built().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs):
        return self.built().call_function(tx, args, kwargs)

    def __repr__(self) -> str:
        return f"TracedClassVariable({self.name})"


class BuildClassVariable(VariableTracker):
    """builtins.__build_class__, as LOAD_BUILD_CLASS pushes it."""

    def call_function(self, tx, args, kwargs):
        if kwargs:
            raise Unsupported(f"class definition with keywords {sorted(kwargs)}")
        if len(args) < 2 or not isinstance(args[0], NestedUserFunctionVariable):
            raise Unsupported("__build_class__ called other than by a class statement")
        body, name = args[0], args[1].as_python_constant()
        bases = tuple(_base_class(b) for b in args[2:]) or (object,)
        _check_class_creation_is_harmless(name, bases)
        namespace = _run_body(tx, body, name)
        return TracedClassVariable(name, bases, namespace)


def _real_value(cls_name: str, key: str, value: VariableTracker) -> Any:
    """A class-body binding as the class object holds it."""
    if isinstance(value, TracedClassVariable):
        return value.built().cls
    if isinstance(value, MethodWrapperVariable):
        return value.kind(_real_value(cls_name, key, value.func))
    if isinstance(value, NestedUserFunctionVariable):
        return _plain_function(cls_name, key, value)
    if isinstance(value, UserFunctionVariable):
        return value.fn
    return value.as_python_constant()


def _plain_function(cls_name: str, key: str, fn: NestedUserFunctionVariable) -> Any:
    """A method made in the class body as a function object: only when it closes over
    nothing and its defaults are constants (its code then fixes what it does)."""
    constants = [*fn.defaults, *fn.kwdefaults.values()]
    if fn.closure or not all(d.is_python_constant() for d in constants):
        raise Unsupported(
            f"class {cls_name}, defined inside the traced frame: its {key} closes over local "
            "variables or has defaults unknown at trace time"
        )
    made = types.FunctionType(fn.code, fn.f_globals, fn.code.co_name)
    made.__defaults__ = tuple(d.as_python_constant() for d in fn.defaults) or None
    made.__kwdefaults__ = {k: v.as_python_constant() for k, v in fn.kwdefaults.items()} or None
    made.__qualname__ = fn.qualname
    return made


def _base_class(value: VariableTracker) -> type:
    base = value.as_python_constant() if value.is_python_constant() else None
    if not isinstance(base, type):
        raise Unsupported(f"class definition with a base class unknown at trace time: {value}")
    return base


def _check_class_creation_is_harmless(name: str, bases: tuple[type, ...]) -> None:
    for base in bases:
        if type(base) not in HARMLESS_METACLASSES:
            raise Unsupported(
                f"class {name}: metaclass {type(base).__qualname__} of base "
                f"{base.__qualname__} may run code when the class is built"
            )
        for klass in base.__mro__:
            if klass is not object and "__init_subclass__" in vars(klass):
                raise Unsupported(
                    f"class {name}: base {klass.__qualname__} defines __init_subclass__"
                )


def _run_body(tx, body: NestedUserFunctionVariable, name: str) -> dict[str, VariableTracker]:
    code = body.code
    if "__class__" in code.co_cellvars or "__classcell__" in code.co_names:
        raise Unsupported(f"class {name} uses super() or __class__ (needs the built class)")
    closure_vars = dict(zip(code.co_freevars, body.closure, strict=True))
    returned, namespace = tx.run_class_body(code, body.f_globals, closure_vars)
    if not (returned.is_python_constant() and returned.as_python_constant() is None):
        raise Unsupported(f"class {name}: the class body returned a value")
    for key, value in namespace.items():
        if not isinstance(value, (*_NAMESPACE_VALUES, MethodWrapperVariable, TracedClassVariable)):
            raise Unsupported(f"class {name}: attribute {key} = {value} in the class body")
    return namespace


@constructor("method_wrapper")
def _construct_method_wrapper(tx, kind: TypeVariable, args, kwargs) -> VariableTracker | None:
    if kind.cls in (staticmethod, classmethod) and len(args) == 1 and not kwargs:
        return MethodWrapperVariable(kind.cls, args[0])
    return None
