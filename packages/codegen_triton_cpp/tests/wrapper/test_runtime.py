"""Helpers of every generated wrapper: CPU scalars moved to the graph's device together."""

from __future__ import annotations

import pytest
import torch

from ember_codegen.wrapper.runtime import (
    SCALAR_SLOT_BYTES,
    pack_scalars,
    scalars_to_device,
    unpack_scalars,
)

DTYPES = [torch.float32, torch.float64, torch.int64, torch.bfloat16]


def _check_block_views(moved, values, device):
    assert [m.shape for m in moved] == [torch.Size([])] * len(values)
    assert all(m.device.type == device and m.dtype == values[0].dtype for m in moved)
    assert [m.item() for m in moved] == [v.item() for v in values]
    assert all(m.data_ptr() % SCALAR_SLOT_BYTES == 0 for m in moved)
    assert len({m.untyped_storage().data_ptr() for m in moved}) == 1  # one block


@pytest.mark.parametrize("dtype", DTYPES)
def test_scalars_pack_into_one_block_each_in_an_aligned_slot(dtype):
    values = [torch.tensor(k * 3, dtype=dtype) for k in range(5)]
    _check_block_views(unpack_scalars(pack_scalars(values)), values, "cpu")


def test_packed_scalars_do_not_alias_the_inputs():
    values = [torch.tensor(1.0), torch.tensor(2.0)]
    moved = unpack_scalars(pack_scalars(values))
    values[0].add_(10)
    assert moved[0].item() == 1.0


def test_scalars_already_on_the_device_stay_as_they_are():
    values = [torch.tensor(1.0), torch.tensor(2.0)]
    assert all(
        a is b for a, b in zip(scalars_to_device(values, torch.device("cpu")), values, strict=True)
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("dtype", DTYPES)
def test_scalars_move_to_the_gpu_in_one_copy(dtype):
    values = [torch.tensor(k * 3, dtype=dtype) for k in range(5)]
    _check_block_views(scalars_to_device(values, torch.device("cuda")), values, "cuda")
