"""DDP under ember.compile on 2 gloo ranks, each scenario against eager DDP (run by launch.py)."""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.nn.parallel import DistributedDataParallel as DDP

import ember

WIDTH = 32
# one Linear(32, 32) per bucket: DDP closes a bucket once it holds at least this many bytes
LAYER_MB = WIDTH * (WIDTH + 1) * 4 / 2**20


def make_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    blocks = [nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh()) for _ in range(4)]
    return nn.Sequential(*blocks, nn.Linear(WIDTH, 4))


def batch(step: int, rank: int) -> torch.Tensor:
    return torch.randn(8, WIDTH, generator=torch.Generator().manual_seed(100 * step + rank))


def max_difference(a: nn.Module, b: nn.Module) -> float:
    pairs = zip(a.parameters(), b.parameters(), strict=True)
    return max((p - q).abs().max().item() for p, q in pairs)


def train(model: nn.Module, params, rank: int, steps: int = 3) -> list[float]:
    opt = torch.optim.SGD(params, lr=0.1)
    losses = []
    for step in range(steps):
        opt.zero_grad()
        loss = model(batch(step, rank)).square().mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def ddp_pair(compile_outer: bool, backend: str, **ddp_kwargs):
    """(eager DDP, compiled DDP, eager inner module, compiled inner module)."""
    eager_inner, inner = make_model(), make_model()
    eager = DDP(eager_inner, bucket_cap_mb=LAYER_MB, **ddp_kwargs)
    if compile_outer:
        compiled = ember.compile(DDP(inner, bucket_cap_mb=LAYER_MB, **ddp_kwargs), backend=backend)
    else:
        compiled = DDP(ember.compile(inner, backend=backend), bucket_cap_mb=LAYER_MB, **ddp_kwargs)
    return eager, compiled, eager_inner, inner


def ddp_buckets_inductor(rank: int, world: int) -> dict:
    """ember.compile(DDP(m)): one compiled piece per bucket; a bucket's all-reduce is
    launched (comm hook) before the backward of the earlier pieces has run. (DDP's first
    iteration puts every gradient in one bucket and then rebuilds its buckets in the order
    gradients became ready: the last step shows the steady state.)"""
    ember.reset()
    eager, compiled, eager_inner, inner = ddp_pair(True, "inductor")
    runs_at_hook: list[int] = []

    def hook(state, bucket):
        runs_at_hook.append(ember.counters["inductor"]["backward_runs"])
        return allreduce_hook(state, bucket)

    compiled.register_comm_hook(None, hook)  # through OptimizedModule to the DDP module
    eager_losses = train(eager, eager_inner.parameters(), rank, steps=2)
    losses = train(compiled, inner.parameters(), rank, steps=2)
    before_last_step = len(runs_at_hook)
    eager_losses += train(eager, eager_inner.parameters(), rank, steps=1)
    runs_before = ember.counters["inductor"]["backward_runs"]
    losses += train(compiled, inner.parameters(), rank, steps=1)
    last_step = [runs - runs_before for runs in runs_at_hook[before_last_step:]]
    return {
        "max_difference": max_difference(eager_inner, inner),
        "losses": [eager_losses, losses],
        "ddp": dict(ember.counters["ddp"]),
        "forward_graphs": ember.counters["inductor"]["forward_graphs"],
        "backward_graphs": ember.counters["inductor"]["backward_graphs"],
        "pieces_done_at_each_bucket_hook": last_step,
    }


def ddp_inner_compiled(rank: int, world: int) -> dict:
    """DDP(ember.compile(m)) splits the same way."""
    ember.reset()
    eager, compiled, eager_inner, inner = ddp_pair(False, "aot_eager")
    train(eager, eager_inner.parameters(), rank)
    train(compiled, inner.parameters(), rank)
    return {
        "max_difference": max_difference(eager_inner, inner),
        "ddp": dict(ember.counters["ddp"]),
        "forward_graphs": ember.counters["aot_eager"]["forward_graphs"],
    }


