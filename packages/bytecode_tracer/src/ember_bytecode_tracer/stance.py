"""The compile stance: what a compiled function does on a cache miss, process-wide, as
`torch.compiler.set_stance` sets it for torch.compile (`ember.set_stance` is the public form).

- "default": compile what misses.
- "force_eager": compiled functions run their Python as it is (the wrappers leave the
  frame hook off), cached code included.
- "eager_on_recompile": code compiled earlier still runs where its guards pass; a frame
  that would need another compile runs as Python instead (nothing is given up for good:
  under "default" again it compiles).
- "fail_on_recompile": such a frame raises RecompileRefused, naming the guard that failed.
A first compile of a frame (no cached entry) is never a recompile.
"""

from __future__ import annotations

STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")

_current = ["default"]


def current() -> str:
    return _current[0]


def set_current(stance: str) -> str:
    """Sets the stance; returns the one it replaces."""
    if stance not in STANCES:
        raise ValueError(f"unknown compile stance {stance!r}; one of {', '.join(STANCES)}")
    previous, _current[0] = _current[0], stance
    return previous


__all__ = ["STANCES", "current", "set_current"]
