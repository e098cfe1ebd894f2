"""Backends by name: `eager`, `aot_eager`, `inductor`, `autotune` (and any callable following Dynamo's convention).

Each backend lives in its own module and registers itself on import, declaring whether it
handles graphs with symbolic sizes (Ember's own do); a callable passed as `backend=` declares
it with `@ember.backends.symbolic_sizes`, else it gets one compile per concrete size (per_size.py).
"""

from ember.backends import aot_eager, autotune, eager, inductor  # noqa: F401  (registration)
from ember.backends.per_size import per_size_unless_declared
from ember.backends.registry import (
    Backend,
    handles_symbolic_sizes,
    list_backends,
    lookup_backend,
    register_backend,
    symbolic_sizes,
)

__all__ = [
    "Backend",
    "handles_symbolic_sizes",
    "list_backends",
    "lookup_backend",
    "per_size_unless_declared",
    "register_backend",
    "symbolic_sizes",
]
