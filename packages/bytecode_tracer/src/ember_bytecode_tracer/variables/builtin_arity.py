"""The argument check a C builtin makes before it runs: a call the builtin would reject
(`isinstance(x, T, invalid=True)`, `len(a, b)`) raises TypeError in the trace as in eager,
before any rule computes a value the real call never returns."""

from __future__ import annotations

import builtins
import functools
import inspect
import types
from typing import Any

from ember_bytecode_tracer.exc import TracedException

# Builtins without a text signature, and the keywords each accepts (the others accept none).
_KEYWORDS_WITHOUT_SIGNATURE: dict[Any, frozenset[str]] = {
    builtins.min: frozenset(("key", "default")),
    builtins.max: frozenset(("key", "default")),
    builtins.print: frozenset(("sep", "end", "file", "flush")),
}
# ... and how many positional arguments they take (fewest, most; None: no limit).
_POSITIONAL_WITHOUT_SIGNATURE: dict[Any, tuple[int, int | None]] = {
    builtins.getattr: (2, 3),
    builtins.next: (1, 2),
    builtins.iter: (1, 2),
    builtins.vars: (0, 1),
    builtins.dir: (0, 1),
    builtins.min: (1, None),
    builtins.max: (1, None),
}


@functools.lru_cache(maxsize=512)
def _signature(fn: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def check_builtin_arguments(fn: Any, nargs: int, keywords: tuple[str, ...]) -> None:
    """Raises (as a traced TypeError) when the C function `fn` would reject `nargs`
    positional arguments and these keywords; Python functions and types are not checked."""
    if not isinstance(fn, types.BuiltinFunctionType):
        return
    name = getattr(fn, "__name__", repr(fn))
    signature = _signature(fn)
    if signature is None and fn not in _KEYWORDS_WITHOUT_SIGNATURE | _POSITIONAL_WITHOUT_SIGNATURE:
        return  # a signature inspect cannot read (warnings.warn on 3.12): the call decides
    if signature is None:
        allowed = _KEYWORDS_WITHOUT_SIGNATURE.get(fn, frozenset())
        unexpected = [k for k in keywords if k not in allowed]
        if unexpected:
            raise TracedException(
                TypeError, f"{name}() got an unexpected keyword {unexpected[0]!r}"
            )
        fewest, most = _POSITIONAL_WITHOUT_SIGNATURE.get(fn, (0, None))
        if nargs < fewest or (most is not None and nargs > most):
            raise TracedException(TypeError, f"{name}() given {nargs} arguments")
        return
    try:
        signature.bind(*range(nargs), **dict.fromkeys(keywords))
    except TypeError as exc:
        raise TracedException(TypeError, f"{name}(): {exc}") from None
