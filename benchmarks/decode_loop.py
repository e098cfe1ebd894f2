"""A no-cache decode loop's steady-state calls: Ember's dynamic kernels against torch.compile's,
eager, and static (``dynamic=False``) Ember compiles of single lengths, timed call by call.

HF GPT-2 (``--size tiny`` by default: 2 layers, 64 wide, library defaults otherwise) is called
on a prefix that grows by one token per step over ``--lengths`` lengths, ``use_cache=False``
(the whole prefix again at every step). Warm-up: one pass over the lengths under each compiler,
checking every output against eager; both compilers build their dynamic graph after the second
length (2 graphs each, asserted). Then ``--rounds`` rounds over the lengths; at every length
each column is called in turn on the same inputs (interleaved call by call, so load drift hits
every column alike; the order rotates by round) and each call is timed alone. Every column runs
its own copy of the model, so none reads weights another column's call just brought to cache. Static Ember compiles (each on its own copy of the
model, each compiled at one of ``--static-lengths`` only) join the rotation at their length.

Reported: per column the median per-call time over all steady calls; the median over calls of
the per-call ratios Ember / torch.compile and Ember / eager (each ratio taken between calls
made back to back at the same length); Ember dynamic / static at the static lengths.
Issue 28's targets: Ember / torch.compile <= 1.0; dynamic / static within 1.1.

    python benchmarks/decode_loop.py [--rounds 200] [--lengths 33] [--threads 1] [--json PATH]
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import platform
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import dynamic_shapes as ds
import torch

import ember

COLUMNS = ("eager", "torch.compile", "ember", "ember static")


def _time(fn, kwargs) -> tuple[float, torch.Tensor]:
    start = time.perf_counter()
    out = fn(**kwargs)
    return time.perf_counter() - start, ds._first_tensor(out)


def _compilers(model: torch.nn.Module) -> tuple[dict[str, Any], list[int]]:
    ember.reset()
    ds._reset_dynamo()
    backend, ember_count = ds._counting_backend()
    fns = {
        "eager": model,
        # each compiler on its own copy: no column reads weights another just warmed
        "torch.compile": torch.compile(copy.deepcopy(model), dynamic=None),
        "ember": ember.compile(copy.deepcopy(model), backend=backend),
    }
    return fns, ember_count


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.manual_seed(0)
    stream = ds._decoder("gpt2", args.size, args.lengths)
    model = stream.model
    fns, ember_count = _compilers(model)
    # length -> its static compile; the stream's first prefix is 4 tokens long
    statics = {n: stream.inputs[n - 4] for n in map(int, args.static_lengths.split(","))}
    worst = 0.0
    with torch.no_grad():
        for kwargs in stream.inputs:  # warm-up: compiles, checks every length against eager
            reference = ds._first_tensor(model(**kwargs))
            for name in ("torch.compile", "ember"):
                worst = max(
                    worst, (ds._first_tensor(fns[name](**kwargs)) - reference).abs().max().item()
                )
        graphs = {"torch.compile": ds._dynamo_graphs(), "ember": ember_count[0]}
        # each static compile on its own copy (its guards pin that copy and one length)
        static_fns = {}
        for n, kwargs in statics.items():
            static_fns[n] = ember.compile(copy.deepcopy(model), dynamic=False)
            for _ in range(3):
                static_fns[n](**kwargs)
        times: dict[str, list[float]] = {name: [] for name in COLUMNS}
        ratios: dict[str, list[float]] = {"tc": [], "eager": [], "static": []}
        for round_ in range(args.rounds):
            for length, kwargs in enumerate(stream.inputs, start=4):
                names = COLUMNS if length in static_fns else COLUMNS[:3]
                fns["ember static"] = static_fns.get(length)
                shift = round_ % len(names)  # each column takes each place in the order
                names = names[shift:] + names[:shift]
                took = {name: _time(fns[name], kwargs)[0] for name in names}
                for name, t in took.items():
                    times[name].append(t)
                ratios["tc"].append(took["ember"] / took["torch.compile"])
                ratios["eager"].append(took["ember"] / took["eager"])
                if "ember static" in took:
                    ratios["static"].append(took["ember"] / took["ember static"])
    assert graphs["ember"] == 2, f"Ember built {graphs['ember']} graphs, expected 2"
    return {
        "model": f"gpt2 ({args.size})",
        "lengths": [
            stream.inputs[0]["input_ids"].shape[1],
            stream.inputs[-1]["input_ids"].shape[1],
        ],
        "rounds": args.rounds,
        "graphs": graphs,
        "max_abs_diff": worst,
        "median_us": {name: 1e6 * statistics.median(t) for name, t in times.items()},
        "ember_over_torch_compile": statistics.median(ratios["tc"]),
        "ember_over_eager": statistics.median(ratios["eager"]),
        "dynamic_over_static": statistics.median(ratios["static"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(ds.SIZES), default="tiny")
    parser.add_argument("--lengths", type=int, default=33)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--static-lengths", default="12,20,28")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    r = run(args)
    print(
        f"{r['model']}, lengths {r['lengths'][0]}-{r['lengths'][1]}, {r['rounds']} rounds, "
        f"graphs torch.compile {r['graphs']['torch.compile']} / Ember {r['graphs']['ember']}, "
        f"max |diff| vs eager {r['max_abs_diff']:.1e}"
    )
    print("median per call (us): " + ", ".join(f"{k} {v:.1f}" for k, v in r["median_us"].items()))
    print(
        f"median per-call ratio: Ember / torch.compile {r['ember_over_torch_compile']:.3f}, "
        f"Ember / eager {r['ember_over_eager']:.3f}, "
        f"Ember dynamic / static (lengths {args.static_lengths}) {r['dynamic_over_static']:.3f}"
    )
    if args.json:
        meta = {
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="minutes"),
            "machine": platform.processor() or platform.machine(),
            "torch": torch.__version__,
            "args": vars(args),
        }
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "result": r}, f, indent=1)


if __name__ == "__main__":
    main()
