"""Micro-benchmark of compiled guards (not a test: timings are printed, never asserted).

    PYTHONPATH=packages/bytecode_tracer/src python packages/bytecode_tracer/tests/guards/bench_guards.py

Cases: (a) a function of 3 tensors, (b) a module with 6 parameters + its training flag +
2 globals, each as ns per call of the compiled guard. For scale it also times, on a guard
hit, what torch.compile(backend="eager") adds per call of a 3-tensor function and its
C++ guard alone, and (if ember_frame_hook is installed) the same call through our hook.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import timeit
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ember_bytecode_tracer.guards import (
    AttrSource,
    GlobalSource,
    Guard,
    GuardKind,
    LocalSource,
    compile_guards,
)

REPEATS = 15


def ns_per_call(fn: Callable[[], Any], number: int = 20_000) -> tuple[float, float]:
    """(median, min) ns per call over REPEATS runs of `number` calls."""
    runs = [t / number * 1e9 for t in timeit.repeat(fn, number=number, repeat=REPEATS)]
    return statistics.median(runs), min(runs)


def report(name: str, fn: Callable[[], Any], number: int = 20_000) -> float:
    median, best = ns_per_call(fn, number)
    print(f"  {name:<58} {median:8.0f} ns  (min {best:.0f})")
    return median


def three_tensor_guards(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> list[Guard]:
    names = {"x": x, "y": y, "z": z}
    return [Guard.from_value(LocalSource(n), GuardKind.TENSOR_MATCH, t) for n, t in names.items()]


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def module_guards(model: MLP) -> list[Guard]:
    """What a trace of MLP.forward reads: the module, its submodules' classes (it inlines
    their forward), 6 parameters, the training flag, and the globals `torch` and `F`."""
    self_ = LocalSource("self")
    guards = [
        Guard.from_value(self_, GuardKind.TYPE_MATCH, model),
        Guard.from_value(self_, GuardKind.MODULE_TRAINING, model),
        Guard.from_value(GlobalSource("torch"), GuardKind.ID_MATCH, torch),
        Guard.from_value(GlobalSource("F"), GuardKind.ID_MATCH, F),
    ]
    for name, child in model.named_children():
        source = AttrSource(self_, name)
        guards.append(Guard.from_value(source, GuardKind.TYPE_MATCH, child))
        for pname, param in child.named_parameters():
            guards.append(
                Guard.from_value(AttrSource(source, pname), GuardKind.TENSOR_MATCH, param)
            )
    return guards


def bench_ember() -> None:
    x, y, z = torch.randn(8, 16), torch.randn(16), torch.randn(4, 8, 16)
    f_locals = {"x": x, "y": y, "z": z}
    print("(a) 3 tensor inputs")
    three = compile_guards(three_tensor_guards(x, y, z), {})
    report("compiled.check(f_locals)", lambda: three.check(f_locals))
    report("compiled(f_locals)  [through CompiledGuard.__call__]", lambda: three(f_locals))
    aliasing = Guard(
        LocalSource("x"), GuardKind.NO_TENSOR_ALIASING, (LocalSource("y"), LocalSource("z"))
    )
    with_alias = compile_guards([*three_tensor_guards(x, y, z), aliasing], {})
    report("check, + NO_TENSOR_ALIASING over the 3", lambda: with_alias.check(f_locals))
    miss = {"x": x, "y": y, "z": torch.randn(4, 8, 17)}
    report("check on a miss (last tensor's size differs)", lambda: three.check(miss))

    print("(b) module: 6 parameters + training flag + 2 globals (+ 4 class checks)")
    model = MLP()
    f_globals = {"torch": torch, "F": F}
    m_locals = {"self": model}
    fast = compile_guards(module_guards(model), f_globals, f_locals=m_locals)
    slow = compile_guards(module_guards(model), f_globals)
    report("check, fast module paths (compile_guards(f_locals=...))", lambda: fast.check(m_locals))
    report("check, semantic paths (self.fc1.weight via __getattr__)", lambda: slow.check(m_locals))
    if "-v" in sys.argv:
        print(fast.source_code)


def three_tensor_fn(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    return x + y * z  # an op, so that Dynamo caches a graph rather than skipping the frame


def bench_hook() -> float:
    """Plain call vs the same call through ember_frame_hook with the compiled guard."""
    x, y, z = torch.randn(8, 16), torch.randn(16), torch.randn(4, 8, 16)
    print("(c) per call on a guard hit, f(x, y, z) = x + y * z")
    base = report("plain Python call (eager)", lambda: three_tensor_fn(x, y, z))
    try:
        import ember_frame_hook as fh
    except ImportError:
        print("  (ember_frame_hook not installed: hook timing skipped)")
        return base
    guard = compile_guards(three_tensor_guards(x, y, z), {})

    def callback(frame: Any, cache: Any) -> Any:
        if frame.f_code is three_tensor_fn.__code__:
            return fh.GuardedCode(frame.f_code, guard.check)
        return None

    previous = fh.set_eval_frame(callback)
    try:
        hooked = report(
            "ember_frame_hook + compiled guard (same code substituted)",
            lambda: three_tensor_fn(x, y, z),
        )
    finally:
        fh.set_eval_frame(previous)
        fh.reset()
    print(f"  {'  -> overhead over the plain call':<58} {hooked - base:8.0f} ns")
    return base


def bench_dynamo() -> None:
    """torch.compile's cost on a guard hit, and its C++ guards against ours, interleaved.
    Run in its own process: with ember_frame_hook imported, Dynamo crashes (both keep
    per-code data in co_extra, and the hook's free function is not NULL-safe)."""
    x, y, z = torch.randn(8, 16), torch.randn(16), torch.randn(4, 8, 16)
    base = report("plain Python call (eager), this process", lambda: three_tensor_fn(x, y, z))
    compiled_fn = torch.compile(three_tensor_fn, backend="eager")
    compiled_fn(x, y, z)
    dynamo = report('torch.compile(backend="eager")', lambda: compiled_fn(x, y, z))
    print(f"  {'  -> overhead over the plain call':<58} {dynamo - base:8.0f} ns")
    dynamo_guard = _dynamo_guard(three_tensor_fn)
    if dynamo_guard is None:
        print("  (Dynamo's guard manager not reachable: guard comparison skipped)")
        return
    f_locals = {"x": x, "y": y, "z": z}
    ours = compile_guards(three_tensor_guards(x, y, z), {})
    print("(d) guard alone, ours vs Dynamo's C++ GuardManager, interleaved runs")
    compare("3 tensors", lambda: ours.check(f_locals), lambda: dynamo_guard(f_locals))

    model = MLP()
    compiled_model = torch.compile(model, backend="eager")
    inp = torch.randn(2, 8)
    compiled_model(inp)
    module_guard = _dynamo_guard(MLP.forward)
    if module_guard is not None:
        m_locals = {"self": model, "x": inp}
        guards = [
            *module_guards(model),
            Guard.from_value(LocalSource("x"), GuardKind.TENSOR_MATCH, inp),
        ]
        mine = compile_guards(guards, {"torch": torch, "F": F}, f_locals=m_locals)
        compare(
            "MLP.forward: (b) + input x",
            lambda: mine.check(m_locals),
            lambda: module_guard(m_locals),
        )


def compare(name: str, ours: Callable[[], Any], theirs: Callable[[], Any]) -> None:
    number, a, b = 20_000, [], []
    for _ in range(REPEATS):
        a.append(timeit.timeit(ours, number=number) / number * 1e9)
        b.append(timeit.timeit(theirs, number=number) / number * 1e9)
    print(
        f"  {name:<32} ours {statistics.median(a):6.0f} ns (min {min(a):.0f})"
        f"   Dynamo {statistics.median(b):6.0f} ns (min {min(b):.0f})"
        f"   ratio of mins {min(a) / min(b):.2f}"
    )


def _dynamo_guard(fn: Callable[..., Any]) -> Callable[[dict[str, Any]], bool] | None:
    """Dynamo's compiled guard for fn's code (a private API: best effort, benchmark only)."""
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        return _debug_get_cache_entry_list(fn.__code__)[0].guard_manager.check
    except Exception:
        return None


def main() -> None:
    if "--dynamo" in sys.argv:
        bench_dynamo()
        return
    print(f"Python {sys.version.split()[0]}, torch {torch.__version__}; median of {REPEATS} runs")
    bench_ember()
    bench_hook()
    sys.stdout.flush()
    subprocess.run([sys.executable, __file__, "--dynamo"], check=True)


if __name__ == "__main__":
    main()
