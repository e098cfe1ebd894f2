"""PEP 523 frame hook with a per-code-object cache of guarded substitute code.

The hook is the bottom stage of Ember. For each Python function frame that starts on a
thread where the hook is on, it looks in the frame's code object for a cached
``GuardedCode`` whose ``guard(f_locals)`` passes and runs that entry's code instead of
the frame's own (a guard may be a ``GuardProgram``, checks run in C without a Python
call). On a miss it calls the thread's callback, ``callback(frame, cache)``,
which returns a ``GuardedCode`` to cache and run, or ``None`` to run the original code.
A callback that serializes its work across threads caches its entry itself
(``cache_insert``) before it lets the next thread look; the hook's insert of an entry
already cached only moves it to the front.

A package that knows a type's C layout adds its own check to guard programs through the
``CHECK_NATIVE`` plug-in, whose C interface is the header ``ember_frame_hook.h`` in
``get_include()``.

This package needs nothing but CPython 3.11 or 3.12; it knows nothing of torch.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ember_frame_hook._C import (
    NATIVE_ABI_VERSION,
    NATIVE_CHECK_CAPSULE,
    CacheView,
    Frame,
    GuardedCode,
    GuardError,
    GuardProgram,
    cache_entries,
    cache_insert,
    get_cache_limit,
    get_eval_frame,
    is_skipped,
    reset,
    reset_stats,
    set_cache_limit,
    set_eval_frame,
    skip_code,
    stats,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    Callback = Callable[[Frame, CacheView], GuardedCode | None]

__all__ = [
    "NATIVE_ABI_VERSION",
    "NATIVE_CHECK_CAPSULE",
    "CacheView",
    "Frame",
    "GuardError",
    "GuardProgram",
    "GuardedCode",
    "cache_entries",
    "cache_insert",
    "eval_frame",
    "get_cache_limit",
    "get_eval_frame",
    "get_include",
    "is_skipped",
    "reset",
    "reset_stats",
    "set_cache_limit",
    "set_eval_frame",
    "skip_code",
    "stats",
]

__version__ = "0.1.0"


@contextmanager
def eval_frame(setting: Callback | bool | None) -> Iterator[None]:
    """Run a block with this thread's hook set to ``setting``, then restore the previous one.

    ``setting`` is a callback (trace), ``False`` (run-only: cached code runs, the callback
    is never called) or ``None`` (off).
    """
    previous = set_eval_frame(setting)
    try:
        yield
    finally:
        set_eval_frame(previous)


def get_include() -> str:
    """The folder holding ``ember_frame_hook.h``, the C header of the ``CHECK_NATIVE``
    plug-in ABI (for a C/C++ build's include path, as ``numpy.get_include()``)."""
    return str(Path(__file__).resolve().with_name("include"))
