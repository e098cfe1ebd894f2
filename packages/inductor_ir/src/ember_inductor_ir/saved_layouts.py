"""Saved activations keep the layout the forward computed them in.

A training forward returns, after its user-visible outputs, the values the backward reads.
Nobody else sees those, so they need not have eager's strides: where the target's policy
runs training convolutions channels-last (channels_last.py), each saved 4-d activation that
the forward stores NHWC (a convolution's result, a batch norm or ReLU of one) leaves the
forward as it is instead of through a transposing copy, and the backward is compiled for
exactly those strides. Both facts are written into the graphs themselves, so that they
survive the artifact caches (which keep graphs as source and input layouts):

- the forward returns ``copy_strided(value, nhwc_strides)`` at that saved position; its
  lowering (lowering/shape.py) is the value itself when it is, or can still be, stored so;
- the backward's placeholder for it has NHWC strides in ``meta['val']`` (what its compiler is
  given as example input), and each 4-d gradient it returns is pinned to eager's strides by
  a ``copy_strided`` too (re-propagating meta from the new placeholders must not change them).

The prediction of what the lowering stores NHWC follows its rules (convolutions by the
policy, then GraphLowering._follows_channels_last's majority vote over the values read);
a wrong guess costs one copy, never a wrong value.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
import torch.fx

from ember_primops import prims

from .channels_last import channels_last_policy
from .lowering.convolution import runs_slow_nhwc
from .lowering.registry import prim_name
from .lowering.view_ops import INJECTIVE_VIEWS
from .target import Target, resolve_target

log = logging.getLogger("ember.ir")

#: prims whose value is an index map of their first argument's storage
_VIEWS = INJECTIVE_VIEWS | {"broadcast_in_dim", "unfold"}


def _val(node: object) -> torch.Tensor | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _static(val: torch.Tensor) -> bool:
    return all(isinstance(s, int) for s in (*val.shape, *val.stride()))


def _feature_map(val: torch.Tensor | None) -> bool:
    """A 4-d/5-d map with channels: activations, and the integer or boolean maps computed
    from them (a max pool's window offsets, which the backward gathers beside NHWC
    gradients; a ReLU's mask)."""
    return (
        val is not None
        and val.ndim in (4, 5)
        and val.shape[1] > 1
        and not val.dtype.is_complex
        and _static(val)
    )


def _nhwc(val: torch.Tensor) -> bool:
    fmt = torch.channels_last if val.ndim == 4 else torch.channels_last_3d
    return val.is_contiguous(memory_format=fmt) and not val.is_contiguous()


def _nhwc_strides(shape: Sequence[int]) -> list[int]:
    order = [0, *range(2, len(shape)), 1]  # outermost to innermost
    stride = [0] * len(shape)
    running = 1
    for d in reversed(order):
        stride[d] = running
        running *= max(int(shape[d]), 1)
    return stride


def predicted_channels_last(
    gm: torch.fx.GraphModule, slow_nhwc: frozenset[str] = frozenset()
) -> set[torch.fx.Node]:
    """The call nodes whose values the lowering will store NHWC in a graph that runs its
    convolutions channels-last, but for those the policy's ``slow_nhwc`` rules keep in
    eager's layout (views map to the node whose storage they read)."""
    stored: set[torch.fx.Node] = set()
    root: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in gm.graph.nodes:
        root[node] = node
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        name = prim_name(node.target)
        first = node.args[0] if node.args else None
        if name in _VIEWS and isinstance(first, torch.fx.Node):
            root[node] = root.get(first, first)
            if name == "view_of" and first in stored:
                # the same tensor: stored as its source is (a saved value the min-cut took
                # as an alias of the ReLU output went to the backward through an NCHW copy)
                stored.add(node)
            continue
        val = _val(node)
        if name == "convolution":  # the policy trains channels-last: 2-d ones run so
            weight = _val(node.args[1])
            if (
                val is not None
                and val.ndim == 4
                and val.dtype.is_floating_point
                and weight is not None
                and weight.ndim == 4
                and not node.args[6]  # transposed
                and not runs_slow_nhwc(slow_nhwc, node, weight.shape, node.args[8])
            ):
                stored.add(node)
            continue
        if not _feature_map(val):
            continue
        votes = 0
        for source in {root.get(n, n) for n in node.all_input_nodes}:
            read = _val(source)
            if read is None or read.ndim != val.ndim or read.shape[1] == 1:
                continue
            if all(n == 1 for n in read.shape[2:]):  # (N, C, 1, 1): no say (layout.order_free)
                continue
            votes += 1 if source in stored or _nhwc(read) else -1
        if votes > 0:
            stored.add(node)
    return stored


def keep_saved_channels_last(
    fw_gm: torch.fx.GraphModule,
    bw_gm: torch.fx.GraphModule,
    num_fw_outputs: int,
    num_saved: int,
    target: Target | str,
) -> int:
    """Rewrite a partitioned training graph pair so that its saved NHWC activations cross
    from forward to backward without copies (see the module doc). Returns how many saved
    values now travel channels-last (0: both graphs are left as they were). ``target``: the
    code generator's record (target.py), or the name it is registered under."""
    policy = channels_last_policy(resolve_target(target))
    if not policy.training:
        return 0
    if not any(
        n.op == "call_function"
        and isinstance(n.target, torch._ops.OpOverload)
        and prim_name(n.target) == "convolution"
        for n in fw_gm.graph.nodes
    ):
        return 0
    stored = predicted_channels_last(fw_gm, policy.slow_nhwc)
    fw_out = next(n for n in reversed(fw_gm.graph.nodes) if n.op == "output")
    outputs = list(fw_out.args[0])
    bw_inputs = [n for n in bw_gm.graph.nodes if n.op == "placeholder"]
    changed = 0
    for k in range(num_fw_outputs, num_fw_outputs + num_saved):
        value = outputs[k]
        val = _val(value)
        if value not in stored or not _feature_map(val) or _nhwc(val):
            continue
        stride = _nhwc_strides(val.shape)
        with fw_gm.graph.inserting_before(fw_out):
            copy = fw_gm.graph.call_function(prims.copy_strided, (value, stride))
        copy.meta["val"] = _restrided(val, stride)
        outputs[k] = copy
        bw_inputs[k - num_fw_outputs].meta["val"] = copy.meta["val"]
        changed += 1
    if not changed:
        return 0
    fw_out.args = (tuple(outputs),)
    _pin_output_strides(bw_gm)
    fw_gm.recompile()
    bw_gm.recompile()
    log.info("%d saved activations cross to the backward channels-last", changed)
    return changed


def _restrided(val: torch.Tensor, stride: list[int]) -> torch.Tensor:
    """``val``'s fake twin with ``stride`` (made in its fake mode, so on its device)."""
    mode = getattr(val, "fake_mode", None)
    if mode is None:
        return torch.empty_strided(val.shape, stride, dtype=val.dtype, device=val.device)
    with mode:
        return torch.empty_strided(val.shape, stride, dtype=val.dtype, device=val.device)


def _pin_output_strides(bw_gm: torch.fx.GraphModule) -> None:
    """Each 4-d/5-d gradient the backward returns keeps the strides it has now (eager's)."""
    out = next(n for n in reversed(bw_gm.graph.nodes) if n.op == "output")
    pinned = []
    for item in out.args[0]:
        val = _val(item)
        if item is None or item.op == "placeholder" or not _feature_map(val):
            pinned.append(item)
            continue
        with bw_gm.graph.inserting_before(out):
            copy = bw_gm.graph.call_function(prims.copy_strided, (item, list(val.stride())))
        copy.meta["val"] = val
        pinned.append(copy)
    out.args = (tuple(pinned),)
