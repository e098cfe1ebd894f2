"""Graph breaks per zoo model (tiny) under ember.explain, with their reasons and places."""

from __future__ import annotations

import collections
import sys

import ember
from ember_zoo import build

for name in sys.argv[1:] or ["gpt2", "bert", "t5", "llama", "resnet"]:
    try:
        case = build(name, "tiny")
    except Exception as exc:  # an optional family missing here
        print(f"{name}: not built ({exc})")
        continue
    ember.reset()
    out = ember.explain(case.model)(*case.example_inputs, **case.example_kwargs)
    print(f"{name}: {out.graph_count} graphs, {out.graph_break_count} breaks")
    reasons = collections.Counter(
        (b.reason[:90], b.location.split("site-packages/")[-1]) for b in out.breaks
    )
    for (reason, where), count in reasons.most_common():
        print(f"   {count} x {reason} @ {where}")
