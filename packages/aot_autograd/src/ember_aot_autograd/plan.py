"""What the runtime wrapper needs besides the compiled graphs, as plain, serializable data.

A `RunnerPlan` says which function inputs feed the graphs, which inputs the forward writes,
how the function's output is rebuilt, and (training) which forward outputs get tangents, how
many values are saved for backward, and where the gradients go. `plan_to_data` /
`plan_from_data` turn it into JSON-able data and back, so that an artifact cache can rebuild the
runtime wrapper without tracing; what cannot be written as plain data raises NotSerializable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import treespec_dumps, treespec_loads

from ember_aot_autograd.errors import AotAutogradError
from ember_aot_autograd.outputs import Constant, FromGraph, OutputSpec, SameAsInput, ViewOfInput
from ember_aot_autograd.tensor_table import ViewStep

PLAN_FORMAT = 2
_PLAIN = (type(None), bool, int, float, str)


class NotSerializable(AotAutogradError):
    """A compiled variant whose wrapper metadata cannot be written as plain data."""


@dataclass(frozen=True)
class RunnerPlan:
    kind: str  # "inference" | "training"
    tensor_inputs: tuple[int, ...]  # function inputs that are graph inputs (primals), in order
    mutated_inputs: tuple[int, ...]  # inputs the forward writes, in forward-output order
    output_spec: OutputSpec
    num_fw_outputs: int = 0  # training: forward outputs before the saved values
    tangent_outputs: tuple[int, ...] = ()  # training: forward outputs that receive a tangent
    grad_slots: tuple[int, ...] = ()  # training: primal position of each backward output
    symbolic_saved: tuple[int, ...] = ()  # training: saved values that are sizes (SymInts)
    num_saved: int = 0  # training: values the forward saves for the backward
    # training: per backward output, the bitmask of the tangents it depends on (its
    # gradient is None when all of them are absent, as eager's; see missing_tangents.py)
    grad_masks: tuple[int, ...] = ()
    # training: (bitmask of tangents, message) per saved tensor the forward wrote after
    # autograd saved it: a backward with one of those tangents raises as eager's (saved_values)
    stale_saved: tuple[tuple[int, str], ...] = ()
    # training: the forward draws random numbers (a create_graph backward cannot recompute
    # it eagerly: see double_backward.py)
    draws_random: bool = False


def _plain(value: Any, what: str) -> Any:
    """A JSON-able copy of ints/floats/bools/None/str and lists of them (tuples become lists)."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v, what) for v in value]
    raise NotSerializable(f"{what}: {type(value).__name__} value {value!r} is not plain data")


def _op_from_name(name: str) -> torch._ops.OpOverload:
    namespace, rest = name.split("::", 1)
    packet, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), packet), overload or "default")


def _step_to_data(step: ViewStep) -> dict:
    return {
        "op": step.op.name() + "." + step.op._overloadname,
        "args": _plain(step.args, "view step args"),
        "kwargs": {k: _plain(v, "view step kwargs") for k, v in step.kwargs.items()},
        "index": step.index,
        "relative_offset": step.relative_offset,
    }


def _step_from_data(data: dict) -> ViewStep:
    return ViewStep(
        _op_from_name(data["op"]),
        tuple(data["args"]),
        dict(data["kwargs"]),
        data["index"],
        data["relative_offset"],
    )


def _leaf_to_data(leaf: Any) -> list:
    if isinstance(leaf, FromGraph):
        return ["graph", leaf.index]
    if isinstance(leaf, SameAsInput):
        return ["input", leaf.input_index]
    if isinstance(leaf, ViewOfInput):
        return ["view", leaf.input_index, [_step_to_data(s) for s in leaf.chain]]
    if isinstance(leaf, Constant) and isinstance(leaf.value, _PLAIN):
        return ["constant", leaf.value]
    raise NotSerializable(f"output leaf {leaf!r} is not plain data")


def _leaf_from_data(data: list) -> Any:
    kind = data[0]
    if kind == "graph":
        return FromGraph(data[1])
    if kind == "input":
        return SameAsInput(data[1])
    if kind == "view":
        return ViewOfInput(data[1], tuple(_step_from_data(s) for s in data[2]))
    return Constant(data[1])


def plan_to_data(plan: RunnerPlan) -> dict:
    """JSON-able data for `plan` (raises NotSerializable for non-plain output leaves)."""
    try:
        treespec = treespec_dumps(plan.output_spec.treespec)
    except Exception as error:  # custom pytree nodes without a serialization name
        raise NotSerializable(f"output structure cannot be serialized: {error}") from error
    return {
        "format": PLAN_FORMAT,
        "kind": plan.kind,
        "tensor_inputs": list(plan.tensor_inputs),
        "mutated_inputs": list(plan.mutated_inputs),
        "output_leaves": [_leaf_to_data(leaf) for leaf in plan.output_spec.leaves],
        "output_treespec": treespec,
        "num_fw_outputs": plan.num_fw_outputs,
        "tangent_outputs": list(plan.tangent_outputs),
        "grad_slots": list(plan.grad_slots),
        "grad_masks": list(plan.grad_masks),
        "stale_saved": [[mask, message] for mask, message in plan.stale_saved],
        "draws_random": plan.draws_random,
    }


def plan_from_data(data: dict) -> RunnerPlan:
    """The plan `plan_to_data` wrote (raises KeyError/ValueError on malformed data)."""
    if data.get("format") != PLAN_FORMAT:
        raise ValueError(f"runner plan format {data.get('format')!r}, expected {PLAN_FORMAT}")
    spec = OutputSpec(
        tuple(_leaf_from_data(leaf) for leaf in data["output_leaves"]),
        treespec_loads(data["output_treespec"]),
    )
    return RunnerPlan(
        kind=data["kind"],
        tensor_inputs=tuple(data["tensor_inputs"]),
        mutated_inputs=tuple(data["mutated_inputs"]),
        output_spec=spec,
        num_fw_outputs=data["num_fw_outputs"],
        tangent_outputs=tuple(data["tangent_outputs"]),
        grad_slots=tuple(data["grad_slots"]),
        grad_masks=tuple(data["grad_masks"]),
        stale_saved=tuple((mask, message) for mask, message in data.get("stale_saved", ())),
        draws_random=bool(data.get("draws_random", False)),
    )
