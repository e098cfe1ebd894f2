"""Calls of the SDPA backend setters in traced code (sdp_switches.py): a kept graph op,
run at trace time too; the flag's later reads answer what the trace switched it to."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember_bytecode_tracer.guards import TorchStateSource
from ember_bytecode_tracer.sdp_switches import SDP_SWITCHES
from ember_bytecode_tracer.variables.constant import ConstantVariable
from ember_bytecode_tracer.variables.torch_functions import CALL_RULES, query_path

if TYPE_CHECKING:
    from ember_bytecode_tracer.variables.base import Translator, VariableTracker


def _switch_rule(setter, query):
    path = query_path(query)

    def rule(tx: Translator, args: list, kwargs: dict) -> VariableTracker | None:
        if path is None or len(args) != 1 or kwargs or not args[0].is_python_constant():
            return None
        enabled = args[0].as_python_constant()
        if type(enabled) is not bool:
            return None
        source = TorchStateSource(path, None)
        if source not in tx.output.state_queries:
            # the flag's entry value is not what this trace depends on from here: reads
            # after the switch answer what it set (no guard on a value the trace changed)
            tx.output.state_queries.add(source)
        tx.output.graph.call_function(setter, (enabled,))
        setter(enabled)
        return ConstantVariable(None)

    return rule


for _setter, _query in SDP_SWITCHES.items():
    CALL_RULES[_setter] = _switch_rule(_setter, _query)
