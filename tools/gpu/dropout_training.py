"""A GPT-2 training step as users write it: transformers' default config (dropout 0.1 in
attention, residuals and embeddings), AdamW and zero_grad inside the compiled step.
Eager, torch.compile, Ember and Ember reduce-overhead interleaved in one process.

    python tools/gpu/dropout_training.py [--rounds 5] [--steps 10]

Dropout draws differ between compilers (each has its own random stream), so values are not
compared here; the tests compare dropout-free steps with eager. What this shows is that the
step compiles into graphs, that reduce-overhead captures it, and what it costs.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

import ember
from ember.stats import counters


def make_step(model: torch.nn.Module):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(input_ids: torch.Tensor) -> torch.Tensor:
        loss = model(input_ids=input_ids, labels=input_ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return step


def dump_mixed_graphs(directory: str) -> None:
    """Write each graph the inductor backend leaves as a mixed-device FX graph to DIRECTORY,
    with a summary of its CPU side (what a split into host and device parts must handle)."""
    import collections
    import os

    import ember.backends.prim_stages as inductor  # where the stages call codegen_target

    os.makedirs(directory, exist_ok=True)
    original = inductor.codegen_target

    def recording(gm, *args, **kwargs):
        try:
            return original(gm, *args, **kwargs)
        except inductor.MixedDeviceGraph:
            index = len(os.listdir(directory))
            ops: collections.Counter = collections.Counter()
            cpu_inputs = cpu_nodes = 0
            for node in gm.graph.nodes:
                val = node.meta.get("val")
                if not isinstance(val, torch.Tensor) or val.device.type != "cpu":
                    continue
                if node.op == "placeholder":
                    cpu_inputs += 1
                elif node.op == "call_function":
                    cpu_nodes += 1
                    ops[f"{node.target} dim={val.dim()}"] += 1
            summary = f"{len(gm.graph.nodes)} nodes, {cpu_inputs} CPU inputs, {cpu_nodes} CPU nodes"
            print(f"mixed graph {index}: {summary}: {ops.most_common(12)}")
            with open(os.path.join(directory, f"mixed_{index}.py"), "w") as f:
                f.write(f"# {summary}\n{gm.code}")
            raise

    inductor.codegen_target = recording


def profile_steps(name: str, step, input_ids: torch.Tensor, count: int, sync) -> None:
    """The host's time in `count` steps by function (cProfile), the 25 dearest by own time."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    sync()
    profiler.enable()
    for _ in range(count):
        step(input_ids)
    sync()
    profiler.disable()
    print(f"== cProfile of {count} {name} steps (own time)")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="2 small layers (a quick check)")
    parser.add_argument("--only", default="eager,torch.compile,ember,ember-reduce-overhead")
    parser.add_argument("--dump-graphs", default="", help="write mixed-device graphs here")
    parser.add_argument("--profile", type=int, default=0, help="cProfile N steps of each")
    args = parser.parse_args()
    if args.dump_graphs:
        dump_mixed_graphs(args.dump_graphs)
    torch.manual_seed(0)
    config = GPT2Config()  # library defaults: 12 x 768, dropout 0.1, sdpa attention
    if args.tiny:
        config = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=256)
    input_ids = torch.randint(0, config.vocab_size, (2, 64), device=args.device)
    sync = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    steps = {}
    ember.reset()
    for name in args.only.split(","):
        model = GPT2LMHeadModel(config).to(args.device).train()
        step = make_step(model)
        if name == "torch.compile":
            step = torch.compile(step)
        elif name.startswith("ember"):
            mode = "reduce-overhead" if name.endswith("overhead") else None
            step = ember.compile(step, mode=mode)
        start = time.perf_counter()
        for _ in range(3):
            loss = step(input_ids)
        sync()
        print(f"{name}: first 3 steps {time.perf_counter() - start:.1f} s, loss {float(loss):.3f}")
        if name.startswith("ember"):
            print(f"   {dict(counters['inductor'])} {dict(counters['cudagraphs'])}")
            print(f"   graph breaks: {dict(counters['graph_breaks'])}")
        steps[name] = step
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, step in steps.items():
            sync()
            start = time.perf_counter()
            for _ in range(args.steps):
                step(input_ids)
            sync()
            times[name].append((time.perf_counter() - start) / args.steps * 1e3)
    for name, step in steps.items() if args.profile else ():
        profile_steps(name, step, input_ids, args.profile, sync)
    eager = statistics.median(times.get("eager") or next(iter(times.values())))
    for name, values in times.items():
        ms = statistics.median(values)
        print(f"{name:24s} {ms:7.2f} ms/step  {eager / ms:5.2f}x of eager")


if __name__ == "__main__":
    main()
