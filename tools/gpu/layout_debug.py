"""Where a training graph's 4-d buffers get their layouts, on the GPU (Triton target).

    python tools/gpu/layout_debug.py [resnet] [--size real] [--device cuda]

Compiles one training step of a zoo model and reports every 4-d buffer stored contiguous
(NCHW) in a graph that runs its convolutions channels-last: which FX node made it, how its
layout was decided (the realize vote, or an extern kernel's frozen argument), and every copy
``require_strides`` made because a buffer was already decided in another layout.
"""

from __future__ import annotations

import argparse
import collections
import traceback

import torch

import ember
from ember_inductor_ir import graph as graph_module
from ember_inductor_ir.layout import is_channels_last
from ember_zoo import build, training_loss

GL = graph_module.GraphLowering
records: list[str] = []
frozen_by: dict[str, str] = {}


def _where() -> str:
    frames = [f for f in traceback.extract_stack()[:-2] if "ember_inductor_ir" in f.filename]
    return " <- ".join(f"{f.name}:{f.lineno}" for f in frames[-4:])


def _install() -> None:
    realize, require, tensor_arg = GL.realize, GL.require_strides, GL.tensor_arg

    def traced_realize(self, box):
        node = graph_module.unwrap(box)
        result = realize(self, box)
        if isinstance(node, graph_module.Pointwise | graph_module.Reduction):
            buf = graph_module.unwrap(box)
            size = list(node.get_size())
            if len(size) == 4 and hasattr(buf, "layout") and not is_channels_last(buf.layout):
                votes = self._votes(node) if size[1] != 1 else None
                origin = self.current_node.format_node() if self.current_node else "?"
                records.append(
                    f"realize NCHW {getattr(buf, 'name', '?')} {size} votes={votes} "
                    f"node={origin[:160]} at {_where()}"
                )
        return result

    def traced_require(self, value, stride):
        before = graph_module.unwrap(value)
        out = require(self, value, stride)
        after = graph_module.unwrap(out)
        if after is not before:
            name = getattr(before, "name", type(before).__name__)
            records.append(
                f"copy for strides {list(stride)}: {name} frozen_by={frozen_by.get(name)} "
                f"node={self.current_node.format_node()[:160] if self.current_node else '?'}"
            )
        return out

    def traced_tensor_arg(self, value):
        arg = tensor_arg(self, value)
        if arg.name not in frozen_by:
            node = self.current_node
            frozen_by[arg.name] = node.format_node()[:120] if node is not None else "?"
        return arg

    GL.realize, GL.require_strides, GL.tensor_arg = (
        traced_realize,
        traced_require,
        traced_tensor_arg,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", nargs="?", default="resnet")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--size", default="real")
    args = parser.parse_args()
    _install()
    case = build(args.model, args.size, device=args.device)
    case.model.train()
    compiled = ember.compile(case.model, backend="inductor")
    training_loss(case, compiled).backward()
    if args.device == "cuda":
        torch.cuda.synchronize()
    kinds = collections.Counter(r.split(" ")[0] for r in records)
    print(f"== {args.model}: {dict(kinds)}")
    for r in records:
        print("  ", r)


if __name__ == "__main__":
    main()
