"""The registry: backend names -> `backend(gm, example_inputs) -> callable`.

Backends follow TorchDynamo's convention, so any torch.compile backend works here and
Ember's backends can be handed to torch.compile.

A backend declares whether it handles graphs with symbolic sizes (compiles code valid for
every size the graph's example values admit): `register_backend(..., symbolic_sizes=True)`
or, for a callable passed as `backend=`, the `symbolic_sizes` marker. Ember gives a backend
that does not declare it one compile per concrete size signature (per_size.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from ember.exc import InvalidBackendError

Backend = Callable[[torch.fx.GraphModule, list[torch.Tensor]], Callable]
_REGISTRY: dict[str, Backend] = {}
#: backends that take ember.compile's mode/options: name -> configure(mode, options) -> Backend
_CONFIGURABLE: dict[str, Callable[[str | None, dict | None], Backend]] = {}
#: names registered as handling symbolic sizes
_SYMBOLIC_NAMES: set[str] = set()
#: the attribute `symbolic_sizes` sets on a callable backend
SYMBOLIC_SIZES_ATTR = "_ember_symbolic_sizes"
#: a backend function's optional hook, called with no arguments before each frame it will
#: compile is traced (progress.ProgressFrameCompiler): work to start early, such as the
#: inductor backend's Triton build workers
BEFORE_TRACE_ATTR = "_ember_before_trace"


def symbolic_sizes(fn: Backend) -> Backend:
    """Marks a callable backend as handling graphs with symbolic sizes: given a graph whose
    example values have symbolic sizes (or symbolic int inputs), it compiles code valid for
    every size, not only the concrete example inputs it is handed. Ember then calls it once
    per graph. Usable as a decorator; returns the marked backend (a wrapper where `fn` takes
    no attributes, a bound method for one)."""
    if not callable(fn):
        raise InvalidBackendError(f"a backend must be callable, got {type(fn).__name__}")
    try:
        setattr(fn, SYMBOLIC_SIZES_ATTR, True)
    except (AttributeError, TypeError):
        marked = functools.wraps(fn)(lambda gm, example_inputs: fn(gm, example_inputs))
        setattr(marked, SYMBOLIC_SIZES_ATTR, True)
        return marked
    return fn


def handles_symbolic_sizes(backend: str | Backend) -> bool:
    """Whether a backend (a registered name or a callable: marked, or registered as declared,
    or a partial of one) declared symbolic sizes."""
    if isinstance(backend, str):
        return backend in _SYMBOLIC_NAMES
    while isinstance(backend, functools.partial) and not hasattr(backend, SYMBOLIC_SIZES_ATTR):
        backend = backend.func
    if getattr(backend, SYMBOLIC_SIZES_ATTR, False) is True:
        return True
    return any(_REGISTRY[name] is backend for name in _SYMBOLIC_NAMES)


def register_backend(name: str, fn: Backend | None = None, *, symbolic_sizes: bool | None = None):
    """Registers `fn` under `name`; usable as a decorator. `symbolic_sizes`: whether it handles
    graphs with symbolic sizes (None: as `fn` is marked, else False)."""

    def register(fn: Backend) -> Backend:
        if not callable(fn):
            raise InvalidBackendError(f"backend {name!r} must be callable, got {type(fn).__name__}")
        _REGISTRY[name] = fn
        declared = handles_symbolic_sizes(fn) if symbolic_sizes is None else bool(symbolic_sizes)
        (_SYMBOLIC_NAMES.add if declared else _SYMBOLIC_NAMES.discard)(name)
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
