"""What each compiler's forward saves for the backward of one training step (CPU).

    python tools/saved_activations.py vit-probe [--layers 12]   (or resnet-blocks, convnext-blocks)
    python tools/saved_activations.py GPT2LMHeadModel [--layers 2] [--no-autocast]
    python tools/saved_activations.py LlamaForCausalLM

The step is the forward and the loss under CPU bf16 autocast and `loss.backward()` (no
optimizer: the saved values live in the forward/backward graph only). Ember's saved values
come from its partition (`ember_aot_autograd.observe_partitions`); torch.compile's from a
custom backend that partitions with torch._functorch's min-cut partitioner and inductor's
decompositions, as torch.compile does (a tool may import PyTorch's stack; Ember may not).
Per compiler it prints the saved activations (graph inputs such as parameters excluded:
they are alive anyway): count and bytes, by dtype and by the op that made each value, and
the largest values, and the backward graph's live peak (the most bytes alive at once
running its nodes in order: saved values, tangents and the values it makes). Hugging Face models are built as the suite runner builds them at
cpu-small (benchmarks/suites: library defaults, 2 layers, width 64; `--layers`, `--seq` and
`--set hidden_size=256` override).
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Saved:
    name: str
    op: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int


def live_peak(gm: torch.fx.GraphModule) -> int:
    """The most bytes of tensors alive at once running `gm`'s nodes in graph order: inputs
    from the start, each value from its node to its last use (views of others count 0)."""
    order = {n: k for k, n in enumerate(gm.graph.nodes)}
    last = {n: max((order[u] for u in n.users), default=order[n]) for n in gm.graph.nodes}
    alive, peak, ends = 0, 0, collections.defaultdict(int)
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        target = getattr(node.target, "_schema", None)
        view = target is not None and any(r.alias_info is not None for r in target.returns)
        if isinstance(val, torch.Tensor) and not view and node.op != "output":
            size = val.numel() * val.element_size()
            alive += size
            ends[last[node]] += size
        peak = max(peak, alive)
        alive -= ends.pop(order[node], 0)
    return peak


def _saved(placeholder: torch.fx.Node, producer: torch.fx.Node | None) -> Saved | None:
    val = placeholder.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return None
    op = "?" if producer is None else str(producer.target).replace("ember_prims.", "prims.")
    if producer is not None and producer.op == "placeholder":
        op = "input"
    nbytes = val.numel() * val.element_size()
    return Saved(placeholder.name, op, str(val.dtype).replace("torch.", ""), tuple(val.shape),
                 nbytes)  # fmt: skip


class Block(torch.nn.Module):
    """A pre-LN transformer block without attention (the ViT residual pattern)."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.n1, self.l1 = torch.nn.LayerNorm(d), torch.nn.Linear(d, d)
        self.n2, self.l2, self.l3 = (
            torch.nn.LayerNorm(d),
            torch.nn.Linear(d, 4 * d),
            torch.nn.Linear(4 * d, d),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.l1(self.n1(x))
        return x + self.l3(torch.nn.functional.gelu(self.l2(self.n2(x))))


class VitProbe(torch.nn.Module):
    def __init__(self, layers: int, d: int = 64) -> None:
        super().__init__()
        self.blocks = torch.nn.Sequential(*[Block(d) for _ in range(layers)])
        self.head = torch.nn.Linear(d, 10)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(input).mean(1))


class Bottleneck(torch.nn.Module):
    """A ResNet-50 block: 1x1, 3x3, 1x1 convolutions with batch norms, a residual relu."""

    def __init__(self, c: int) -> None:
        super().__init__()
        mid, bn = c // 4, torch.nn.BatchNorm2d
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(c, mid, 1, bias=False), bn(mid), torch.nn.ReLU(),
            torch.nn.Conv2d(mid, mid, 3, padding=1, bias=False), bn(mid), torch.nn.ReLU(),
            torch.nn.Conv2d(mid, c, 1, bias=False), bn(c),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.body(x))


