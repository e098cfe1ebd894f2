"""Which code generator compiles a prim graph: the device its tensors live on, or the forced
target (`options={"target": ...}`, EMBER_INDUCTOR_TARGET)."""

from __future__ import annotations

import torch

from ember.backends.inductor_settings import InductorSettings
from ember.exc import EmberError

__all__ = ["DEFAULT_SETTINGS", "TARGETS", "MixedDeviceGraph", "codegen_target", "devices_of"]

TARGETS = {"cpu": "cpp", "cuda": "triton"}  # device type -> ember-codegen target
DEFAULT_SETTINGS = InductorSettings()


class MixedDeviceGraph(EmberError):
    """A prim graph with real work on two devices: run as an FX graph (counted)."""


def devices_of(gm: torch.fx.GraphModule) -> set[str]:
    """The device types of the graph's tensor values."""
    return {
        node.meta["val"].device.type
        for node in gm.graph.nodes
        if isinstance(node.meta.get("val"), torch.Tensor)
    }


def codegen_target(gm: torch.fx.GraphModule, settings: InductorSettings = DEFAULT_SETTINGS) -> str:
    """The code generator for the devices the graph's tensors live on (or the forced one)."""
    devices = devices_of(gm)
    if devices >= {"cpu", "cuda"}:
        offender = cpu_work(gm)
        if offender is not None:
            raise MixedDeviceGraph(
                "the graph mixes CPU tensors (other than 0-dim scalars) with CUDA tensors; the "
                f"inductor backend generates code for one device per graph (first: {offender})"
            )
    return target_of(devices, settings)


def cpu_work(gm: torch.fx.GraphModule) -> str | None:
    """The first CPU value with real work (not a 0-dim scalar) or CPU graph output, named
    with the user code it came from; None when the CPU side is only scalars."""
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and val.device.type == "cpu" and val.dim() > 0:
            return _describe_node(node)
    (outputs,) = [n.args[0] for n in gm.graph.nodes if n.op == "output"]
    for o in torch.utils._pytree.tree_leaves(outputs):
        val = o.meta.get("val") if isinstance(o, torch.fx.Node) else None
        if isinstance(val, torch.Tensor) and val.device.type == "cpu":
            return "output " + _describe_node(o)
    return None


def _describe_node(node: torch.fx.Node) -> str:
    val = node.meta["val"]
    where = (node.meta.get("stack_trace") or "").strip().splitlines()
    origin = f" from {where[-2].strip()}" if len(where) >= 2 else ""
    return f"{node.name} = {node.target}: cpu {val.dtype}{list(val.shape)}{origin}"


def target_of(devices: set[str], settings: InductorSettings = DEFAULT_SETTINGS) -> str:
    """The target for a set of device types (CPU scalars of a GPU graph count as the GPU's)."""
    devices.discard("meta")
    if devices == {"cpu", "cuda"}:  # CPU scalars of a GPU graph: the wrapper moves them
        devices = {"cuda"}
    targets = {TARGETS.get(d) for d in devices} or {"cpp"}
    if None in targets or len(targets) > 1:
        raise EmberError(
            f"the inductor backend compiles graphs on one of {sorted(TARGETS)}, got tensors on "
            f"{sorted(devices)}; use backend='aot_eager' for other devices"
        )
    natural = targets.pop()
    if settings.target == "cpp" and natural != "cpp":
        raise EmberError(f"target 'cpp' compiles CPU graphs, this graph's tensors are on {devices}")
    # triton also runs CPU tensors, under TRITON_INTERPRET=1 (how CI tests the GPU path)
    return settings.target or natural
