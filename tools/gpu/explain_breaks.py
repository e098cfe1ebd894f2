"""Why a model gives Ember several graphs on the GPU: `ember.explain` of timm models under the
suite's mode (bf16 autocast inference by default), the distinct break sites with counts and
the frames Ember left uncompiled.

    python tools/gpu/explain_breaks.py convnext_tiny vit_base_patch16_224 [--fp32] [--batch 8]
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "suites"))

from vision_import import import_timm

import ember


def explain(name: str, batch: int, bf16: bool) -> None:
    timm = import_timm()
    model = timm.create_model(name, pretrained=False).cuda().eval()
    size = model.default_cfg.get("input_size", (3, 224, 224))
    x = torch.randn(batch, *size, device="cuda")
    ember.reset()
    with torch.no_grad(), torch.autocast("cuda", torch.bfloat16, enabled=bf16):
        out = ember.explain(model)(x)
    sites = collections.Counter(f"{b.reason} at {b.location}" for b in out.breaks)
    print(f"== {name} (batch {batch}, {'bf16' if bf16 else 'fp32'}): {out.graph_count} graphs, "
          f"{out.graph_break_count} breaks, {len(sites)} distinct sites")  # fmt: skip
    for site, count in sites.most_common(12):
        print(f"  {count:3d}x {site[:300]}")
    skipped = getattr(out, "skipped", None)
    if skipped:
        print("  skipped frames:", skipped[:10])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+")
    parser.add_argument("--fp32", action="store_true")
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    for name in args.models:
        try:
            explain(name, args.batch, bf16=not args.fp32)
        except Exception as exc:  # one model's failure does not stop the others
            print(f"== {name}: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
