"""Wrappers another compiler in the same process installed on PyTorch's own functions.

Once `torch.compile` has run, `torch.nn.Module.__init__` is its `patched_init`: the original
`__init__`, then a tag in its generation table (a weak-key dictionary keyed by `id(module)`)
that only its own module tracking reads. A module built in an Ember trace runs the original
`__init__` (as torch.compile does when it traces one): the tag is that compiler's
bookkeeping, not the program's, and the object it would key by id does not exist yet.
`Module.__setstate__` gets the same wrapper and the same treatment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ember_bytecode_tracer.guards import AttrSource, ItemSource
from ember_bytecode_tracer.variables.builder import guard_identity

if TYPE_CHECKING:
    from ember_bytecode_tracer.guards import Source
    from ember_bytecode_tracer.variables.base import Translator

# (module, name, the closure variable holding the wrapped function) of each known wrapper
_WRAPPERS = {
    ("torch._dynamo.mutation_guard", "patched_init"): "init",
    ("torch._dynamo.mutation_guard", "patched_setstate"): "setstate",  # (its __setstate__)
}


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