class ConvNextBlock(torch.nn.Module):
    """A ConvNeXt block: 7x7 depthwise convolution, channels-last layer norm, MLP, layer
    scale, residual."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.dw = torch.nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm, self.l1, self.l2 = (
            torch.nn.LayerNorm(c),
            torch.nn.Linear(c, 4 * c),
            torch.nn.Linear(4 * c, c),
        )
        self.gamma = torch.nn.Parameter(torch.full((c,), 0.1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.gamma * self.l2(torch.nn.functional.gelu(self.l1(self.norm(y))))
        return x + y.permute(0, 3, 1, 2)


def _stack(block: type, layers: int, c: int) -> torch.nn.Module:
    return torch.nn.Sequential(*[block(c) for _ in range(layers)])


#: hand-built stacks of each suite's block kind: (model, input) builders
BLOCKS = {
    "vit-probe": lambda layers: (VitProbe(layers or 12), torch.randn(8, 50, 64)),
    "resnet-blocks": lambda layers: (_stack(Bottleneck, layers or 3, 64), torch.randn(8, 64, 16, 16)),
    "convnext-blocks": lambda layers: (_stack(ConvNextBlock, layers or 3, 64), torch.randn(8, 64, 14, 14)),
}  # fmt: skip


def build(name: str, layers: int | None, overrides: dict | None = None, seq: int | None = None):
    """(model, inputs, loss of the output)"""
    torch.manual_seed(0)
    if name in BLOCKS:
        model, x = BLOCKS[name](layers)
        return model, {"input": x}, lambda out: out.float().square().mean()
    sys.path.insert(0, str(ROOT / "benchmarks" / "suites"))
    from cases import build_huggingface
    from models import HF_SEQ, Entry

    if seq:
        HF_SEQ["cpu-small"] = seq
    small = {"num_hidden_layers": layers, "n_layer": layers} if layers else {}
    small.update(overrides or {})
    case = build_huggingface(Entry(name, 8, small=small), "cpu-small")
    return case.model, case.train_kwargs, lambda out: out.loss


def make_step(model, inputs, loss_of, autocast: bool):
    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_of(model(**inputs))
        loss.backward()
        return loss.detach()

    return step


def ember_saved(step, peaks: list[int] | None = None) -> list[Saved]:
    import ember
    from ember_aot_autograd import observe_partitions

    with observe_partitions() as partitions:
        ember.compile(step, backend="inductor")()
    out = []
    for part in partitions:
        producers = {n.name: n for n in part.fw_gm.graph.nodes}
        holders = [n for n in part.bw_gm.graph.nodes if n.op == "placeholder"][: part.num_saved]
        out += [s for h in holders if (s := _saved(h, producers.get(h.name))) is not None]
        if peaks is not None:
            peaks.append(live_peak(part.bw_gm))
    return out


def torch_compile_saved(step, peaks: list[int] | None = None) -> list[Saved]:
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch._inductor.decomposition import select_decomp_table

    forwards: list[torch.fx.GraphModule] = []
    out: list[Saved] = []

    def fw_compiler(gm, _inputs):
        forwards.append(gm)
        return gm.forward

    def bw_compiler(gm, _inputs):
        if peaks is not None:
            peaks.append(live_peak(gm))
        producers = {n.name: n for fw in forwards for n in fw.graph.nodes}
        for node in gm.graph.nodes:
            if node.op != "placeholder" or node.name.startswith("tangents"):
                continue
            if (s := _saved(node, producers.get(node.name))) is not None:
                out.append(s)
        return gm.forward

    backend = aot_autograd(
        fw_compiler=fw_compiler,
        bw_compiler=bw_compiler,
        decompositions=select_decomp_table(),
        partition_fn=functools.partial(min_cut_rematerialization_partition, compiler="inductor"),
    )
    torch._dynamo.reset()
    torch.compile(step, backend=backend)()
    return out


def summary(title: str, saved: list[Saved], top: int, peaks: list[int]) -> None:
    acts = [s for s in saved if s.op != "input"]
    total = sum(s.nbytes for s in acts)
    print(f"== {title}: {len(acts)} saved activations, {total} bytes "
          f"(+ {len(saved) - len(acts)} graph inputs, {sum(s.nbytes for s in saved) - total} bytes); backward live peak {sum(peaks)} bytes")  # fmt: skip
    for label, key in (("dtype", lambda s: s.dtype), ("op", lambda s: s.op)):
        groups: dict[str, list[Saved]] = collections.defaultdict(list)
        for s in acts:
            groups[key(s)].append(s)
        rows = sorted(groups.items(), key=lambda kv: -sum(s.nbytes for s in kv[1]))
        print(f"  by {label}: " + ", ".join(
            f"{k} {len(v)}x/{sum(s.nbytes for s in v)}B" for k, v in rows))  # fmt: skip
    for s in sorted(acts, key=lambda s: -s.nbytes)[:top]:
        print(f"    {s.name:<28} {s.op:<36} {s.dtype:<9} {list(s.shape)} {s.nbytes}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="vit-probe, or a transformers class (GPT2LMHeadModel)")
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--no-autocast", action="store_true")
    parser.add_argument("--seq", type=int, default=None, help="Hugging Face sequence length")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=INT",
                        help="a Hugging Face config override (hidden_size=256)")  # fmt: skip
    parser.add_argument("--top", type=int, default=8, help="largest values listed")
    parser.add_argument("--compilers", default="ember,torch.compile")
    args = parser.parse_args(argv)
    os.environ.setdefault("EMBER_CACHE_DIR", tempfile.mkdtemp(prefix="saved-acts-"))
    overrides = {k: int(v) for k, v in (item.split("=", 1) for item in args.set)}
    model, inputs, loss_of = build(args.model, args.layers, overrides, args.seq)
    runs = {"ember": ember_saved, "torch.compile": torch_compile_saved}
    for name in args.compilers.split(","):
        model.zero_grad(set_to_none=True)
        peaks: list[int] = []
        saved = runs[name](make_step(model, inputs, loss_of, not args.no_autocast), peaks)
        summary(f"{args.model} {name}", saved, args.top, peaks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
