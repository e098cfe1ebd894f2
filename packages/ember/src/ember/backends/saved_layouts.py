"""The partition pass the inductor backend hands aot: saved activations kept in the layout the
forward computes them in (channels-last, where the target's policy trains that way;
ember_inductor_ir's saved_layouts.py); the backward is then compiled for those strides."""

from __future__ import annotations

import os

from ember.backends.inductor_settings import InductorSettings
from ember.backends.inductor_target import codegen_target
from ember.exc import EmberError
from ember_aot_autograd import Partition
from ember_inductor_ir.channels_last import ENV
from ember_inductor_ir.saved_layouts import keep_saved_channels_last

__all__ = ["SavedLayouts"]


class SavedLayouts:
    """An ember_aot_autograd PartitionPass. Its name carries what the decision reads besides
    the graphs (the forced target, the channels-last setting), since the aot artifact cache
    keys by the partitioner's name."""

    def __init__(self, settings: InductorSettings) -> None:
        self.settings = settings
        self.name = (
            f"saved_layouts(target={settings.target or 'device'}, "
            f"{ENV}={os.environ.get(ENV, 'auto')})"
        )

    def __call__(self, partition: Partition) -> Partition:
        try:
            target = codegen_target(partition.fw_gm, self.settings)
        except EmberError:  # mixed devices and the like: compiled (or not) as they are
            return partition
        keep_saved_channels_last(
            partition.fw_gm,
            partition.bw_gm,
            partition.num_fw_outputs,
            partition.num_saved,
            target,
        )
        return partition
