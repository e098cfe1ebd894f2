"""Class statements: LOAD_BUILD_CLASS, and the name ops of a class body traced by it."""

from __future__ import annotations

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.translator.registry import handler
from ember_bytecode_tracer.variables.class_definition import BuildClassVariable


@handler("LOAD_BUILD_CLASS")
def load_build_class(tx, inst):
    tx.push(BuildClassVariable())


def _class_body_only(tx, inst) -> None:
    # Module-level code uses the same ops on a real namespace: never traced.
    if not tx.is_class_body:
        raise Unsupported(f"{inst.opname} outside a class body")


@handler("LOAD_NAME")
def load_name(tx, inst):
    _class_body_only(tx, inst)
    name = inst.argval
    if name in tx.symbolic_locals:
        tx.push(tx.symbolic_locals[name])
    else:
        tx.push(tx.load_global(name))


@handler("STORE_NAME")
def store_name(tx, inst):
    _class_body_only(tx, inst)
    tx.symbolic_locals[inst.argval] = tx.pop()
