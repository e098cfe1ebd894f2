"""Per-call overhead: tiny programs at batch 1 on one CPU thread, where the time of a call is
mostly the compiler's own Python (guards, frame hook, the aot runtime, the generated
wrapper's launches) rather than kernels.

Rows: a 3-layer MLP, an attention block, HF GPT-2 with library defaults (tiny config), a
24-input pointwise function, a training step (forward + backward + SGD step in one
compiled function), an AdamW step over 160 small parameters, and a 12-layer tiny GPT-2
training step with AdamW inside (library defaults, dropout included). Columns: eager, torch.compile (default mode), Ember (inductor), timed
interleaved (a batch of calls of each in turn, per round); the median per-call time over
rounds, and Ember / torch.compile per row (issue 15's target: at most 0.8x on each).
`--clock thread` times the calling thread's CPU time instead of wall time: with one torch
thread every call runs on it, and on a shared machine this leaves out time spent waiting
for a core.

    python benchmarks/call_overhead.py [--calls 300] [--rounds 15] [--rows mlp,gpt2]
                                       [--clock wall|thread] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch
import zoo_baseline as zb

COLUMNS = ("eager", "torch.compile", "ember")


@dataclass
class Program:
    """`make()` -> (fn, args): a fresh callable and its inputs (fresh state: a training step
    mutates its model, so each column gets its own copy)."""

    name: str
    make: Callable[[], tuple[Callable[..., Any], tuple]]
    grad: bool = False  # called with grad enabled (training); else under no_grad
    #: draws random numbers (dropout): each compiler has its own stream, values not compared
    random: bool = False


def _mlp() -> tuple[Callable, tuple]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 64),
        torch.nn.ReLU(),
        torch.nn.Linear(64, 8),
    ).eval()
    return model, (torch.randn(1, 32),)


class AttentionBlock(torch.nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.out(y.transpose(1, 2).reshape(b, t, d))


def _attention() -> tuple[Callable, tuple]:
    torch.manual_seed(0)
    return AttentionBlock().eval(), (torch.randn(1, 8, 32),)


def _gpt2() -> tuple[Callable, tuple]:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=128, n_positions=64, n_embd=32, n_layer=2, n_head=2)
    config.bos_token_id = config.eos_token_id = 127  # inside the tiny vocabulary
    model = GPT2LMHeadModel(config).eval()
    return model, (torch.randint(0, 128, (1, 8)),)


def _pointwise() -> tuple[Callable, tuple]:
    def many_inputs(*xs: torch.Tensor) -> torch.Tensor:
        acc = xs[0]
        for k, x in enumerate(xs[1:]):
            acc = acc * x + 0.5 if k % 2 else torch.tanh(acc) - x
        return acc

    torch.manual_seed(0)
    return many_inputs, tuple(torch.randn(16) for _ in range(24))


def _train_step() -> tuple[Callable, tuple]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return step, (torch.randn(1, 32), torch.randn(1, 8))


def _adamw_training(loss_of: Callable[[torch.Tensor], torch.Tensor], params) -> Callable:
    """The step users write: loss, backward, AdamW's step and zero_grad, in one function."""
    opt = torch.optim.AdamW(params, lr=1e-4)

    def step(x: torch.Tensor) -> torch.Tensor:
        loss = loss_of(x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def _adamw_step() -> tuple[Callable, tuple]:
    """AdamW inside the step over 160 small parameters: the optimizer's own graph (one
    update per parameter, step counts on the CPU) dominates."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(80)])
    return _adamw_training(lambda x: model(x).sum(), model.parameters()), (torch.randn(2, 4),)


def _gpt2_train() -> tuple[Callable, tuple]:
    """A GPT-2 training step as users write it (library defaults: dropout; labels for the
    loss; AdamW and zero_grad inside), 12 tiny layers."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=128, n_positions=64, n_embd=32, n_layer=12, n_head=2)
    config.bos_token_id = config.eos_token_id = 127
    model = GPT2LMHeadModel(config).train()
    step = _adamw_training(lambda ids: model(input_ids=ids, labels=ids).loss, model.parameters())
    return step, (torch.randint(0, 128, (2, 16)),)


PROGRAMS = {
    p.name: p
    for p in (
        Program("mlp", _mlp),
        Program("attention", _attention),
        Program("gpt2", _gpt2),
        Program("pointwise24", _pointwise),
        Program("train_step", _train_step, grad=True),
        Program("adamw_step", _adamw_step, grad=True),
        Program("gpt2_train", _gpt2_train, grad=True, random=True),
    )
}


def _compile(column: str, fn: Callable) -> Callable:
    if column == "eager":
        return fn
    if column == "torch.compile":
        return torch.compile(fn)
    import ember

    return ember.compile(fn, backend="inductor")


@dataclass
class Result:
    program: str
    us: dict[str, float | None] = field(default_factory=dict)  # median per-call microseconds
    first_call_s: dict[str, float] = field(default_factory=dict)
    ratio: float | None = None  # ember / torch.compile, of the medians
    matches: dict[str, bool] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def _leaves(out: Any) -> list[torch.Tensor]:
    leaves = torch.utils._pytree.tree_leaves(out if not hasattr(out, "to_tuple") else out[0])
    return [t.detach().clone() for t in leaves if isinstance(t, torch.Tensor)]


CLOCKS = {"wall": time.perf_counter, "thread": time.thread_time}


def measure(program: Program, calls: int, rounds: int, clock: str = "wall") -> Result:
    result = Result(program.name)
    steps: dict[str, Callable[[], Any]] = {}
    reference: list[torch.Tensor] = []
    for column in COLUMNS:
        fn, args = program.make()
        try:
            compiled = _compile(column, fn)

            def step(compiled: Callable = compiled, args: tuple = args) -> Any:
                return compiled(*args)

            if not program.grad:
                step = torch.no_grad()(step)
            start = time.perf_counter()
            out = _leaves(step())
            result.first_call_s[column] = time.perf_counter() - start
            if column == "eager":
                reference = out
            if not program.random:
                result.matches[column] = zb.compare(out, reference, 1e-3, 1e-3)[1]
            for _ in range(20):
                step()
            steps[column] = step
        except Exception as exc:  # a failing column is a result
            result.errors[column] = zb._reason(exc)
    now = CLOCKS[clock]
    samples: dict[str, list[float]] = {c: [] for c in steps}
    for _ in range(rounds):
        for column, step in steps.items():
            start = now()
            for _ in range(calls):
                step()
            samples[column].append((now() - start) / calls * 1e6)
    result.us = {c: statistics.median(s) for c, s in samples.items()}
    if result.us.get("ember") and result.us.get("torch.compile"):
        result.ratio = result.us["ember"] / result.us["torch.compile"]
    return result


def render(results: list[Result], env: dict[str, Any], calls: int, rounds: int, clock: str) -> str:
    lines = [
        f"## Per-call overhead, batch 1, {env['cpu_threads']} CPU thread ({env['date']})",
        "",
        f"torch {env['torch']}, transformers {env['transformers']}, Python {env['python']}; "
        f"{env['cpu']}; load average {env['loadavg']}; median over {rounds} interleaved rounds "
        f"of {calls} calls; {clock} clock.",
        "",
        "| program | eager us | torch.compile us | ember us | ember / torch.compile |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        cells = []
        for c in COLUMNS:
            if c in r.errors:
                cells.append("failed: " + r.errors[c].replace("|", "/"))
            else:
                mark = "" if r.matches.get(c, True) else " MISMATCH"
                cells.append(f"{r.us[c]:.1f}{mark}" if r.us.get(c) else "-")
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}x"
        lines.append(f"| {r.program} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default=",".join(PROGRAMS), help="comma-separated")
    p.add_argument("--calls", type=int, default=300, help="calls per timed sample")
    p.add_argument("--rounds", type=int, default=15, help="interleaved rounds")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = [r for r in args.rows.split(",") if r]
    unknown = sorted(set(rows) - set(PROGRAMS))
    if unknown:
        raise SystemExit(f"unknown rows {unknown}; valid: {', '.join(PROGRAMS)}")
    env_args = argparse.Namespace(device="cpu", size="batch 1", repeats=args.rounds)
    env = {**zb.environment(env_args), "loadavg": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    results = []
    for name in rows:
        zb.log(name)
        results.append(measure(PROGRAMS[name], args.calls, args.rounds, args.clock))
        zb.log("  " + ", ".join(f"{c} {us:.1f} us" for c, us in results[-1].us.items()))
    env["clock"] = args.clock
    print(render(results, env, args.calls, args.rounds, args.clock))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "rows": [asdict(r) for r in results]}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
