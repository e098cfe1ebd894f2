"""Errors of the tracer. `Unsupported` is a graph break; under fullgraph it reaches the user."""

from __future__ import annotations


class TracerError(Exception):
    """Base of the tracer's own errors."""


class Unsupported(TracerError):
    """A construct the tracer cannot put in a graph: the frame breaks the graph here.

    `location` is the user's "file:line" where it happened, filled in by the translator.
    `kind` names the construct for the hints shown to users (user_errors.HINTS); without it
    the reason's words decide. `message`, when set, is the whole text shown (fullgraph).
    """

    def __init__(
        self, reason: str, *, location: str | None = None, kind: str | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.location = location
        self.kind = kind
        self.message: str | None = None

    def __str__(self) -> str:
        if self.message:
            return self.message
        if self.location:
            return f"{self.reason}\n  at {self.location}"
        return self.reason


class TracedException(Unsupported):
    """A Python exception the traced code raises at trace time, for a reason the trace
    has guarded (a missing dict key, an index past a guarded length). A `try` that
    catches it is followed into its handler; uncaught, it is a graph break."""

    def __init__(self, exc_type: type[BaseException], *args: object) -> None:
        super().__init__(f"{exc_type.__name__}{args!r} raised at trace time")
        self.exc_type = exc_type
        self.args_ = args


class ExampleRuntimeError(Unsupported, RuntimeError):
    """An op raised a RuntimeError on the example values (a shape mismatch eager raises
    too): a graph break, after which eager raises its own error; under fullgraph=True it is
    what the caller gets, catchable as the RuntimeError it is (as torch.compile's is)."""


class BackendCompilerFailed(TracerError):
    """The backend raised while compiling a graph."""

    def __init__(self, backend_name: str, inner: BaseException, location: str | None) -> None:
        where = f" (graph from {location})" if location else ""
        super().__init__(f"backend {backend_name!r} failed{where}: {type(inner).__name__}: {inner}")
        self.backend_name = backend_name
        self.inner = inner
        self.location = location


class UserSetupError(Exception):
    """Base for errors in the user's setup (a malformed setting) that a backend may raise:
    they reach the user as they are, never wrapped in BackendCompilerFailed."""


class SkipFrame(TracerError):
    """Nothing worth compiling in this frame (no tensor ops): run it as is, don't ask again."""


class RecompileRefused(TracerError, RuntimeError):
    """A frame needed a recompile while the stance is "fail_on_recompile" (stance.py)."""
