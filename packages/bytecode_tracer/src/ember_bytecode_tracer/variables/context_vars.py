"""`contextvars.ContextVar` read and set in a trace: libraries keep per-context flags in them
(torch's `sdpa_kernel` records whether backend priority is in force, configs their
overrides). A variable reached through a source is guarded by identity.

`var.get()` answers the value the trace last set, else the value at frame entry, guarded
(`var.get() == value`). `var.set(value)` with a constant is recorded in the trace only (no
graph op: the state is Python's, read by Python code that is traced) and gives a token;
`var.reset(token)` takes the variable back to what it was before that set. A graph that
would end with a variable set to something else than at entry is refused, as is a token
that outlives the trace: the token eager needs to reset it is only made by a real set.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.exc import TracedException, Unsupported
from ember_bytecode_tracer.guards import GuardKind, MethodCallSource
from ember_bytecode_tracer.state_switches import UNSET, context_var_value
from ember_bytecode_tracer.variables.base import VariableTracker
from ember_bytecode_tracer.variables.builder import guard, wrap_rule
from ember_bytecode_tracer.variables.constant import ConstantVariable, is_constant_value
from ember_bytecode_tracer.variables.lists import BoundMethodOfTracker

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source

_METHODS = frozenset(("get", "set", "reset"))


class ContextVarVariable(VariableTracker):
    def __init__(self, var: contextvars.ContextVar, *, source: Source) -> None:
        super().__init__(source=source)
        self.var = var

    def python_type(self) -> type:
        return contextvars.ContextVar

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in _METHODS:
            return BoundMethodOfTracker(self, name)
        if name == "name":
            return ConstantVariable(self.var.name)
        raise Unsupported(f"attribute {name!r} of a ContextVar")

    def _current(self, tx) -> Any:
        """The value in the trace now: the last set, else the entry value (guarded)."""
        traced = tx.output.context_vars
        if traced.set_in_trace(self.var):
            return traced.current(self.var)
        value = context_var_value(self.var)
        if value is UNSET:  # no guard states "has no value": leave it to eager
            raise Unsupported(f"ContextVar {self.var.name!r} with no value and no default")
        if not is_constant_value(value):
            raise Unsupported(f"ContextVar {self.var.name!r} holding a {type(value).__name__}")
        guard(tx, MethodCallSource(self.source, "get"), GuardKind.EQUALS_MATCH, value)
        return value

    def call_method(self, tx, name, args, kwargs):
        if name in ("get", "set") and (kwargs or any(not a.is_python_constant() for a in args)):
            raise Unsupported(f"ContextVar.{name} with arguments unknown at trace time")
        if name == "get" and len(args) <= 1:
            return ConstantVariable(self._current(tx))
        if name == "set" and len(args) == 1:
            value = args[0].as_python_constant()
            before = self._current(tx)
            tx.output.context_vars.record(self.var, value)
            return ContextVarTokenVariable(self, before)
        if name == "reset" and not kwargs and len(args) == 1:
            if not isinstance(args[0], ContextVarTokenVariable):
                raise Unsupported("ContextVar.reset with a token not made in the trace")
            token = args[0]
            if token.owner.var is not self.var:
                raise TracedException(
                    ValueError, f"{token!r} was created by a different ContextVar"
                )
            if token.used:
                raise TracedException(RuntimeError, f"{token!r} has already been used once")
            token.used = True
            tx.output.context_vars.record(self.var, token.before)
            return ConstantVariable(None)
        raise Unsupported(f"ContextVar.{name}")

    def __repr__(self) -> str:
        return f"ContextVarVariable({self.var.name!r})"


class ContextVarTokenVariable(VariableTracker):
    """The token of a set in the trace: what the variable held before it."""

    def __init__(self, owner: ContextVarVariable, before: Any) -> None:
        super().__init__()
        self.owner = owner
        self.before = before
        self.used = False

    def python_type(self) -> type:
        return contextvars.Token

    def __repr__(self) -> str:
        return f"ContextVarTokenVariable({self.owner.var.name!r})"


# ---- wrapping real values (variables/builder.py) ----------------------------------------
def _is_sourced_context_var(tx, value: object, source) -> bool:
    return source is not None


@wrap_rule("context_var", types=contextvars.ContextVar, exact=True, when=_is_sourced_context_var)
def _wrap_context_var(tx, value: contextvars.ContextVar, source: Source) -> ContextVarVariable:
    guard(tx, source, GuardKind.ID_MATCH, value)
    return ContextVarVariable(value, source=source)
