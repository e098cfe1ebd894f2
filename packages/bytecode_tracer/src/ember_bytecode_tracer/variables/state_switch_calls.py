"""Calls of the setters of switchable global state in traced code (state_switches.py): a
kept graph op, run at trace time too; the state's later reads answer what it was set to."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember_bytecode_tracer.guards import TorchStateSource
from ember_bytecode_tracer.state_switches import SWITCHES
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.torch_functions import CALL_RULES, query_path

if TYPE_CHECKING:
    from ember_bytecode_tracer.variables.base import Translator, VariableTracker


def _switch_rule(setter, query, kind: type):
    path = query_path(query)

    def rule(tx: Translator, args: list, kwargs: dict) -> VariableTracker | None:
        if path is None or len(args) != 1 or kwargs or not args[0].is_python_constant():
            return None
        value = args[0].as_python_constant()
        if not isinstance(value, kind):
            return None
        source = TorchStateSource(path, None)
        if source not in tx.output.state_queries:
            # the entry value is not what this trace depends on from here: reads after
            # the switch answer what it set (no guard on a value the trace changed)
            tx.output.state_queries.add(source)
        tx.output.graph.call_function(setter, (value,))
        setter(value)
        return ConstantVariable(None)

    return rule


for _setter, (_query, _kind) in SWITCHES.items():
    CALL_RULES[_setter] = _switch_rule(_setter, _query, _kind)
