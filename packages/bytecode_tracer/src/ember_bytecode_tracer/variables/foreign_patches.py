"""Wrappers another compiler in the same process installed on PyTorch's own functions.

Once `torch.compile` has run, `torch.nn.Module.__init__` is its `patched_init`: the original
`__init__`, then a tag in its generation table (a weak-key dictionary keyed by `id(module)`)
that only its own module tracking reads. A module built in an Ember trace runs the original
`__init__` (as torch.compile does when it traces one): the tag is that compiler's
bookkeeping, not the program's, and the object it would key by id does not exist yet.
`Module.__setstate__` gets the same wrapper and the same treatment. Which functions are such
wrappers is declared by whoever runs both compilers in one process (`register_foreign_wrapper`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.guards import AttrSource, ItemSource
from ember_bytecode_tracer.variables.builder import guard_identity

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator

# (module, code name) of each known wrapper -> the closure variable holding the function it
# wraps. Ember names no part of another compiler's stack: whoever runs both in one process
# (the conformance harness, tests) declares that compiler's wrappers here.
_WRAPPERS: dict[tuple[str, str], str] = {}


def register_foreign_wrapper(module: str, code_name: str, wrapped_cell: str) -> None:
    """Declares the functions named `code_name` defined in `module` wrappers another compiler
    installs on torch's own functions: a trace calls the function their closure variable
    `wrapped_cell` holds instead (guarded through the closure cell)."""
    _WRAPPERS[(module, code_name)] = wrapped_cell


def _wrapped_cell(value: Any) -> int | None:
    """The closure index of the function `value` wraps, where it is a known wrapper."""
    code = getattr(value, "__code__", None)
    if code is None or not value.__closure__:
        return None
    name = _WRAPPERS.get((getattr(value, "__module__", None), code.co_name))
    if name is None or name not in code.co_freevars:
        return None
    return code.co_freevars.index(name)


def unwrap_foreign(tx: Translator, fn: Any, fn_source: Source | None) -> tuple[Any, Source | None]:
    """(the function a call of `fn` traces, where it is read): the wrapped function for a
    known wrapper (the caller guarded the wrapper's identity; the wrapped one is pinned
    through the closure cell, which could be rebound), else `fn` itself."""
    index = _wrapped_cell(fn)
    if index is None:
        return fn, fn_source
    inner = fn.__closure__[index].cell_contents
    if fn_source is None:
        return inner, None
    source = AttrSource(ItemSource(AttrSource(fn_source, "__closure__"), index), "cell_contents")
    guard_identity(tx, inner, source)
    return inner, source
