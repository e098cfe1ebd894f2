"""Runs a scenario module on 2 CPU ranks over gloo (127.0.0.1, a free port), bounded in time.

Each rank is a subprocess running `python -m distributed_ranks.launch <module> <rank> <world> <port>`;
the module's `SCENARIOS` run in order, and every rank prints one JSON line with each
scenario's result (or its traceback); the test reads rank 0's values and every rank's errors.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import subprocess
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARK = "EMBER-DISTRIBUTED-RESULTS "


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(module: str, world: int = 2, timeout: float = 120.0) -> dict:
    """Runs `module`'s scenarios on `world` ranks; returns rank 0's results by scenario."""
    port = free_port()
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])
    )
    env.setdefault("OMP_NUM_THREADS", "1")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed_ranks.launch",
                module,
                str(rank),
                str(world),
                str(port),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world)
    ]
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=timeout))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    for rank, (proc, (out, err)) in enumerate(zip(procs, outputs, strict=True)):
        if proc.returncode != 0:
            raise AssertionError(
                f"rank {rank} exited {proc.returncode}:\n{out[-4000:]}\n{err[-8000:]}"
            )
    per_rank = [
        json.loads(next(ln for ln in out.splitlines() if ln.startswith(MARK))[len(MARK) :])
        for out, _ in outputs
    ]
    merged = {}
    for name, first in per_rank[0].items():
        errors = [r[name]["error"] for r in per_rank if not r[name]["ok"]]
        merged[name] = {"ok": not errors, "error": "\n".join(errors), "value": first.get("value")}
    return merged


def _main(module: str, rank: int, world: int, port: int) -> None:
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    scenarios = importlib.import_module(f"distributed_ranks.{module}").SCENARIOS
    results = {}
    for name, scenario in scenarios.items():
        try:
            results[name] = {"ok": True, "value": scenario(rank, world)}
        except Exception:  # reported per scenario; the other scenarios still run
            results[name] = {"ok": False, "error": traceback.format_exc()}
        dist.barrier()
    print(MARK + json.dumps(results), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    _main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
