"""Values autograd saves for the backward during the joint trace, as of when it saved them.

The program's in-place ops run on the fake tensors under autograd, so autograd's version
counters move as eager's do; but the graph is functional: a value saved for the backward (y
in `y * w`) is a node of its own that a later write to y (`y.clamp_()`) cannot change. The
saved-tensor hooks hand the backward that node (a snapshot taken when autograd saved the
tensor) instead of letting autograd read the tensor back, which would stop the trace with its
version check at compile time although eager's forward runs.

Eager raises that error when its backward reaches the node whose saved tensor was written.
The hooks keep the check: a saved tensor whose version moved is recorded with the autograd
node that read it, and `stale_masks` says which tangents reach such a node, so that the
runtime raises eager's error when a backward call has one of them (missing_tangents.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

from ember_aot_autograd.tensor_table import storage_key
from ember_aot_autograd.tracer import FunctionalTracer


class SavedValues:
    """The pack/unpack hooks of one joint trace and the stale reads they saw."""

    def __init__(self, tracer: FunctionalTracer) -> None:
        self.tracer = tracer
        self.stale: list[tuple[Any, str]] = []  # (autograd node, eager's error message)

    @contextmanager
    def hooks(self) -> Iterator[None]:
        """The joint trace's own hooks, whatever the caller set around the compile: under a
        tracer that suspended default hooks (so that a user's pack never sees a fake tensor),
        and under `disable_saved_tensors_hooks`, which refuses to push any."""
        autograd = torch._C._autograd
        set_tracing = getattr(autograd, "_saved_tensors_hooks_set_tracing", None)
        tracing = set_tracing(False) if set_tracing is not None else False
        disabled = not autograd._saved_tensors_hooks_is_enabled()
        message = autograd._saved_tensors_hooks_get_disabled_error_message() if disabled else None
        if disabled:
            autograd._saved_tensors_hooks_enable()
        try:
            with torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
                yield
        finally:
            if disabled:
                autograd._saved_tensors_hooks_disable(message)
            if set_tracing is not None:
                set_tracing(tracing)

    def _pack(self, tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        value = tensor
        if isinstance(tensor, FakeTensor) and self._traced(tensor):
            value = self.tracer.snapshot(tensor)
        return value, tensor, tensor._version

    def _unpack(self, packed: tuple[torch.Tensor, torch.Tensor, int]) -> torch.Tensor:
        value, tensor, version = packed
        if tensor._version != version:
            self.stale.append((torch._C._current_autograd_node(), _message(tensor, version)))
        return value

    def _traced(self, tensor: torch.Tensor) -> bool:
        table = self.tracer.table
        return table.get(tensor) is not None or storage_key(tensor) in table.storages

    def stale_masks(self, roots: Sequence[torch.Tensor]) -> tuple[tuple[int, str], ...]:
        """For each stale read: the bitmask of the roots (tangent outputs) whose history
        reaches the node that made it, and the message eager's backward raises there."""
        if not self.stale:
            return ()
        reach = [_history(root.grad_fn) for root in roots]
        result = []
        for node, message in self.stale:
            mask = sum(1 << k for k, nodes in enumerate(reach) if id(node) in nodes)
            result.append((mask, message))
        return tuple(result)


def _history(node: Any) -> set[int]:
    """ids of the autograd nodes reachable from `node` (the nodes stay alive meanwhile)."""
    seen: dict[int, Any] = {}
    stack = [node]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen[id(current)] = current
        stack.extend(next_node for next_node, _ in current.next_functions)
    return set(seen)


def _message(tensor: torch.Tensor, version: int) -> str:
    return (
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: [torch.{_type_name(tensor)} {list(tensor.shape)}] is at version {tensor._version}; expected "
        f"version {version} instead (raised by the compiled backward, where eager's "
        "backward raises it)"
    )


def _type_name(tensor: torch.Tensor) -> str:
    names = {
        torch.float32: "FloatTensor",
        torch.float64: "DoubleTensor",
        torch.float16: "HalfTensor",
        torch.bfloat16: "BFloat16Tensor",
    }
    return names.get(tensor.dtype, f"{tensor.dtype}Tensor")


# `torch.autograd.graph.disable_saved_tensors_hooks` as a tracer leaves it in a graph: calls
# that switch autograd's thread state and answer None. Run during the joint trace, they would
# refuse the trace's own hooks (SavedValues.hooks); the traced program has no use for them.
_HOOK_SWITCHES = (
    torch._C._autograd._saved_tensors_hooks_disable,
    torch._C._autograd._saved_tensors_hooks_enable,
)


def without_hook_switches(gm: torch.nn.Module) -> torch.nn.Module:
    """`gm`, or a copy of its graph module without its unused saved-tensor-hook switches."""
    graph = getattr(gm, "graph", None)
    if not isinstance(graph, torch.fx.Graph) or not any(_is_switch(n) for n in graph.nodes):
        return gm
    copy = torch.fx.Graph()
    copy.output(copy.graph_copy(graph, {}))
    for node in [n for n in copy.nodes if _is_switch(n)]:
        copy.erase_node(node)
    stripped = torch.fx.GraphModule(gm, copy)
    stripped.meta.update(getattr(gm, "meta", {}))
    return stripped


def _is_switch(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and node.target in _HOOK_SWITCHES and not node.users
