"""How far eager's own gradients move when a model runs channels-last instead of NCHW, next to
how far Ember's move from eager NCHW: the yardstick for a training MISMATCH that is rounding.

    python tools/gpu/layout_sensitivity.py resnet [--size tiny]
"""

from __future__ import annotations

import argparse
import dataclasses

import torch

import ember
from ember_zoo import build


def grads(case, fn) -> list[torch.Tensor]:
    case.model.zero_grad(set_to_none=True)
    case.loss(fn(*case.example_inputs, **case.example_kwargs)).backward()
    return [p.grad.clone() for p in case.model.parameters() if p.grad is not None]


def worst(a: list[torch.Tensor], b: list[torch.Tensor]) -> tuple[float, int]:
    """The largest max-abs difference relative to the gradient's largest entry, and how many
    gradients differ by more than the smoke test's 2e-3 (atol and rtol)."""
    rel = [
        float((x - y).abs().max() / y.abs().max().clamp_min(1e-12))
        for x, y in zip(a, b, strict=True)
    ]
    failing = sum(not torch.allclose(x, y, rtol=2e-3, atol=2e-3) for x, y in zip(a, b, strict=True))
    return max(rel), failing


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--size", default="tiny")
    args = parser.parse_args()
    base = build(args.model, args.size, device="cuda")
    reference = grads(base, base.model)
    again = grads(base, base.model)
    print(f"eager NCHW twice: worst relative {worst(again, reference)}")
    cl = build(args.model, args.size, device="cuda")
    cl.model.to(memory_format=torch.channels_last)
    cl = dataclasses.replace(
        cl,
        example_inputs=tuple(
            x.to(memory_format=torch.channels_last) if x.dim() == 4 else x
            for x in cl.example_inputs
        ),
    )
    print(f"eager channels-last vs NCHW: worst relative {worst(grads(cl, cl.model), reference)}")
    twin = build(args.model, args.size, device="cuda")
    ember.reset()
    compiled = ember.compile(twin.model)
    print(f"ember vs eager NCHW: worst relative {worst(grads(twin, compiled), reference)}")


if __name__ == "__main__":
    main()
