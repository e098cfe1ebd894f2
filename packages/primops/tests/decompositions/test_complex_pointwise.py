"""Pointwise decompositions given complex tensors, against eager (the oracle)."""

from __future__ import annotations

import torch

from ember_primops.decompose_mode import DecomposeMode


def test_angle_of_complex_is_atan2_of_the_parts_in_the_real_dtype():
    for dtype in (torch.complex64, torch.complex128):
        z = torch.tensor(
            [2 - 2j, -3 + 0j, 0j, 0.5j, complex(-1, -0.0), complex("nan")], dtype=dtype
        )
        with DecomposeMode() as mode:
            got = torch.angle(z)
        assert mode.decomposed_counts["aten.angle.default"] == 1
        assert got.dtype == z.real.dtype
        torch.testing.assert_close(got, torch.angle(z), equal_nan=True)


def test_nan_to_num_of_complex_replaces_in_each_part():
    inf, nan = float("inf"), float("nan")
    for dtype in (torch.complex64, torch.complex128):
        z = torch.tensor(
            [complex(nan, inf), complex(-inf, 1), complex(2, -inf), 3 + 4j], dtype=dtype
        )
        for kwargs in ({}, {"nan": 1.0, "posinf": 2.0, "neginf": -3.0}):
            with DecomposeMode() as mode:
                got = torch.nan_to_num(z, **kwargs)
            assert mode.decomposed_counts["aten.nan_to_num.default"] == 1
            assert got.dtype == dtype
            assert torch.equal(got, torch.nan_to_num(z, **kwargs)), (got, kwargs)
