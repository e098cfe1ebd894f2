"""`ember.set_stance`: how compiled code behaves on a cache miss, as torch.compiler.set_stance
does for torch.compile (the stances: ember_bytecode_tracer/stance.py).

    ember.set_stance("fail_on_recompile")          # from now on
    with ember.set_stance("eager_on_recompile"):   # for a block
        ...
    @ember.set_stance("force_eager")               # for each call of a function
    def step(...): ...
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ember.exc import EmberError
from ember_bytecode_tracer import stance as _stance


class set_stance:  # lower case: called like a function, as torch.compiler.set_stance
    """Sets the compile stance now; as a context manager it is put back on exit, as a
    decorator it holds for each call of the function (and is put back at decoration)."""

    def __init__(self, stance: str = "default") -> None:
        if stance not in _stance.STANCES:
            raise EmberError(
                f"unknown compile stance {stance!r}: use one of {', '.join(_stance.STANCES)}"
            )
        self.stance = stance
        self.previous = _stance.set_current(stance)

    def __enter__(self) -> set_stance:
        _stance.set_current(self.stance)
        return self

    def __exit__(self, *exc_info: object) -> None:
        _stance.set_current(self.previous)

    def __call__(self, fn: Callable) -> Callable:
        _stance.set_current(self.previous)  # a decorator changes nothing until called
        stance = self.stance

        @functools.wraps(fn)
        def under_stance(*args: Any, **kwargs: Any) -> Any:
            previous = _stance.set_current(stance)
            try:
                return fn(*args, **kwargs)
            finally:
                _stance.set_current(previous)

        return under_stance


# the compiler of this thread's one trace in progress (ember.explain, ember.export); the
# frame hook is per thread too
_one_trace = threading.local()


@contextlib.contextmanager
def one_trace(compiler: Any) -> Iterator[None]:
    """While it lasts, compiled wrappers called set `compiler` instead of their own: what a
    compiled function or module runs is what explain and export see (else its own compiler
    would take its frames, and the trace would report no graph)."""
    previous = getattr(_one_trace, "compiler", None)
    _one_trace.compiler = compiler
    try:
        yield
    finally:
        _one_trace.compiler = previous


def hook_for(compiler: Any) -> Any:
    """The frame hook a compiled wrapper sets: the compiler of the one trace in progress if
    any (`one_trace`), none under "force_eager", else its own."""
    tracing = getattr(_one_trace, "compiler", None)
    if tracing is not None:
        return tracing
    return None if _stance.current() == "force_eager" else compiler


__all__ = ["hook_for", "one_trace", "set_stance"]