def no_sync_accumulation(rank: int, world: int) -> dict:
    """Two micro-batches under no_sync(), a third synchronizing: gradients accumulate
    locally, then all-reduce once, as in eager DDP."""
    ember.reset()
    eager, compiled, eager_inner, inner = ddp_pair(True, "aot_eager")
    grads_after_no_sync = []
    for model, params in ((eager, eager_inner.parameters()), (compiled, inner.parameters())):
        params = list(params)
        opt = torch.optim.SGD(params, lr=0.1)
        for step in range(2):
            opt.zero_grad()
            with model.no_sync():
                model(batch(10 * step, rank)).sum().backward()
                model(batch(10 * step + 1, rank)).sum().backward()
            grads_after_no_sync.append([p.grad.clone() for p in params])
            model(batch(10 * step + 2, rank)).sum().backward()
            opt.step()
    local = zip(grads_after_no_sync[1], grads_after_no_sync[3], strict=True)
    # the unsynchronized gradients differ between ranks: all-gather one to show they did
    mine = grads_after_no_sync[3][0].reshape(-1)
    gathered = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    return {
        "max_difference": max_difference(eager_inner, inner),
        "no_sync_grad_difference": max((a - b).abs().max().item() for a, b in local),
        "ranks_differ_after_no_sync": not torch.equal(gathered[0], gathered[1]),
        "ddp": dict(ember.counters["ddp"]),
    }


class Branchy(nn.Module):
    """A layer used only on some calls: DDP must find it unused."""

    def __init__(self) -> None:
        super().__init__()
        self.body = make_model()
        self.extra = nn.Linear(4, 4)

    def forward(self, x, use_extra: bool):
        y = self.body(x)
        return self.extra(y) if use_extra else y


def find_unused_parameters(rank: int, world: int) -> dict:
    ember.reset()
    torch.manual_seed(0)
    eager_inner = Branchy()
    inner = copy.deepcopy(eager_inner)
    eager = DDP(eager_inner, bucket_cap_mb=LAYER_MB, find_unused_parameters=True)
    compiled = ember.compile(
        DDP(inner, bucket_cap_mb=LAYER_MB, find_unused_parameters=True), backend="aot_eager"
    )
    for model, module in ((eager, eager_inner), (compiled, inner)):
        opt = torch.optim.SGD(module.parameters(), lr=0.1)
        for step in range(4):
            opt.zero_grad()
            model(batch(step, rank), step % 2 == 1).square().mean().backward()
            opt.step()
    return {
        "max_difference": max_difference(eager_inner, inner),
        "ddp": dict(ember.counters["ddp"]),
    }


def dynamic_batch(rank: int, world: int) -> dict:
    """Batch sizes that change: the second trace is symbolic and split too (its pieces take
    the batch size as an int input), one graph for every later size."""
    ember.reset()
    eager, compiled, eager_inner, inner = ddp_pair(True, "aot_eager")
    differences = []
    for step, rows in enumerate((8, 12, 16, 20)):
        x = torch.randn(rows, WIDTH, generator=torch.Generator().manual_seed(10 * step + rank))
        for model in (eager, compiled):
            model.zero_grad()
            model(x).square().mean().backward()
        pairs = zip(eager_inner.parameters(), inner.parameters(), strict=True)
        differences.append(max((p.grad - q.grad).abs().max().item() for p, q in pairs))
    return {
        "max_grad_difference": max(differences),
        "ddp": dict(ember.counters["ddp"]),
        "graph_fallbacks": sum(ember.counters["graph_fallbacks"].values()),
    }


SCENARIOS = {
    "ddp_buckets_inductor": ddp_buckets_inductor,
    "ddp_inner_compiled": ddp_inner_compiled,
    "no_sync_accumulation": no_sync_accumulation,
    "find_unused_parameters": find_unused_parameters,
    "dynamic_batch": dynamic_batch,
}
