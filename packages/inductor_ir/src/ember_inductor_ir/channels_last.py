"""Which graphs run their 2-d convolutions channels-last (NHWC), per code generator.

Library convolutions run much faster on NHWC data: oneDNN on the CPU (cnn's first
convolution 4-8x), cuDNN on the GPU (fp16/bf16, and fp32 with TF32). What NHWC costs is a
transposing copy wherever a 4-d feature map leaves the graph with eager's (contiguous)
strides, so the policy says per target which graphs pay it:

- ``inference``: graphs whose returned values are not contiguous feature maps (an inference
  forward, whose convolutions' results stay inside the graph);
- ``training``: every graph, a training forward's saved activations stored NHWC
  (``saved_layouts.py``: the backward is compiled for those strides) and a backward's 4-d
  gradients copied to eager's strides at the end;
- ``weight_gradients``: a backward convolution asked for its weight gradient alone (the
  network's first convolution, whose input is data) in any graph: its gradient is stored
  NHWC by the kernel computing it (loops in its inputs' order, ``ComputedBuffer.loop_order``)
  and its input copied NHWC; nothing else in the graph changes layout.

The policy is a field of the code generator's capability record (``Target.channels_last``,
target.py; ember_codegen declares the C++ and the Triton one): the Triton target run on CPU
tensors under ``TRITON_INTERPRET=1`` takes the GPU's decision, which is how that path is
tested without a GPU. ``EMBER_CHANNELS_LAST`` overrides it: ``auto`` (default, the
target's), ``1`` (every graph, any target), ``inference`` (inference graphs only, any target:
the A/B of channels-last training), ``0`` (never).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

ENV = "EMBER_CHANNELS_LAST"


@dataclass(frozen=True)
class ChannelsLastPolicy:
    inference: bool  # graphs that keep their feature maps to themselves
    training: bool  # also graphs that return 4-d feature maps (training forward/backward)
    #: also a backward convolution that computes the weight gradient alone (the network's
    #: first convolution: its input is data) in any graph, its gradient and input copied
    #: or stored channels-last for the call
    weight_gradients: bool = False
    #: convolution shapes the target's library runs far slower NHWC whatever surrounds them,
    #: kept in eager's layout: names of the rules in lowering/convolution.py (SLOW_NHWC)
    slow_nhwc: frozenset[str] = frozenset()

    def allows(self, returns_feature_maps: bool) -> bool:
        return self.training if returns_feature_maps else self.inference


ON = ChannelsLastPolicy(inference=True, training=True, weight_gradients=True)
INFERENCE = ChannelsLastPolicy(inference=True, training=False)
OFF = ChannelsLastPolicy(inference=False, training=False)

_OVERRIDES = {
    "1": ON,
    "on": ON,
    "true": ON,
    "inference": INFERENCE,
    "0": OFF,
    "off": OFF,
    "false": OFF,
}


class HasChannelsLastPolicy(Protocol):
    channels_last: ChannelsLastPolicy


def channels_last_policy(target: HasChannelsLastPolicy) -> ChannelsLastPolicy:
    """``target``'s policy (a Target record) after the ``EMBER_CHANNELS_LAST`` override."""
    mode = os.environ.get(ENV, "auto").strip().lower()
    if mode in _OVERRIDES:
        return _OVERRIDES[mode]
    if mode != "auto":
        raise ValueError(f"{ENV} must be auto, 1, inference or 0, got {mode!r}")
    return target.channels_last
