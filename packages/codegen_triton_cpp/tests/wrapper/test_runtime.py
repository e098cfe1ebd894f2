"""Helpers of every generated wrapper: CPU scalars moved to the graph's device together, a
library result adopted into its buffer's layout."""

from __future__ import annotations

import pytest
import torch

from ember_codegen.wrapper.runtime import (
    ADOPTED_COPIES,
    SCALAR_SLOT_BYTES,
    adopt_extern_output,
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


def test_a_result_differing_only_in_unit_dimensions_strides_is_viewed_not_copied():
    # a 1x1 convolution's [N, C, 1, 1] result: strides of the size-1 dims address nothing
    t = torch.randn(4, 6, 1, 1)  # strides (6, 1, 1, 1)
    before = sum(ADOPTED_COPIES.values())
    got = adopt_extern_output(t, (4, 6, 1, 1), (6, 1, 6, 6), 0, torch.float32)
    assert got.stride() == (6, 1, 6, 6) and got.data_ptr() == t.data_ptr()
    assert sum(ADOPTED_COPIES.values()) == before


def test_a_result_in_another_order_is_copied_into_the_buffers_layout():
    t = torch.randn(4, 6, 3, 1)  # contiguous; the plan wants channels last
    got = adopt_extern_output(t, (4, 6, 3, 1), (18, 1, 6, 6), 0, torch.float32)
    assert got.stride() == (18, 1, 6, 6) and got.data_ptr() != t.data_ptr()
    torch.testing.assert_close(got, t)
