"""`class C(Base): ...` executed inside a traced frame (LOAD_BUILD_CLASS).

The class body is traced like a function whose locals are the class namespace (LOAD_NAME /
STORE_NAME), so what it does -- defining methods, reading globals, side effects -- is
followed as eager code would run it. The class object itself is not built: the trace keeps
a description of it that can be stored and dropped, and any use of it (calling it, reading
an attribute, returning it out of the compiled region) is a graph break naming the class.
`torch.masked` defines an autograd.Function this way on every call and uses it only for
MaskedTensor inputs.

Building a class runs more than its body: the metaclass and the bases' __init_subclass__.
Only metaclasses whose construction has no effect a program could rely on are accepted
(`type`; autograd's FunctionMeta, which makes the backward class and draws an id from
a counter), with no custom __init_subclass__ on any base.
"""

from __future__ import annotations

from typing import Any

import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.functions import (
    NestedUserFunctionVariable,
    UserFunctionVariable,
)
from ember_bytecode_tracer.variables.objects import TypeVariable, constructor

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
    """A class whose definition ran in the trace; the class object is never built."""

    def __init__(self, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> None:
        super().__init__()
        self.name = name
        self.bases = bases
        self.namespace = namespace

    def python_type(self) -> type:
        return type

    def _unusable(self, what: str) -> Unsupported:
        return Unsupported(
            f"{what} class {self.name}, defined inside the traced frame (the trace does not "
            "build classes): define it at module level to use it in compiled code"
        )

    def var_getattr(self, tx, name):
        raise self._unusable(f"reading {name!r} of")

    def call_function(self, tx, args, kwargs):
        raise self._unusable("calling")

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
