"""What a user's `guard_fail_fn` (ember.compile's option) receives when a compiled frame's
cached code no longer fits a call and the frame compiles again: one GuardFailure per
recompile, before the new trace starts.

A NamedTuple, so that it reads by field (`failure.reason`) or by position (`failure[0]`).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import NamedTuple


class GuardFailure(NamedTuple):
    """A recompile of `code`: `reason` is the failed guard of each cached entry, newest
    first, in the words of the recompile log (EMBER_LOGS=recompiles)."""

    reason: str
    code: types.CodeType


GuardFailFn = Callable[[GuardFailure], object]


def check_guard_fail_fn(fn: object) -> GuardFailFn | None:
    """None, or a callable taking one GuardFailure; anything else is the caller's mistake."""
    if fn is not None and not callable(fn):
        raise TypeError(
            f"guard_fail_fn must be a function taking one GuardFailure (or None), got "
            f"{type(fn).__name__}"
        )
    return fn  # type: ignore[return-value]


__all__ = ["GuardFailFn", "GuardFailure", "check_guard_fail_fn"]
