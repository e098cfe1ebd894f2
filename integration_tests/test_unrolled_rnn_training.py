"""A recurrent cell unrolled over time steps, trained through the inductor backend.

The backward of an unrolled LSTM reads each step's gate gradient once as is (into the
recurrent state's gradient, ``g_t @ W_hh``) and twice transposed (the weight gradients,
``g_t.T @ h_t`` and ``g_t.T @ x_t``), so the C++ wrapper holds that buffer transposed; the
first matmul once got the transposed tensor (``mat1 and mat2 shapes cannot be multiplied``).
Each case runs one training step (forward, loss, backward, SGD step) compiled and eager
from the same weights and compares the loss, every gradient and the updated weights.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import ember

BATCH, FEATURES, HIDDEN = 4, 6, 5


class UnrolledLSTM(torch.nn.Module):
    def __init__(self, steps: int, time_major: bool, linear: bool) -> None:
        super().__init__()
        self.steps, self.time_major, self.linear = steps, time_major, linear
        self.w_ih = torch.nn.Parameter(torch.randn(4 * HIDDEN, FEATURES) * 0.3)
        self.w_hh = torch.nn.Parameter(torch.randn(4 * HIDDEN, HIDDEN) * 0.3)
        self.bias = torch.nn.Parameter(torch.randn(4 * HIDDEN) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch = x.shape[1] if self.time_major else x.shape[0]
        h = x.new_zeros(batch, HIDDEN)
        c = x.new_zeros(batch, HIDDEN)
        outputs = []
        for t in range(self.steps):
            x_t = x[t] if self.time_major else x[:, t]
            if self.linear:
                gates = F.linear(x_t, self.w_ih, self.bias) + F.linear(h, self.w_hh)
            else:
                gates = x_t @ self.w_ih.t() + h @ self.w_hh.t() + self.bias
            i, f, g, o = gates.chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outputs.append(h)
        return torch.stack(outputs, 1)


def _train_step(model: torch.nn.Module, run, x: torch.Tensor) -> torch.Tensor:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer.zero_grad()
    loss = run(x).pow(2).mean()
    loss.backward()
    optimizer.step()
    return loss.detach()


@pytest.mark.parametrize(
    ("steps", "time_major", "linear"),
    [(8, False, False), (8, True, True), (16, False, True)],
    ids=["8-batch_major-matmul", "8-time_major-F.linear", "16-batch_major-F.linear"],
)
def test_unrolled_lstm_trains_like_eager(steps, time_major, linear):
    torch.manual_seed(0)
    shape = (steps, BATCH, FEATURES) if time_major else (BATCH, steps, FEATURES)
    x = torch.randn(shape)
    eager = UnrolledLSTM(steps, time_major, linear)
    compiled_model = UnrolledLSTM(steps, time_major, linear)
    compiled_model.load_state_dict(eager.state_dict())
    ember.reset()
    compiled = ember.compile(compiled_model, backend="inductor")

    expected = _train_step(eager, eager, x)
    actual = _train_step(compiled_model, compiled, x)

    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
    for (name, p_eager), p_compiled in zip(
        eager.named_parameters(), compiled_model.parameters(), strict=True
    ):
        torch.testing.assert_close(p_compiled.grad, p_eager.grad, rtol=1e-4, atol=1e-5, msg=name)
        torch.testing.assert_close(p_compiled, p_eager, rtol=1e-4, atol=1e-5, msg=name)
    stats = ember.counters["inductor"]
    assert stats["forward_graphs"] == 1 and stats["backward_runs"] == 1, dict(stats)
