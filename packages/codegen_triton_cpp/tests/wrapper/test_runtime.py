"""Helpers of every generated wrapper: CPU scalars moved to the graph's device together."""

from __future__ import annotations

import pytest
import torch

from ember_codegen.wrapper.runtime import SCALAR_SLOT_BYTES, scalars_to_device

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bfloat16])
def test_scalars_move_in_one_block_each_in_an_aligned_slot(device, dtype):
    values = [torch.tensor(k * 3, dtype=dtype) for k in range(5)]
    moved = scalars_to_device(values, torch.device(device))
    assert [m.shape for m in moved] == [torch.Size([])] * 5
    assert all(m.device.type == device and m.dtype == dtype for m in moved)
    assert [m.item() for m in moved] == [v.item() for v in values]
    assert all(m.data_ptr() % SCALAR_SLOT_BYTES == 0 for m in moved)
    assert len({m.untyped_storage().data_ptr() for m in moved}) == 1  # one copy, one block


def test_moved_scalars_do_not_alias_the_inputs():
    values = [torch.tensor(1.0), torch.tensor(2.0)]
    moved = scalars_to_device(values, torch.device("cpu"))
    values[0].add_(10)
    assert moved[0].item() == 1.0
