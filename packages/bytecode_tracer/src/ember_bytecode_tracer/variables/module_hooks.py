"""nn.Module.__call__ around `forward`: forward pre-hooks and hooks (the module's and the
global ones) are traced as Python runs them, and a lazy module is initialised first.

The trace depends on which hooks there are: the keys of every hook table are guarded, so
registering or removing a hook later retraces. Backward hooks stay a graph break (they run
during the backward pass, outside the graph).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from torch import nn
from torch.nn.modules import module as module_globals

import ember_frame_hook as fh
from ember_bytecode_tracer.exc import Unsupported
from ember_bytecode_tracer.guards import AttrSource, GlobalSource, GuardKind, ItemSource
from ember_bytecode_tracer.variables.builder import guard
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.constructed import ConstructedObjectVariable
from ember_bytecode_tracer.variables.dicts import ConstDictVariable
from ember_bytecode_tracer.variables.lists import ListVariable, TupleVariable
from ember_bytecode_tracer.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import VariableTracker

# The tables nn.Module.__call__ reads, per module and global (torch.nn.modules.module).
_BACKWARD_TABLES = ("_backward_hooks", "_backward_pre_hooks")
_FORWARD_TABLES = ("_forward_pre_hooks", "_forward_hooks")
_KWARGS_TABLES = ("_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs")
_GLOBAL_TABLES = (
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
    "_global_forward_pre_hooks",
    "_global_forward_hooks",
    "_global_forward_hooks_with_kwargs",
)


def _global_table_source(tx, name: str) -> Source:
    tx.root().f_globals.setdefault("__ember_sys__", sys)
    modules = AttrSource(GlobalSource("__ember_sys__"), "modules")
    return AttrSource(ItemSource(modules, module_globals.__name__), name)


def _pin(tx, source: Source | None, table: Any) -> None:
    """The trace ran exactly these hooks (keys in order): guard the table's keys."""
    if source is not None:
        guard(tx, source, GuardKind.DICT_KEYS, (type(table), tuple(table)))


def _tables(tx, module_var) -> dict[str, tuple[Any, Source | None]]:
    """Every hook table __call__ reads, with the source guards reach it by, guarded."""
    module = module_var.module
    found: dict[str, tuple[Any, Source | None]] = {}
    for name in _GLOBAL_TABLES:
        found[name] = (getattr(module_globals, name), _global_table_source(tx, name))
    for name in (*_BACKWARD_TABLES, *_FORWARD_TABLES, *_KWARGS_TABLES):
        table = module.__dict__.get(name)
        if table is None:
            continue  # a module whose __init__ did not run nn.Module's fully
        source = None if module_var.source is None else AttrSource(module_var.source, name)
        found[name] = (table, source)
    for name, (table, source) in found.items():
        if name in _KWARGS_TABLES and not found.get(name.replace("_with_kwargs", ""), ({},))[0]:
            continue  # read only for the ids of hooks there are
        _pin(tx, source, table)
    for name in (*_BACKWARD_TABLES, "_global_backward_hooks", "_global_backward_pre_hooks"):
        if name in found and found[name][0]:
            raise Unsupported(f"{type(module).__name__} has forward/backward hooks")
    return found


def _hooks(found, global_name: str, name: str) -> list[tuple[Any, Any, Source | None]]:
    """(id, hook, source) of the global table's hooks, then the module's, in call order."""
    listed = []
    for table_name in (global_name, name):
        table, source = found.get(table_name, ({}, None))
        for hook_id, hook in table.items():
            item = None if source is None else ItemSource(source, hook_id)
            listed.append((hook_id, hook, item))
    return listed


def _is_none(value: VariableTracker) -> bool:
    return isinstance(value, ConstantVariable) and value.value is None


