"""An exception raised and caught inside the traced code."""

from __future__ import annotations

from typing import Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.objects import TypeVariable, constructor


class ExceptionVariable(VariableTracker):
    """An exception object: built by calling a builtin exception class (`caught` False:
    it holds only its args, and is rebuilt as `cls(*args)` if it leaves the trace), or caught
    by an `except` clause (it has a traceback and context, and cannot leave the trace)."""

    def __init__(self, raised: TracedException, *, caught: bool = False) -> None:
        super().__init__()
        self.raised = raised
        self.caught = caught

    def python_type(self) -> type:
        return self.raised.exc_type

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "args":
            return ConstantVariable(tuple(self.raised.args_))
        raise Unsupported(
            f"attribute {name} of a {self.raised.exc_type.__name__} caught in the trace"
        )

    def as_python_constant(self) -> Any:
        raise Unsupported("an exception object is not a constant")


def is_builtin_exception(cls: Any) -> bool:
    """An exception class whose instances hold only their args: a builtin one (IndexError,
    KeyError...) or a Python subclass that keeps BaseException's construction (no
    `__init__`/`__new__` of its own anywhere above a builtin base, a plain metaclass), such
    as `class Refused(Exception): pass`, so that `cls(*args)` rebuilds it outside the trace."""
    if not (isinstance(cls, type) and issubclass(cls, BaseException)) or type(cls) is not type:
        return False
    for klass in cls.__mro__:
        if klass.__module__ == "builtins":
            return True
        if "__init__" in vars(klass) or "__new__" in vars(klass):
            return False
    return True


def build_exception(cls: type, args: list[VariableTracker], kwargs) -> ExceptionVariable:
    """`IndexError("...")` in the trace: an exception object, to be raised (and maybe caught)
    in the trace; its arguments must be known at trace time."""
    if kwargs or not all(a.is_python_constant() for a in args):
        raise Unsupported(f"{cls.__name__}() with arguments unknown at trace time")
    return ExceptionVariable(TracedException(cls, *(a.as_python_constant() for a in args)))


@constructor("builtin_exception")
def _construct_exception(tx, kind: TypeVariable, args, kwargs) -> VariableTracker | None:
    if is_builtin_exception(kind.cls):
        return build_exception(kind.cls, args, kwargs)
    return None
