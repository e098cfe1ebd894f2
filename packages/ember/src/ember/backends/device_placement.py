"""CPU work computed only from CPU scalars, moved onto the graph's GPU.

A GPU graph may take 0-dim CPU tensors (a step count, an offset that a library keeps as a
Python-side tensor): the generated wrapper copies them to the GPU at entry. Values the graph
computes from them alone (`past_seen_tokens` broadcast over a batch, say) would be CPU tensors
with real work, which makes the graph run as an FX graph. Computing them on the GPU instead
gives the same values (integer work bit for bit, float work within eager's tolerances) as
long as none of them leaves the graph: outputs keep the devices eager gives them, so a graph
with such a CPU output is left alone.
"""

from __future__ import annotations

import torch

from ember.stats import counters


def _tensor_val(node: torch.fx.Node) -> torch.Tensor | None:
    val = node.meta.get("val")
    return val if isinstance(val, torch.Tensor) else None


def _on_cpu(node: torch.fx.Node) -> bool:
    val = _tensor_val(node)
    return val is not None and val.device.type == "cpu"


def move_scalar_work(gm: torch.fx.GraphModule) -> int:
    """Re-places, in place, the CPU values of a graph that also has values on one other
    device when they derive from CPU scalars only; returns how many moved (0: unchanged)."""
    others = {v.device for n in gm.graph.nodes if (v := _tensor_val(n)) is not None} - {
        torch.device("cpu")
    }
    if len(others) != 1:
        return 0
    (target,) = others
    computed = [n for n in gm.graph.nodes if n.op == "call_function" and _on_cpu(n)]
    if not any(_tensor_val(n).dim() > 0 for n in computed):
        return 0  # only scalars: the wrapper moves them like inputs
    plan: list[torch.fx.Node] = []
    moved: set[torch.fx.Node] = set()
    for node in computed:  # topological order: every CPU computation moves, or none
        if any(isinstance(a, torch.device) for a in node.args):
            return 0  # a device transfer (or a factory told its device positionally)
        for arg in node.all_input_nodes:
            val = _tensor_val(arg)
            if val is None or arg in moved:
                continue
            if val.device.type != "cpu":
                return 0  # GPU data into a CPU value: a transfer the graph asked for
            if arg.op == "placeholder" and val.dim() == 0:
                continue  # copied to the GPU at entry
            return 0  # real CPU data (or a CPU constant) feeds it
        plan.append(node)
        moved.add(node)
    if not plan:
        return 0
    (output,) = [n for n in gm.graph.nodes if n.op == "output"]
    if any(a in moved for a in output.all_input_nodes):
        return 0  # a CPU output must stay a CPU output
    for node in plan:
        val = _tensor_val(node)
        mode = getattr(val, "fake_mode", None)
        if mode is None:
            return 0
    for node in plan:
        val = _tensor_val(node)
        with val.fake_mode:
            node.meta["val"] = torch.empty_strided(
                val.shape, val.stride(), dtype=val.dtype, device=target
            )
        if isinstance(node.kwargs.get("device"), torch.device | str):
            node.kwargs = {**node.kwargs, "device": target}
    gm.recompile()
    counters["inductor"]["cpu_scalar_work_moved"] += len(plan)
    return len(plan)
