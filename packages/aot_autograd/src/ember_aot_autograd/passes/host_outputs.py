"""A GPU graph's CPU outputs, computed by a host graph of their own.

torch.optim keeps each parameter's step count as a 0-dim CPU tensor (its default unless
`capturable=True`). A traced optimizer step adds one to every count and returns the counts,
and derives its bias corrections from them for the GPU update: a graph with CPU outputs,
which the code generators do not take (one device per graph), so the whole step ran as an
FX graph of thousands of prims. Here such a graph is cut in two:

- the *host graph*: every CPU output, computed from CPU inputs alone (its nodes are copied,
  so the device graph may still read them);
- the *device graph*: the rest, with the CPU outputs dropped; what it still computes from CPU
  scalars is moved onto the GPU by device_placement.py, or read as scalars by the wrapper.

Each is compiled on its own (C++ for the host graph, Triton for the device graph) and one
call runs both and puts the outputs back in the graph's order. The cut is declined (the graph
stays one, and runs as before) when a CPU output depends on GPU data: that is a transfer,
which has to wait for the GPU where eager waits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.fx

from ember_aot_autograd.cse import pure_op
from ember_aot_autograd.passes.registry import graph_pass
from ember_aot_autograd.runtime import INPUT_WRITES_META

__all__ = ["HostSplit", "split_host_outputs"]


def _device_type(node: object) -> str | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val.device.type if isinstance(val, torch.Tensor) else None


@dataclass
class HostSplit:
    """The two graphs, which of the caller's inputs each takes, and where each output of the
    original graph comes from: ``(False, i)`` the device graph's i-th, ``(True, i)`` the host
    graph's."""

    host: torch.fx.GraphModule
    host_inputs: list[int]
    device: torch.fx.GraphModule
    device_inputs: list[int]
    places: list[tuple[bool, int]]

    def carry_input_writes(self, writes: Sequence[tuple[int, int]]) -> None:
        """The outputs the caller copies into inputs (ember_aot_autograd's
        INPUT_WRITES_META: output index, placeholder position), renumbered for each graph,
        so that either may write them in place (an optimizer's step counts on the host)."""
        host, device = [], []
        for k, position in writes:
            on_host, index = self.places[k]
            inputs, found = (self.host_inputs, host) if on_host else (self.device_inputs, device)
            if position in inputs:
                found.append((index, inputs.index(position)))
        self.host.meta[INPUT_WRITES_META] = tuple(host)
        self.device.meta[INPUT_WRITES_META] = tuple(device)

    def runner(self, host: Callable, device: Callable) -> Callable:
        """One call of both compiled graphs (each called with its inputs unpacked), the
        outputs in the original graph's order."""
        host_inputs, device_inputs, places = self.host_inputs, self.device_inputs, self.places

        def run(*args):
            # the device graph first: it reads the CPU scalars (copied to the GPU as it is
            # called) that the host graph may then write in place
            device_out = device(*[args[i] for i in device_inputs])
            host_out = host(*[args[i] for i in host_inputs])
            return [host_out[i] if on_host else device_out[i] for on_host, i in places]

        return run


def _outputs(gm: torch.fx.GraphModule) -> list | None:
    (output,) = [n for n in gm.graph.nodes if n.op == "output"]
    values = output.args[0]
    if not isinstance(values, (tuple, list)):
        return None
    if not all(isinstance(v, torch.fx.Node) or v is None for v in values):
        return None
    return list(values)


def _host_closure(gm: torch.fx.GraphModule, roots: Sequence[torch.fx.Node]) -> set | str:
    """The nodes the CPU outputs are computed from, or why they cannot run on the host.
    Computed twice (on the host for the output, on the GPU for what reads it), a value must
    come out the same: no random draws, no writes (pure_op)."""
    needed = set(roots)
    for node in reversed(gm.graph.nodes):  # users before what they read
        if node not in needed:
            continue
        if node.op not in ("placeholder", "get_attr", "call_function"):
            return f"{node.name} is a {node.op}"
        if _device_type(node) not in ("cpu", None):
            return f"a CPU output is computed from {node.name}, which is on the GPU"
        if node.op == "call_function" and not pure_op(node):
            return f"{node.name} ({node.target}) draws random numbers or writes"
        if node.op == "call_function" and any(
            isinstance(a, torch.device) and a.type != "cpu"
            for a in (*node.args, *node.kwargs.values())
        ):
            return f"{node.name} names a GPU device"
        needed.update(node.all_input_nodes)
    return needed


@graph_pass("host_outputs")
def split_host_outputs(gm: torch.fx.GraphModule) -> HostSplit | str:
    """A GPU graph's CPU outputs cut into a host graph of their own.

    Returns the graph cut into its host and device graphs (both new; ``gm`` is left as it
    is), or why it is left whole."""
    values = _outputs(gm)
    if values is None:
        return "the graph's outputs are not a flat sequence of values"
    on_host = [i for i, v in enumerate(values) if _device_type(v) == "cpu"]
    if not on_host:
        return "no CPU outputs"
    if len(on_host) == len(values):
        return "every output is on the CPU"
    closure = _host_closure(gm, [values[i] for i in on_host])
    if isinstance(closure, str):
        return closure
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]

    host_graph = torch.fx.Graph()
    copied: dict[torch.fx.Node, torch.fx.Node] = {}
    host_inputs = []
    for node in gm.graph.nodes:  # original order: topological
        if node not in closure:
            continue
        if node.op == "placeholder":
            host_inputs.append(placeholders.index(node))
        copied[node] = host_graph.node_copy(node, copied.__getitem__)
    host_graph.output(tuple(copied[values[i]] for i in on_host))
    host = torch.fx.GraphModule(gm, host_graph)

    host_index = {position: k for k, position in enumerate(on_host)}
    device_graph = torch.fx.Graph()  # a copy: the caller's graph stays whole (the aot cache
    copies: dict[torch.fx.Node, torch.fx.Node] = {}  # keeps its source)
    for node in gm.graph.nodes:
        if node.op != "output":
            copies[node] = device_graph.node_copy(node, copies.__getitem__)
    kept = [None if v is None else copies[v] for i, v in enumerate(values) if i not in host_index]
    device_graph.output(tuple(kept))
    host_only = {copies[n] for n in closure if n.op != "placeholder"}
    for node in reversed(list(device_graph.nodes)):  # the work only the CPU outputs needed
        if node in host_only and not node.users:
            device_graph.erase_node(node)
    device_inputs = []
    for position, node in enumerate(placeholders):
        if copies[node].users or _device_type(node) != "cpu":
            device_inputs.append(position)
        else:
            device_graph.erase_node(copies[node])  # a CPU input only the host graph reads
    device = torch.fx.GraphModule(gm, device_graph)
    places, device_index = [], 0
    for position in range(len(values)):
        if position in host_index:
            places.append((True, host_index[position]))
        else:
            places.append((False, device_index))
            device_index += 1
    return HostSplit(host, host_inputs, device, device_inputs, places)
