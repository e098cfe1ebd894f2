"""Which stage a failure belongs to, from the exception and where it was raised."""

from __future__ import annotations

import traceback

from ember.exc import BackendCompilerFailed, Unsupported

#: Failure categories, in pipeline order. ``no_graph``: eager ran but no compiled graph did.
CATEGORIES = (
    "tracer",
    "aot",
    "decomposition",
    "lowering",
    "codegen",
    "runtime",
    "no_graph",
    "mismatch",
)
# Package import name (as it appears in a source path) -> category.
_STAGE_OF_PACKAGE = {
    "ember_bytecode_tracer": "tracer",
    "ember_aot_autograd": "aot",
    "ember_primops": "decomposition",
    "ember_inductor_ir": "lowering",
    "ember_codegen": "codegen",
}
_OWN_FRAMES = ("ember_bytecode_tracer/convert_frame.py", "ember_bytecode_tracer/output_graph.py")


def _stage_of_frames(exc: BaseException) -> str | None:
    """The stage of the deepest frame that belongs to an Ember stage package."""
    stage = None
    for frame in traceback.extract_tb(exc.__traceback__):
        path = frame.filename.replace("\\", "/")
        if any(path.endswith(own) for own in _OWN_FRAMES):
            continue  # the tracer's driver calls the backend: not where it went wrong
        for package, category in _STAGE_OF_PACKAGE.items():
            if f"/{package}/" in path:
                stage = category
    return stage


def classify(exc: BaseException) -> tuple[str, str]:
    """(category, one-line detail) of an exception raised by compiling or running."""
    if isinstance(exc, BackendCompilerFailed):
        inner = exc.inner
        category = _stage_of_frames(inner) or "aot"
        return category, _one_line(inner)
    if isinstance(exc, Unsupported):
        return "tracer", _one_line(exc)
    return _stage_of_frames(exc) or "runtime", _one_line(exc)


def _one_line(exc: BaseException) -> str:
    text = " | ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return f"{type(exc).__name__}: {text}"[:300]
