"""Guards: what a trace depended on, stated over sources, compiled into one fast check.

The tracer records a `Guard(source, kind, expected)` for every value it read from the
frame (tensors, constants, types, identities, lengths, dict keys, module flags);
`compile_guards` turns a frame's guards into a `CompiledGuard` whose `check(f_locals)`
is what `ember_frame_hook.GuardedCode` calls on every call of the compiled function.
`describe_guard`/`explain_failure`/`summarize` give the human text of a guard, of why it
failed, and of a live value (for logs, recompile messages and the compile report).
"""

from __future__ import annotations

from ember_bytecode_tracer.guards.compile import (
    CompiledGuard,
    compile_guards,
    compile_source_loader,
)
from ember_bytecode_tracer.guards.describe import (
    describe_guard,
    explain_failure,
    summarize,
    tensor_mismatch,
)
from ember_bytecode_tracer.guards.guard import Guard, GuardKind
from ember_bytecode_tracer.guards.sources import (
    FREE_CELL,
    TORCH_STATE,
    AttrSource,
    BuiltinSource,
    DictKeysSource,
    DictValuesSource,
    GenericAttrSource,
    GlobalSource,
    ItemSource,
    LocalSource,
    MethodCallSource,
    Source,
    TorchStateSource,
    TypeSource,
    dict_item_source,
    is_frame_cell,
)
from ember_bytecode_tracer.guards.tensor_spec import TensorSpec

__all__ = [
    "FREE_CELL",
    "TORCH_STATE",
    "AttrSource",
    "BuiltinSource",
    "CompiledGuard",
    "DictKeysSource",
    "DictValuesSource",
    "GenericAttrSource",
    "GlobalSource",
    "Guard",
    "GuardKind",
    "ItemSource",
    "LocalSource",
    "MethodCallSource",
    "Source",
    "TensorSpec",
    "TorchStateSource",
    "TypeSource",
    "compile_guards",
    "compile_source_loader",
    "describe_guard",
    "dict_item_source",
    "explain_failure",
    "is_frame_cell",
    "summarize",
    "tensor_mismatch",
]
