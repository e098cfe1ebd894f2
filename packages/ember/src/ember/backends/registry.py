"""The registry: backend names -> `backend(gm, example_inputs) -> callable`.

Backends follow TorchDynamo's convention, so any torch.compile backend works here and
Ember's backends can be handed to torch.compile.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ember.exc import InvalidBackendError

Backend = Callable[[torch.fx.GraphModule, list[torch.Tensor]], Callable]
_REGISTRY: dict[str, Backend] = {}


def register_backend(name: str, fn: Backend | None = None):
    """Registers `fn` under `name`; usable as a decorator."""

    def register(fn: Backend) -> Backend:
        if not callable(fn):
            raise InvalidBackendError(f"backend {name!r} must be callable, got {type(fn).__name__}")
        _REGISTRY[name] = fn
        return fn

    return register(fn) if fn is not None else register


def list_backends() -> list[str]:
    return sorted(_REGISTRY)


def lookup_backend(backend: str | Backend) -> Backend:
    """The backend callable for a name (or the callable itself)."""
    if callable(backend):
        return backend
    if isinstance(backend, str):
        if backend not in _REGISTRY:
            raise InvalidBackendError(
                f"unknown backend {backend!r}; registered backends: {', '.join(list_backends())}. "
                "Pass a registered name or a callable backend(gm, example_inputs)."
            )
        return _REGISTRY[backend]
    raise InvalidBackendError(
        f"backend must be a name or a callable backend(gm, example_inputs), got {type(backend).__name__}"
    )
