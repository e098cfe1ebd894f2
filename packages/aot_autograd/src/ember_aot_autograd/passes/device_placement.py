"""CPU work computed only from CPU scalars, moved onto the graph's GPU.

A GPU graph may take 0-dim CPU tensors (a step count, an offset that a library keeps as a
Python-side tensor): the generated wrapper copies them to the GPU at entry. Values the graph
computes from them alone (`past_seen_tokens` broadcast over a batch, say) would be CPU tensors
with real work, which makes the graph run as an FX graph. Computing them on the GPU instead
gives the same values (integer work bit for bit, float work within eager's tolerances) as
long as none of them leaves the graph: outputs keep the devices eager gives them, so a graph
with such a CPU output is left alone. Chains of 0-dim values move too: a GPU kernel cannot
read a CPU buffer, so a scalar constant (DeBERTa-v2's ``sqrt(tensor(head_dim) * factor)``)
and any scalar a kernel stores go where the kernels run.
"""

from __future__ import annotations

import logging

import torch

from ember_aot_autograd.passes.registry import graph_pass

# the inductor backend's channel, where its users have read these decisions all along
log = logging.getLogger("ember.inductor")


def _tensor_val(node: torch.fx.Node) -> torch.Tensor | None:
    val = node.meta.get("val")
    return val if isinstance(val, torch.Tensor) else None


def _on_cpu(node: torch.fx.Node) -> bool:
    val = _tensor_val(node)
    return val is not None and val.device.type == "cpu"


def _decline(reason: str) -> tuple[int, str]:
    log.info("CPU work stays on the CPU: %s", reason)
    return 0, reason


@graph_pass("device_placement")
def move_scalar_work(gm: torch.fx.GraphModule) -> tuple[int, str]:
    """CPU work computed only from CPU scalars moved onto the graph's GPU.

    Re-places, in place, the CPU values of a graph that also has values on one other
    device when they derive from CPU scalars only (0-dim inputs and constants); returns how
    many moved (0: unchanged) and why not where none did."""
    others = {v.device for n in gm.graph.nodes if (v := _tensor_val(n)) is not None} - {
        torch.device("cpu")
    }
    if len(others) != 1:
        return 0, "no single other device"
    (target,) = others
    computed = [n for n in gm.graph.nodes if n.op == "call_function" and _on_cpu(n)]
    plan: list[torch.fx.Node] = []
    moved: set[torch.fx.Node] = set()
    constants: set[torch.fx.Node] = set()
    for node in computed:  # topological order: every CPU computation moves, or none
        if any(isinstance(a, torch.device) for a in node.args):
            return _decline(f"{node.name} names a device positionally (a transfer?)")
        for arg in node.all_input_nodes:
            val = _tensor_val(arg)
            if val is None or arg in moved:
                continue
            if val.device.type != "cpu":
                return _decline(f"{node.name} turns GPU data {arg.name} into a CPU value")
            if arg.op == "placeholder" and val.dim() == 0:
                continue  # copied to the GPU at entry
            if arg.op == "get_attr" and val.dim() == 0:
                constants.add(arg)  # a scalar constant: moved along
                continue
            return _decline(f"{node.name} reads CPU data {arg.name} {list(val.shape)}")
        plan.append(node)
        moved.add(node)
    if not plan:
        return 0, "nothing to move"
    (output,) = [n for n in gm.graph.nodes if n.op == "output"]
    if any(a in moved for a in output.all_input_nodes):
        return _decline("a CPU value computed from scalars is a graph output")
    if any(getattr(_tensor_val(n), "fake_mode", None) is None for n in plan):
        return _decline("example values are not fake tensors")
    for node in constants:
        value = getattr(gm, node.target).to(target)
        setattr(gm, node.target, value)
        mode = getattr(_tensor_val(node), "fake_mode", None)
        if mode is None:
            node.meta["val"] = value
            continue
        with mode:
            node.meta["val"] = torch.empty_strided(
                value.shape, value.stride(), dtype=value.dtype, device=target
            )
    for node in plan:
        val = _tensor_val(node)
        with val.fake_mode:
            node.meta["val"] = torch.empty_strided(
                val.shape, val.stride(), dtype=val.dtype, device=target
            )
        if isinstance(node.kwargs.get("device"), torch.device | str):
            node.kwargs = {**node.kwargs, "device": target}
    gm.recompile()
    return len(plan), ""
