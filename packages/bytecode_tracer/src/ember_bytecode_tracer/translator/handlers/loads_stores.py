"""Locals, constants, globals, closure cells and attributes."""

from __future__ import annotations

import sys

import torch

from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, GlobalSource, ItemSource
from ember_bytecode_tracer.translator.registry import handler
from ember_bytecode_tracer.variables.attributes import load_attribute, store_attribute
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.functions import CellReference
from ember_bytecode_tracer.variables.lazy import resolve_local
from ember_bytecode_tracer.variables.object_copy import delete_attribute
from ember_bytecode_tracer.variables.objects import NullVariable
from ember_bytecode_tracer.variables.super_variable import SuperVariable
from ember_bytecode_tracer.variables.tensor import (
    TensorMethodDescriptorVariable,
    TensorMethodVariable,
    TensorVariable,
)


def _pushes_null(inst) -> bool:
    flag = getattr(inst, "push_null", None)
    return bool(flag) if flag is not None else bool((inst.arg or 0) & 1)


@handler("LOAD_FAST")
@handler("LOAD_FAST_CHECK", versions=((3, 12),))
def load_fast(tx, inst):
    name = inst.argval
    if name not in tx.symbolic_locals:
        raise Unsupported(f"local variable {name!r} referenced before assignment")
    tx.push(resolve_local(tx, name))


@handler("LOAD_FAST_AND_CLEAR", versions=((3, 12),))
def load_fast_and_clear(tx, inst):
    # Inlined comprehensions save the outer variable of the same name; NULL if unbound.
    name = inst.argval
    tx.push(resolve_local(tx, name) if name in tx.symbolic_locals else NullVariable())
    tx.symbolic_locals.pop(name, None)


@handler("STORE_FAST")
def store_fast(tx, inst):
    value = tx.pop()
    if isinstance(value, NullVariable):
        tx.symbolic_locals.pop(inst.argval, None)
    else:
        _name_after_local(value, inst.argval)
        tx.symbolic_locals[inst.argval] = value


def _name_after_local(value, name: str) -> None:
    """A tensor computed in the graph takes the name of the first local it is stored in
    (`y = x.sin()` prints as `y = ...`), as Dynamo's graphs read; graph inputs keep theirs."""
    node = getattr(value, "node", None)
    if (
        isinstance(value, TensorVariable)
        and node.op != "placeholder"
        and not node.meta.get("named_after_local")
    ):
        node.meta["named_after_local"] = True
        node._rename(name)


@handler("DELETE_FAST")
def delete_fast(tx, inst):
    tx.symbolic_locals.pop(inst.argval, None)


@handler("LOAD_CONST")
def load_const(tx, inst):
    tx.push(ConstantVariable(inst.argval))


@handler("LOAD_GLOBAL")
def load_global(tx, inst):
    if _pushes_null(inst):
        tx.push(NullVariable())
    written = tx.output.side_effects.global_writes
    if tx.globals_source is None and inst.argval in written:
        tx.push(written[inst.argval])
    else:
        tx.push(tx.load_global(inst.argval))


@handler("STORE_GLOBAL")
def store_global(tx, inst):
    if tx.globals_source is not None:
        raise Unsupported("assigning a global of another module")
    tx.output.side_effects.global_writes[inst.argval] = tx.pop()


@handler("LOAD_DEREF")
@handler("LOAD_CLASSDEREF", versions=((3, 11),))
def load_deref(tx, inst):
    name = inst.argval
    closure_vars = getattr(tx, "closure_vars", {})
    if name in closure_vars:
        tx.push(closure_vars[name].get())
    elif name in tx.symbolic_locals:
        tx.push(resolve_local(tx, name))
    elif name in tx.closure_cells:
        tx.push(tx.load_closure_cell(name))
    else:
        raise Unsupported(f"free variable {name!r} referenced before assignment")


@handler("STORE_DEREF")
def store_deref(tx, inst):
    name = inst.argval
    value = tx.pop()
    closure_vars = getattr(tx, "closure_vars", {})
    if name in closure_vars:
        closure_vars[name].set(value)
    elif name in tx.code.co_cellvars:
        tx.symbolic_locals[name] = value
    elif name in tx.closure_cells or name in tx.frame_cells:
        tx.store_closure_cell(name, value)
    else:
        raise Unsupported(
            f"assigning the free variable {name!r} of a function from outside the trace"
        )


@handler("LOAD_CLOSURE")
def load_closure(tx, inst):
    name = inst.argval
    closure_vars = getattr(tx, "closure_vars", {})
    tx.push(closure_vars[name] if name in closure_vars else CellReference(tx, name))


def push_method(tx, obj, name: str) -> None:
    """The two-slot method form: [unbound function, self] for tensor methods (both can be
    rebuilt at a graph break), [NULL, bound attribute] otherwise."""
    value = load_attribute(tx, obj, name)
    if isinstance(value, TensorMethodVariable) and hasattr(torch.Tensor, name):
        tx.push(TensorMethodDescriptorVariable(name))
        tx.push(obj)
        return
    tx.push(NullVariable())
    tx.push(value)


@handler("LOAD_ATTR")
def load_attr(tx, inst):
    obj = tx.pop()
    if tx.version >= (3, 12) and _pushes_null(inst):
        push_method(tx, obj, inst.argval)
    else:
        tx.push(load_attribute(tx, obj, inst.argval))


@handler("LOAD_METHOD", versions=((3, 11),))
def load_method(tx, inst):
    push_method(tx, tx.pop(), inst.argval)


@handler("STORE_ATTR")
def store_attr(tx, inst):
    obj = tx.pop()
    value = tx.pop()
    store_attribute(tx, obj, inst.argval, value)


@handler("DELETE_ATTR")
def delete_attr(tx, inst):

    delete_attribute(tx, tx.pop(), inst.argval)


@handler("IMPORT_NAME")
def import_name(tx, inst):
    # Only imports of modules already loaded: importing those has no effect to replay.
    fromlist = tx.pop().as_python_constant()
    level = tx.pop().as_python_constant()
    name = inst.argval
    if level != 0:
        package = tx.f_globals.get("__package__") or ""
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - level + 1])
        name = f"{base}.{name}" if name else base
    top = name if fromlist else name.split(".")[0]
    if name not in sys.modules or top not in sys.modules:
        raise Unsupported(f"import of {name}, which is not loaded yet")
    # Guards evaluate against the root frame's globals, where sys is made reachable.
    tx.root().f_globals.setdefault("__ember_sys__", sys)
    modules = AttrSource(GlobalSource("__ember_sys__"), "modules")
    tx.push(tx.wrap(sys.modules[top], ItemSource(modules, top)))


@handler("IMPORT_FROM")
def import_from(tx, inst):

    tx.push(load_attribute(tx, tx.peek(), inst.argval))


@handler("LOAD_SUPER_ATTR", versions=((3, 12),))
def load_super_attr(tx, inst):
    """3.12's fused `super().name` / `super(cls, self).name`: the stack holds the global
    `super`, the class and the first argument, whichever form the source used."""

    obj = tx.pop()
    cls = tx.pop()
    global_super = tx.pop()
    if not global_super.is_python_constant() or global_super.as_python_constant() is not super:
        raise Unsupported("super() where the name `super` is not the builtin")
    proxy = SuperVariable(cls.as_python_constant(), obj)
    if _pushes_null(inst):
        tx.push(NullVariable())
    tx.push(proxy.var_getattr(tx, inst.argval))
