"""Backends by name: `eager`, `aot_eager`, `inductor`, `autotune` (and any callable following Dynamo's convention).

Each backend lives in its own module and registers itself on import.
"""

from ember.backends import aot_eager, autotune, eager, inductor  # noqa: F401  (registration)
from ember.backends.registry import Backend, list_backends, lookup_backend, register_backend

__all__ = ["Backend", "list_backends", "lookup_backend", "register_backend"]
