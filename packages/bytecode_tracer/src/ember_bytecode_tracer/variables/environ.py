"""`os.environ` read in a trace (libraries gate code paths on environment variables).

Lookups of a constant key are answered at trace time and guarded on that one key (its
value, or that it is absent), instead of tracing os._Environ's encode/decode helpers or
guarding the whole environment.
"""

from __future__ import annotations

import os

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import Guard, GuardKind, ItemSource
from ember_bytecode_tracer.variables.builder import guard, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.lists import BoundMethodOfTracker
from ember_bytecode_tracer.variables.objects import UserDefinedObjectVariable

_LOOKUPS = ("get", "__getitem__", "__contains__")


def is_environ(value: object) -> bool:
    return isinstance(value, os._Environ)


class EnvironVariable(UserDefinedObjectVariable):
    def var_getattr(self, tx, name):
        if name in _LOOKUPS:
            return BoundMethodOfTracker(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name not in _LOOKUPS or kwargs or not args or not args[0].is_python_constant():
            return super().call_method(tx, name, args, kwargs)

        key = args[0].as_python_constant()
        if not isinstance(key, str):
            raise Unsupported(f"os.environ lookup of a {type(key).__name__} key")
        source = ItemSource(self.source, key)
        present = key in self.value
        if present:
            found = self.value[key]
            tx.output.add_guard(
                Guard(source, GuardKind.EQUALS_MATCH, found, user_location=tx.location())
            )
        else:
            tx.output.add_guard(Guard(source, GuardKind.ABSENT, user_location=tx.location()))
        if name == "__contains__":
            return ConstantVariable(present)
        if present:
            return ConstantVariable(found)
        if name == "get":
            return args[1] if len(args) > 1 else ConstantVariable(None)
        raise TracedException(KeyError, key)

    def __repr__(self) -> str:
        return "EnvironVariable()"


# ---- wrapping real values (variables/builder.py) ----------------------------------------
def _is_sourced_environ(tx, value: object, source) -> bool:
    return source is not None and is_environ(value)


@wrap_rule("environ", when=_is_sourced_environ)
def _wrap_environ(tx, value: object, source) -> EnvironVariable:
    guard(tx, source, GuardKind.TYPE_MATCH, type(value))
    return EnvironVariable(value, source=source)
