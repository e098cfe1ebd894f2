"""Building forward and backward graphs from a joint graph and a choice of saved values."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.fx

from ember_aot_autograd.errors import AotAutogradError
from ember_aot_autograd.graph_checks import clean
from ember_aot_autograd.joint import JointGraph


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
    real_grads = [g for g in grad_outputs if g is not None]
    bw_gm = _subgraph(joint, bw_inputs, real_grads, bw_keep | available)
    if SINK_RECOMPUTED:
        placeholders = [n for n in bw_gm.graph.nodes if n.op == "placeholder"]
        if sink_recomputed(bw_gm.graph, placeholders[len(saved) :]):  # (the tangents)
            bw_gm.recompile()
    primal_set = set(primals)
    report = PartitionReport(
        partitioner=name,
        saved=tuple(n.name for n in saved),
        saved_bytes=sum(value_bytes(n) for n in saved),
        saved_activation_bytes=sum(value_bytes(n) for n in saved if n not in primal_set),
        forward_ops=_count_ops(fw_gm),
        backward_ops=_count_ops(bw_gm),
    )
    return Partition(
        fw_gm=fw_gm,
        bw_gm=bw_gm,
        num_fw_outputs=len(fw_outputs),
        num_saved=len(saved),
        bw_grad_mask=[g is not None for g in grad_outputs],
        report=report,
        symbolic_saved=tuple(k for k, n in enumerate(saved) if is_size_node(n)),
    )


#: recomputed forward values placed just before their first backward reader (sink_recomputed)
SINK_RECOMPUTED = True


def sink_recomputed(graph: torch.fx.Graph, tangents: list[torch.fx.Node]) -> bool:
    """Place each recomputed value (one that no tangent reaches) just before its first reader;
    True when a node moved.

    A backward graph copies the joint's order: every forward value it recomputes comes first,
    before any gradient, so a value only the last layer's gradient reads (a norm's output a
    weight gradient multiplies) is made at the start and held through the whole backward.
    Ops with effects (random draws, writes) keep their place, and so do their inputs."""
    from_tangents = descendants(tangents)
    moved: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if node.op == "call_function" and node not in from_tangents and _pure(node):
            moved.add(node)
    order: list[torch.fx.Node] = []
    placed: set[torch.fx.Node] = set()

    def place(node: torch.fx.Node) -> None:
        stack = [(node, False)]
        while stack:
            item, expanded = stack.pop()
            if item in placed:
                continue
            if expanded:
                placed.add(item)
                order.append(item)
                continue
            stack.append((item, True))
            for dep in reversed(item.all_input_nodes):
                if dep not in placed:
                    stack.append((dep, False))

    nodes = list(graph.nodes)
    for node in nodes:
        if node.op == "output":  # a value nothing reads stays before it
            for left in nodes:
                if left in moved:
                    place(left)
        if node not in moved:
            place(node)
    moved_any = False
    anchor = None
    for node in order:
        if anchor is not None and anchor.next is not node:
            anchor.append(node)
            moved_any = True
        anchor = node
    return moved_any


def _pure(node: torch.fx.Node) -> bool:
    target = node.target
    schema = getattr(target, "_schema", None)
    if schema is None:  # getitem and arithmetic on sizes
        return getattr(target, "__module__", None) == "_operator"
    seeded = torch.Tag.nondeterministic_seeded in getattr(target, "tags", ())
    return not (schema.is_mutable or seeded)


def is_size_node(node: torch.fx.Node) -> bool:
    """A node computing a size (a SymInt): saved as an int, never recomputed from a tensor
    the backward would otherwise not need."""
    return isinstance(node.meta.get("val"), torch.SymInt | torch.SymFloat | torch.SymBool)


def _count_ops(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function")
