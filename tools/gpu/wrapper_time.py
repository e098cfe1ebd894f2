"""How much of a training step's host time is the generated wrappers', torch.compile vs Ember.

    python tools/gpu/wrapper_time.py llama [--size real]

Per compiler: host time of the forward and backward phases (medians over steps, a sync
before each step), the host time inside the generated code's calls (the wrapper, hooked),
and each wrapper replayed alone in a loop on its recorded inputs (no autograd around it).
Then the per-call cost of the primitives a wrapper is made of, on this host.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile_model import sync

import ember
from ember_zoo import build

perf = time.perf_counter


class Hooked:
    """Times every call of ``owner.attr`` (a generated graph's entry) and keeps its inputs."""

    def __init__(self, owner: type, attr: str) -> None:
        self.owner, self.attr = owner, attr
        self.original = getattr(owner, attr)
        self.spent: collections.Counter = collections.Counter()
        self.inputs: dict = {}
        hooked = self

        def call(graph, inputs, *rest):
            hooked.inputs[id(graph)] = (graph, list(inputs))
            start = perf()
            try:
                return hooked.original(graph, inputs, *rest)
            finally:
                hooked.spent[id(graph)] += perf() - start

        setattr(owner, attr, call)

    def restore(self) -> None:
        setattr(self.owner, self.attr, self.original)


def phases(case, fn, hook: Hooked, steps: int) -> None:
    forward, backward, inside = [], [], []
    for _ in range(steps):
        sync()
        hook.spent.clear()
        t0 = perf()
        out = fn(*case.example_inputs, **case.example_kwargs)
        t1 = perf()
        case.loss(out).backward()
        t2 = perf()
        forward.append(t1 - t0)
        backward.append(t2 - t1)
        inside.append(sum(hook.spent.values()))
    sync()
    med = lambda xs: statistics.median(xs) * 1e3  # noqa: E731
    print(f"   host: forward {med(forward):.2f} ms + backward {med(backward):.2f} ms; inside "
          f"generated code {med(inside):.2f} ms")  # fmt: skip


@torch.no_grad()  # as autograd runs them: the generated code writes into out= buffers
def replay(hook: Hooked, run, steps: int) -> None:
    for graph, inputs in hook.inputs.values():
        times = []
        for _ in range(steps):
            sync()
            start = perf()
            run(graph, list(inputs))
            times.append(perf() - start)
        sync()
        print(f"   replayed alone ({len(inputs)} inputs): {statistics.median(times) * 1e3:.2f} ms")


def primitives() -> None:
    cuda = torch.device("cuda")
    a, b = torch.randn(128, 768, device=cuda), torch.randn(768, 768, device=cuda)
    out = torch.empty(128, 768, device=cuda)
    mm = torch.ops.aten.mm.default
    cases = {
        "aten.mm.default._op(a, b)": lambda: mm._op(a, b),
        "aten.mm.default(a, b)": lambda: mm(a, b),
        "torch.mm(a, b, out=)": lambda: torch.mm(a, b, out=out),
        "torch.empty_strided": lambda: torch.empty_strided((128, 768), (768, 1), device=cuda),
        "torch.as_strided": lambda: torch.as_strided(a, (768, 128), (1, 768)),
        "a.t()": lambda: a.t(),
        "a.data_ptr() % 16": lambda: a.data_ptr() % 16,
        "shape/contig/dtype check": lambda: a.shape != (128, 768) or not a.is_contiguous(),
        "a.stride() != (768, 1)": lambda: a.stride() != (768, 1),
    }
    try:
        from torch._C._dynamo.guards import _empty_strided_cuda, _reinterpret_tensor

        cases["_empty_strided_cuda (tc)"] = lambda: _empty_strided_cuda(
            (128, 768), (768, 1), torch.float32
        )
        cases["_reinterpret_tensor (tc)"] = lambda: _reinterpret_tensor(a, (768, 128), (1, 768), 0)
    except ImportError:
        pass
    for name, fn in cases.items():
        for _ in range(100):
            fn()
        sync()
        best = []
        for _ in range(5):
            start = perf()
            for _ in range(1000):
                fn()
            best.append((perf() - start) / 1000 * 1e6)
            sync()
        print(f"   {name:32s} {min(best):7.2f} us")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--size", default="real")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--compilers", default="torch.compile,ember")
    args = parser.parse_args()
    case = build(args.model, args.size, device="cuda")

    if "torch.compile" in args.compilers.split(","):
        time_torch_compile(case, args)
    if "ember" in args.compilers.split(","):
        time_ember(case, args)
    print("== primitives, host us per call")
    primitives()


def time_torch_compile(case, args) -> None:
    from torch._inductor.output_code import CompiledFxGraph

    time_compiler("torch.compile", torch.compile, CompiledFxGraph, "current_callable", case, args)


def time_ember(case, args) -> None:
    from ember_codegen.triton.compiled import CompiledGraph

    ember.reset()
    time_compiler("ember", ember.compile, CompiledGraph, "_call", case, args)


def time_compiler(name, compile_fn, graph_type, entry: str, case, args) -> None:
    """Phases and replays of one compiler's training step; ``graph_type.__call__`` is hooked
    and ``getattr(graph, entry)(inputs)`` replays a generated graph without the hook."""
    hook = Hooked(graph_type, "__call__")
    compiled = compile_fn(case.model)
    for _ in range(5):
        case.loss(compiled(*case.example_inputs, **case.example_kwargs)).backward()
    print(f"== {name} {args.model} train")
    phases(case, compiled, hook, args.steps)
    replay(hook, lambda graph, inputs: getattr(graph, entry)(inputs), args.steps)
    hook.restore()


if __name__ == "__main__":
    main()
