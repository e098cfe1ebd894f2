"""Errors raised by Ember's public API."""

from __future__ import annotations

from ember_bytecode_tracer.exc import (
    BackendCompilerFailed,
    RecompileRefused,
    TracerError,
    Unsupported,
    UserSetupError,
)

__all__ = [
    "BackendCompilerFailed",
    "ConfigurationError",
    "EmberError",
    "InvalidBackendError",
    "RecompileRefused",
    "TracerError",
    "Unsupported",
    "UnsupportedTorchVersion",
]


class EmberError(Exception):
    """Base of errors about how Ember's API was called."""


class InvalidBackendError(EmberError, ValueError):
    """`backend=` names no registered backend, or is not callable."""


class UnsupportedTorchVersion(EmberError, RuntimeError):
    """The installed torch is outside the releases Ember is tested on (torch_support.py)."""


class ConfigurationError(EmberError, UserSetupError, ValueError):
    """A setting (an EMBER_* environment variable, an ember.config field) is malformed; the
    message names it and says what to set. Never wrapped as a backend failure."""
