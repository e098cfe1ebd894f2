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
#: backends that take ember.compile's mode/options: name -> configure(mode, options) -> Backend
_CONFIGURABLE: dict[str, Callable[[str | None, dict | None], Backend]] = {}


def register_backend(name: str, fn: Backend | None = None):
    """Registers `fn` under `name`; usable as a decorator."""

    def register(fn: Backend) -> Backend:
        if not callable(fn):
            raise InvalidBackendError(f"backend {name!r} must be callable, got {type(fn).__name__}")
        _REGISTRY[name] = fn
        return fn

    return register(fn) if fn is not None else register


def register_backend_configuration(name: str):
    """Registers `configure(mode, options) -> Backend` for a named backend; decorator."""

    def register(configure: Callable[[str | None, dict | None], Backend]):
        _CONFIGURABLE[name] = configure
        return configure

    return register


def list_backends() -> list[str]:
    return sorted(_REGISTRY)


def lookup_backend(
    backend: str | Backend, mode: str | None = None, options: dict | None = None
) -> Backend:
    """The backend callable for a name (or the callable itself), configured by `mode` and
    `options` where the backend takes them (the inductor backend does)."""
    if mode not in (None, "default") or options:
        if not isinstance(backend, str) or backend not in _CONFIGURABLE:
            takes = ", ".join(sorted(_CONFIGURABLE)) or "none"
            raise InvalidBackendError(
                f"mode={mode!r} / options={options!r} are settings of a named backend that takes "
                f"them ({takes}), not of {backend!r}; drop them or use backend='inductor'"
            )
        lookup_backend(backend)  # the name must be registered too
        return _CONFIGURABLE[backend](mode, options)
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
