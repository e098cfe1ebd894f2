"""How a handler ends a translator's run: raised by RETURN_VALUE and YIELD_VALUE, caught by
the translator (translator/core.py). A leaf, so that handlers need not import the core."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ember_bytecode_tracer.variables.base import VariableTracker


class ReturnValue(Exception):
    """Raised by RETURN_VALUE handlers to end a translator's run."""

    def __init__(self, value: VariableTracker) -> None:
        self.value = value


class GeneratorYield(Exception):
    """Raised by YIELD_VALUE in a suspendable generator: its translator pauses after the
    yield (ip past it, the yielded value popped) and resumes when something is sent in."""

    def __init__(self, value: VariableTracker) -> None:
        self.value = value
