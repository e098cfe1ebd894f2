"""The opcode handler table: one handler per opname, optionally gated by Python version.

    @handler("LOAD_FAST", "LOAD_FAST_CHECK")
    def load_fast(tx, inst): ...

    @handler("PRECALL", versions=((3, 11),))
    def precall(tx, inst): ...

An opcode with no handler for the running version is a graph break naming the opcode.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ember_bytecode_tracer.bytecode import Instruction

# (translator, instruction): the InstructionTranslator of translator/core.py, which looks
# handlers up here (so this table does not import it back).
Handler = Callable[[Any, "Instruction"], None]

HANDLERS: dict[str, Handler] = {}
# Every registration with its version gate, whatever the running version (for the table).
REGISTRATIONS: list[tuple[tuple[str, ...], tuple[tuple[int, int], ...] | None]] = []
_VERSION = sys.version_info[:2]


def handler(*opnames: str, versions: Iterable[tuple[int, int]] | None = None):
    """Register the decorated function for `opnames` (on the listed versions only)."""

    gate = tuple(versions) if versions is not None else None
    REGISTRATIONS.append((opnames, gate))

    def register(fn: Handler) -> Handler:
        if gate is None or _VERSION in gate:
            for name in opnames:
                if name in HANDLERS:
                    raise ValueError(f"two handlers for {name}: {HANDLERS[name]} and {fn}")
                HANDLERS[name] = fn
        return fn

    return register


def lookup(opname: str) -> Handler | None:
    return HANDLERS.get(opname)


def handled_on(version: tuple[int, int]) -> set[str]:
    """Opcode names with a handler on `version`."""
    return {
        name for names, gate in REGISTRATIONS if gate is None or version in gate for name in names
    }
