"""Building forward and backward graphs from a joint graph and a choice of saved values."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import torch
import torch.fx

from ember_aot_autograd.errors import AotAutogradError
from ember_aot_autograd.graph_checks import clean
from ember_aot_autograd.joint import JointGraph

log = logging.getLogger("ember.aot")

#: callbacks told of every partition built (tools/saved_activations.py reads what is saved)
_OBSERVERS: list[Callable[[Partition], None]] = []


@contextlib.contextmanager
def observe_partitions() -> Iterator[list[Partition]]:
    """Collects every partition built inside the block (a debugging and measuring hook)."""
    seen: list[Partition] = []
    _OBSERVERS.append(seen.append)
    try:
        yield seen
    finally:
        _OBSERVERS.remove(seen.append)


def value_bytes(node: torch.fx.Node) -> int:
    """Bytes of the tensor(s) a node holds (its meta['val']); 0 for non-tensors."""
    val = node.meta.get("val")
    values = val if isinstance(val, (tuple, list)) else (val,)
    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


@dataclass(frozen=True)
class PartitionReport:
    """What a partitioner saved for backward."""

    partitioner: str
    saved: tuple[str, ...]  # forward values the backward receives, by node name
    saved_bytes: int  # all saved tensors, inputs included
    saved_activation_bytes: int  # saved tensors that are not graph inputs
    forward_ops: int
    backward_ops: int


@dataclass
class Partition:
    fw_gm: torch.fx.GraphModule  # primals -> (forward outputs..., saved...)
    bw_gm: torch.fx.GraphModule  # (saved..., tangents...) -> gradients of joint.grad_inputs
    num_fw_outputs: int
    num_saved: int
    bw_grad_mask: list[bool]  # per joint.grad_inputs: whether bw_gm returns a gradient for it
    report: PartitionReport
    symbolic_saved: tuple[int, ...] = ()  # positions among the saved values that are sizes


def joint_parts(joint: JointGraph):
    """(primals, tangents, forward outputs, gradient outputs) of a joint graph."""
    graph = joint.gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    primals = placeholders[: joint.num_primals]
    tangents = placeholders[joint.num_primals :]
    outputs = list(next(n for n in reversed(graph.nodes) if n.op == "output").args[0])
    return primals, tangents, outputs[: joint.num_fw_outputs], outputs[joint.num_fw_outputs :]


def ancestors(roots: Iterable[torch.fx.Node | None], stop: set[torch.fx.Node]) -> set:
    """`roots` and everything they depend on, not looking past nodes in `stop`."""
    seen: set[torch.fx.Node] = set()
    work = [r for r in roots if isinstance(r, torch.fx.Node)]
    while work:
        node = work.pop()
        if node in seen:
            continue
        seen.add(node)
        if node not in stop:
            work.extend(node.all_input_nodes)
    return seen


def descendants(roots: Iterable[torch.fx.Node]) -> set:
    seen: set[torch.fx.Node] = set()
    work = list(roots)
    while work:
        node = work.pop()
        if node not in seen:
            seen.add(node)
            work.extend(node.users)
    return seen


def _subgraph(
    joint: JointGraph,
    inputs: list[tuple[torch.fx.Node, str]],
    outputs: list[torch.fx.Node | None],
    keep: set[torch.fx.Node],
) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node, name in inputs:
        env[node] = graph.placeholder(name)
        env[node].meta = dict(node.meta)
    for node in joint.gm.graph.nodes:
        if node in keep and node not in env and node.op != "output":
            if node.op == "placeholder":
                raise AotAutogradError(f"partition needs {node.name} but it is not an input")
            env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output(tuple(env[o] if o is not None else None for o in outputs))
    clean(graph)
    return torch.fx.GraphModule(joint.gm, graph)


def build_partition(joint: JointGraph, saved: Iterable[torch.fx.Node], name: str) -> Partition:
    """Forward computes its outputs and `saved`; backward starts from `saved` and tangents."""
    primals, tangents, fw_outputs, grad_outputs = joint_parts(joint)
    saved = [n for n in joint.gm.graph.nodes if n in set(saved) and n.op != "get_attr"]
    fw_keep = ancestors([*fw_outputs, *saved], set())
    fw_gm = _subgraph(joint, [(p, p.name) for p in primals], [*fw_outputs, *saved], fw_keep)
    available = set(saved) | set(tangents)
    bw_keep = ancestors(grad_outputs, available)
    missing = [p.name for p in primals if p in bw_keep and p not in available]
    if missing:
        raise AotAutogradError(f"partition {name}: backward needs unsaved inputs {missing}")
    bw_inputs = [(n, n.name) for n in saved] + [(t, t.name) for t in tangents]
    tangent_names = {t.name for t in tangents}
    real_grads = [g for g in grad_outputs if g is not None]
    bw_gm = _subgraph(joint, bw_inputs, real_grads, bw_keep | available)
    recompute_late(bw_gm.graph, [n for n in bw_gm.graph.nodes if n.name in tangent_names])
    primal_set = set(primals)
    report = PartitionReport(
        partitioner=name,
        saved=tuple(n.name for n in saved),
        saved_bytes=sum(value_bytes(n) for n in saved),
        saved_activation_bytes=sum(value_bytes(n) for n in saved if n not in primal_set),
        forward_ops=_count_ops(fw_gm),
        backward_ops=_count_ops(bw_gm),
    )
    partition = Partition(
        fw_gm=fw_gm,
        bw_gm=bw_gm,
        num_fw_outputs=len(fw_outputs),
        num_saved=len(saved),
        bw_grad_mask=[g is not None for g in grad_outputs],
        report=report,
        symbolic_saved=tuple(k for k, n in enumerate(saved) if is_size_node(n)),
    )
    log.debug(
        "partition %s saves %d values, %d bytes (%d of activations)",
        name,
        len(saved),
        report.saved_bytes,
        report.saved_activation_bytes,
    )
    for observer in list(_OBSERVERS):
        observer(partition)
    return partition


def recompute_late(graph: torch.fx.Graph, tangents: list[torch.fx.Node]) -> None:
    """Moves each value the backward recomputes from saved ones (it reads no tangent) to just
    before its first use: recomputed values are then not all alive from the start of the
    backward, and unrelated recomputations are not side by side for fusion to merge."""
    late = descendants(tangents)
    order: list[torch.fx.Node] = []
    placed: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if node.op == "placeholder" or node.op == "output" or node in late:
            _place(node, order, placed)
    anchor = order[0]
    for node in order[1:]:
        if anchor.next is not node:
            anchor.append(node)
        anchor = node


def _place(root: torch.fx.Node, order: list, placed: set) -> None:
    """Appends `root` to `order` after whichever of its inputs are not placed yet."""
    work = [(root, False)]
    while work:
        node, ready = work.pop()
        if node in placed:
            continue
        if ready:
            placed.add(node)
            order.append(node)
            continue
        work.append((node, True))
        work.extend((i, False) for i in reversed(node.all_input_nodes) if i not in placed)


def is_size_node(node: torch.fx.Node) -> bool:
    """A node computing a size (a SymInt): saved as an int, never recomputed from a tensor
    the backward would otherwise not need."""
    return isinstance(node.meta.get("val"), torch.SymInt | torch.SymFloat | torch.SymBool)


def _count_ops(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function")
