"""A compiled graph as plain data and back, for either target: the codegen half of the
umbrella's codegen artifact cache, behind one API.

``to_payload(compiled, encode)`` writes what ``compile_graph`` returned as JSON-able data
(the kernels' and the wrapper's sources, the kernels' launch data, the wrapper's namespace),
each value of the namespace that is not codegen's own given to the caller's ``encode``
(constants, dtypes, ops: the caller knows how to write tensors); the target is recorded.
``from_payload(payload, decode, origin)`` rebuilds the compiled graph (kernels reloaded from
the kernel caches, the wrapper exec'd under ``origin``). Either raises ``NotRestorable``
where a graph cannot be written, or not rebuilt here (a CUDA graph without a GPU, an entry
of an unknown target or of another payload format): the caller compiles afresh. Payloads
without a target are C++ ones (written before the target was recorded). ``artifact_key`` is
the content hash entries are named by and ``atomic_write`` how they are written.

The C++ half lives in cpp/emit/artifact.py, the Triton half in triton/artifact.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember_codegen.cache import atomic_write
from ember_codegen.cache import content_key as artifact_key
from ember_codegen.cpp.emit import artifact as cpp_artifact
from ember_codegen.exc import NotRestorable
from ember_codegen.triton import artifact as triton_artifact

Encode = Callable[[Any], list]
Decode = Callable[[list], Any]

#: target name -> (to_payload, from_payload) of its compiled graphs
CODECS: dict[str, tuple[Callable[..., dict], Callable[..., Any]]] = {
    "cpp": (cpp_artifact.to_payload, cpp_artifact.from_payload),
    "triton": (triton_artifact.to_payload, triton_artifact.from_payload),
}


def to_payload(compiled: Any, encode: Encode) -> dict:
    """Plain data for a graph ``compile_graph`` returned (raises NotRestorable)."""
    codec = CODECS.get(getattr(compiled, "target", None))
    if codec is None:
        raise NotRestorable(f"{type(compiled).__name__} is not a compiled graph of a known target")
    return codec[0](compiled, encode)


def from_payload(payload: dict, decode: Decode, origin: str) -> Any:
    """The compiled graph ``payload`` describes (raises NotRestorable)."""
    target = payload.get("target", "cpp")
    codec = CODECS.get(target)
    if codec is None:
        raise NotRestorable(f"a payload of the unknown target {target!r}")
    try:
        return codec[1](payload, decode, origin)
    except KeyError as missing:  # a payload of another format
        raise NotRestorable(f"a {target} payload without {missing}") from missing


__all__ = ["CODECS", "NotRestorable", "artifact_key", "atomic_write", "from_payload", "to_payload"]