def call_with_hooks(tx, module_var, args: list, kwargs: dict, forward) -> VariableTracker:
    """nn.Module._call_impl's order: pre-hooks (which may replace the arguments), forward,
    hooks (which may replace the result)."""
    if is_lazy(module_var.module):
        initialize_lazy(tx, module_var, args, kwargs)
    found = _tables(tx, module_var)
    module = module_var.module
    for hook_id, hook, source in _hooks(found, "_global_forward_pre_hooks", "_forward_pre_hooks"):
        hook_var = tx.wrap(hook, source)
        if hook_id in module.__dict__.get("_forward_pre_hooks_with_kwargs", {}):
            both = hook_var.call_function(
                tx, [module_var, TupleVariable(list(args)), ConstDictVariable(dict(kwargs))], {}
            )
            if not _is_none(both):
                args, kwargs = _new_arguments(tx, both)
            continue
        replaced = hook_var.call_function(tx, [module_var, TupleVariable(list(args))], {})
        if not _is_none(replaced):
            is_tuple = issubclass(replaced.python_type(), tuple)
            args = list(replaced.unpack(tx)) if is_tuple else [replaced]
    result = forward(args, kwargs)
    with_kwargs = (
        *found.get("_global_forward_hooks_with_kwargs", ({}, None))[0],
        *module.__dict__.get("_forward_hooks_with_kwargs", {}),
    )
    for hook_id, hook, source in _hooks(found, "_global_forward_hooks", "_forward_hooks"):
        hook_var = tx.wrap(hook, source)
        call_args = [module_var, TupleVariable(list(args))]
        if hook_id in with_kwargs:
            call_args.append(ConstDictVariable(dict(kwargs)))
        replaced = hook_var.call_function(tx, [*call_args, result], {})
        if not _is_none(replaced):
            result = replaced
    return result


def _new_arguments(tx, both: VariableTracker) -> tuple[list, dict]:
    if not issubclass(both.python_type(), tuple) or len(pair := both.unpack(tx)) != 2:
        raise Unsupported("a forward pre-hook returned something other than (args, kwargs)")
    new_args, new_kwargs = pair
    if not isinstance(new_kwargs, ConstDictVariable):
        raise Unsupported("a forward pre-hook returned kwargs that are not a dict")
    return list(new_args.unpack(tx)), {str(k): v for k, v in new_kwargs.items.items()}


# ---- lazy modules -------------------------------------------------------------------------
def is_lazy(module: nn.Module) -> bool:
    return isinstance(module, nn.modules.lazy.LazyModuleMixin) and hasattr(
        module, "_initialize_hook"
    )


def initialize_lazy(tx, module_var, args: list, kwargs: dict) -> None:
    """As eager's first call does: infer the parameters from the arguments' example values
    (now, on the real module), then trace the initialised module. Guards already taken on
    the module's class follow it to the class it becomes."""
    module = module_var.module
    before = type(module)
    example_args = [_example(tx, a) for a in args]
    example_kwargs = {k: _example(tx, v) for k, v in kwargs.items()}
    previous = fh.set_eval_frame(None)  # eager code, run now: nothing in it is compiled
    try:
        module._infer_parameters(module, tuple(example_args), example_kwargs)
    finally:
        fh.set_eval_frame(previous)
    after = type(module)
    if after is not before and module_var.source is not None:
        tx.output.guards = [
            replace(g, expected=after)
            if g.kind is GuardKind.TYPE_MATCH and g.source == module_var.source
            else g
            for g in tx.output.guards
        ]


def _example(tx, value: VariableTracker) -> Any:
    """A tracker as a Python value, tensors as their example (fake) values."""
    if isinstance(value, TensorVariable):
        return value.example
    if isinstance(value, TupleVariable | ListVariable):
        items = [_example(tx, v) for v in value.unpack(tx)]
        return items if isinstance(value, ListVariable) else tuple(items)
    if isinstance(value, ConstDictVariable):
        return {k: _example(tx, v) for k, v in value.items.items()}
    if isinstance(value, ConstructedObjectVariable):
        fields = {name: _example(tx, value._field_value(name)) for name in value._fields()}
        return value.cls(**fields)
    return value.as_python_constant()
