"""What the C++ and the Triton op tables share (cpp/emit/op_table.py, triton/op_table.py):
the ``@emits`` registration of one target's table, and the operators both languages write
infix with the same meaning (C++ and Python agree on comparisons, NaN included, and on
bitwise and/or/xor), registered on either table by ``register_infix``. Target-neutral:
imports neither emitter."""

from __future__ import annotations

from collections.abc import Callable

#: an op's emitter: operand values (expression + dtype) -> the result's expression
Emitter = Callable[..., str]
Registrar = Callable[..., Callable[[Emitter], Emitter]]

#: comparisons: infix in both languages, bool results
COMPARISONS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
#: bitwise ops: infix in both languages, the operands' dtype
BITWISE = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}


def registrar(table: dict[str, Emitter], bool_results: set[str]) -> Registrar:
    """The ``emits(*names, to_bool=False)`` decorator that files an emitter in ``table``
    under each name (and the name in ``bool_results`` for ops whose result is bool)."""

    def emits(*names: str, to_bool: bool = False) -> Callable[[Emitter], Emitter]:
        def register(fn: Emitter) -> Emitter:
            for name in names:
                table[name] = fn
                if to_bool:
                    bool_results.add(name)
            return fn

        return register

    return emits


def infix(op: str) -> Emitter:
    return lambda a, b: f"({a} {op} {b})"


def register_infix(emits: Registrar) -> None:
    """Comparisons and bitwise and/or/xor as infix operators on a target's table."""
    for name, op in COMPARISONS.items():
        emits(name, to_bool=True)(infix(op))
    for name, op in BITWISE.items():
        emits(name)(infix(op))
