"""`ember.set_stance`: how compiled code behaves on a cache miss, as torch.compiler.set_stance
does for torch.compile (the stances: ember_bytecode_tracer/stance.py).

    ember.set_stance("fail_on_recompile")          # from now on
    with ember.set_stance("eager_on_recompile"):   # for a block
        ...
    @ember.set_stance("force_eager")               # for each call of a function
    def step(...): ...
"""

from __future__ import annotations

import functools
from collections.abc import Callable
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


def hook_for(compiler: Any) -> Any:
    """The frame hook a compiled wrapper sets: none under "force_eager"."""
    return None if _stance.current() == "force_eager" else compiler


__all__ = ["hook_for", "set_stance"]
