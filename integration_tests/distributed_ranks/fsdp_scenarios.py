"""FSDP2 (`fully_shard` per block and on the root) under ember.compile on 2 gloo ranks,
against eager FSDP2 (run by launch.py)."""

from __future__ import annotations

import torch
from torch import nn

import ember

WIDTH, BLOCKS = 16, 3


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(WIDTH, WIDTH)
        self.norm = nn.LayerNorm(WIDTH)

    def forward(self, x):
        return x + torch.tanh(self.fc(self.norm(x)))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.head = nn.Linear(WIDTH, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def sharded_net() -> Net:
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    net = Net()
    for block in net.blocks:
        fully_shard(block)
    fully_shard(net)
    return net


def batch(step: int, rank: int) -> torch.Tensor:
    return torch.randn(8, WIDTH, generator=torch.Generator().manual_seed(10 * step + rank))


def train(call, net: Net, rank: int, steps: int = 3) -> list[float]:
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    losses = []
    for step in range(steps):
        opt.zero_grad()
        loss = call(batch(step, rank)).square().mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _compare(eager: Net, compiled: Net) -> dict:
    # sharded parameters are DTensors: compare the full tensors (an all-gather each)
    pairs = zip(eager.parameters(), compiled.parameters(), strict=True)
    return {
        "max_difference": max(
            (a.full_tensor() - b.full_tensor()).abs().max().item() for a, b in pairs
        )
    }


def fsdp_root_compiled(rank: int, world: int) -> dict:
    """ember.compile(root): FSDP's hooks run eagerly (graph breaks at each sharded
    module's call), each block's forward is one graph."""
    ember.reset()
    eager, net = sharded_net(), sharded_net()
    with torch.no_grad():  # what the tracer makes of one call; the eager model gets one too
        explained = ember.explain(net)(batch(0, rank))
        eager(batch(0, rank))
    eager_losses = train(eager, eager, rank)
    losses = train(ember.compile(net), net, rank)
    return {
        "graph_ops": explained.ops_per_graph,
        "breaks": [b.reason for b in explained.breaks],
        "losses": [eager_losses, losses],
        "forward_graphs": ember.counters["inductor"]["forward_graphs"],
        "forward_runs": ember.counters["inductor"]["forward_runs"],
        "backward_runs": ember.counters["inductor"]["backward_runs"],
        **_compare(eager, net),
    }


def fsdp_blocks_compiled(rank: int, world: int) -> dict:
    """Each block's forward compiled on its own (FSDP's hooks stay around it)."""
    ember.reset()
    eager, net = sharded_net(), sharded_net()
    for block in net.blocks:
        block.forward = ember.compile(block.forward, backend="aot_eager")
    eager_losses = train(eager, eager, rank)
    losses = train(net, net, rank)
    return {
        "losses": [eager_losses, losses],
        "forward_graphs": ember.counters["aot_eager"]["forward_graphs"],
        "forward_runs": ember.counters["aot_eager"]["forward_runs"],
        **_compare(eager, net),
    }


SCENARIOS = {
    "fsdp_root_compiled": fsdp_root_compiled,
    "fsdp_blocks_compiled": fsdp_blocks_compiled,
}
