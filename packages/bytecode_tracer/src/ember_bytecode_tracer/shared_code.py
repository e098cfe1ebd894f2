"""Compiled code shared by FrameCompilers that would compile it the same way.

Cache entries live on the code object, and each is owned by the FrameCompiler that made it
(its guard checks that the hook's setting is that compiler, convert_frame._owned_by). A
second compiler with the same backend and the same options (two `ember.compile(fn)` of one
function) would make the same code again; on a miss it instead takes over an entry of such a
compiler whose guards pass for this frame: the same rewritten code under a guard of its own
(all of the entry's guards, plus itself as owner). No trace, no backend call.

As in TorchDynamo, where a cache entry is reused by a compile whose backend is the same
object (or an equal one of the same type): the backend decides, compared through the
wrappers Ember puts around it. Unlike TorchDynamo, every option that changes what is traced
or how it may fail (`fullgraph`, `dynamic`, ...) is part of the key too: a `fullgraph=True`
compiler never runs code with graph breaks that another compiler made.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

log = logging.getLogger("ember.tracer")


class _Backend:
    """A backend compared as TorchDynamo compares them: the same object, or an equal one of
    the same type. Wrappers that mark what they wrap (`_ember_wrapped_backend`) compare by
    their function's code and what they wrap: two `split_for_ddp(b)` of one `b` are equal;
    two `functools.partial` by function and arguments (a named backend configured by
    `mode`/`options`, as TorchDynamo's inductor wrapper compares by its configuration)."""

    __slots__ = ("chain", "inner")

    def __init__(self, backend: Callable) -> None:
        chain = []
        while getattr(backend, "_ember_wrapped_backend", None) is not None:
            chain.append(getattr(backend, "__code__", backend))
            backend = backend._ember_wrapped_backend
        self.chain = tuple(chain)
        self.inner = backend

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Backend) or self.chain != other.chain:
            return False
        return _same(self.inner, other.inner)

    __hash__ = None  # type: ignore[assignment]  (backends need not be hashable)


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if type(a) is functools.partial:
        return _same(a.func, b.func) and _equal((a.args, a.keywords), (b.args, b.keywords))
    return _equal(a, b)


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # a backend whose __eq__ fails shares nothing
        return False


def share_key(compiler_type: type, backend: Callable, **options: Any) -> tuple:
    """What two compilers must agree on to share compiled code: their class (a subclass may
    trace differently), their backend, and every option, compared by value."""
    return (compiler_type, _Backend(backend), tuple(sorted(options.items())))


def shareable_entry(entries: Sequence[Any], owner: Any, key: tuple, f_locals: dict) -> Any:
    """An entry another compiler with an equal key made whose guards (all but the owner's)
    pass for `f_locals`, or None."""
    for entry in entries:
        if getattr(entry, "compiler", owner) is owner or getattr(entry, "share_key", None) != key:
            continue
        try:
            fits = bool(entry.record.guards.check(f_locals))
        except Exception:  # the guard's own reading failed: the frame compiles afresh
            log.debug("ember: a shared entry's guard raised", exc_info=True)
            fits = False
        if fits:
            return entry
    return None
