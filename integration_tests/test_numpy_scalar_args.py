"""A NumPy scalar made in the compiled function and passed to a tensor op as a size or an
operand: the graph keeps it as eager passes it, and its printed code can run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember


class Flatten(torch.nn.Module):
    def forward(self, x):
        n = np.int_(12)
        return x.reshape(n) * np.float64(0.5) + np.int32(2)


class Recording:
    def __init__(self) -> None:
        self.codes: list[str] = []

    def __call__(self, gm, example_inputs):
        self.codes.append(gm.code)
        return gm.forward


@pytest.mark.parametrize("backend", ["recording", "aot_eager", "inductor"])
def test_numpy_scalars_as_op_arguments(backend):
    ember.reset()
    recording = Recording()
    model = Flatten()
    compiled = ember.compile(model, backend=recording if backend == "recording" else backend)
    x = torch.randn(3, 4)
    for _ in range(2):
        got = compiled(x)
        torch.testing.assert_close(got, model(x))
        assert got.dtype == model(x).dtype
    if backend == "recording":
        assert len(recording.codes) == 1 and "np." in recording.codes[0]
