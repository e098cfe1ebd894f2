"""Values that are not tensors flowing into graphs (issue 26, PyTorch's test_unspec): each
snippet is compiled with a recording backend (graph counts) and with inductor, and compared
with eager.

- `torch.tensor(b)` of a symbolic bool (a comparison of sizes under dynamic shapes) is a
  0-d bool tensor in the graph, as eager's `torch.tensor(True)`.
"""

from __future__ import annotations

import pytest
import torch

import ember


class Recording:
    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


@pytest.fixture(autouse=True)
def fresh():
    ember.reset()
    yield
    ember.reset()


def backends():
    recording = Recording()
    return recording, [ember.backends.symbolic_sizes(recording), "inductor"]


def rounded_is_empty(x):
    kept = torch.zeros((x.size(0) // 5) * 5)
    return torch.tensor(kept.numel() == 0), torch.tensor(x.size(0) > 6, dtype=torch.float32)


def test_tensor_of_a_symbolic_bool_is_a_graph_value():
    recording, choices = backends()
    for backend in choices:
        ember.reset()
        f = ember.compile(rounded_is_empty, backend=backend, dynamic=True, fullgraph=True)
        for n in (3, 5, 7, 11):
            got, want = f(torch.ones(n)), rounded_is_empty(torch.ones(n))
            for g, w in zip(got, want, strict=True):
                assert g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w)
    assert len(recording.graphs) == 1  # one symbolic graph for every size
