"""Per-call guard time: Ember's Python guard, Ember's native guard, torch.compile's guard.

Only the guards run, not the model: each compiler compiles the function once (backend
"eager"), then its cached entry's guard is called with the f_locals its frame received,
in interleaved rounds; the figure is the median ns per guard call.

- ember python: the generated Python function (`CompiledGuard.check`, the reference);
- ember native: the same guards as an `ember_frame_hook.GuardProgram` run in C
  (`CompiledGuard.native`), what the frame hook runs since issue 15, with tensor matches
  as one call of the C++ tensor check where it is built (`python -m
  ember_bytecode_tracer.guards.native_tensor`; this script builds it unless
  --no-build);
- ember native getters: the same program with tensor matches as attribute reads (what
  runs where the C++ check is not built);
- torch.compile: the C++ GuardManager of Dynamo's cache entry (`guard_manager.check`).

None of them includes the owner test (is this compiler the thread's hook callback?),
one C instruction natively and a Python closure call (~80 ns) in the Python form.

Figures are the median over rounds (and the minimum, `_min_ns`, less sensitive to a busy
machine).

Cases: HF GPT-2 (transformers, library defaults: SDPA, use_cache) from the zoo, and a
pointwise function of 24 tensors.

    python benchmarks/guard_overhead.py [--size tiny|real] [--calls N] [--rounds R]
                                        [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from typing import Any

import torch
import torch._dynamo
import torch._dynamo.eval_frame as dynamo_eval_frame

import ember
import ember_frame_hook as fh
from ember_bytecode_tracer import convert_frame
from ember_bytecode_tracer.guards import native, native_tensor
from ember_zoo import build

# ---- capturing each compiler's guard and the f_locals it gets -----------------------


class EmberCapture:
    """Records the f_locals of each frame Ember compiles (the callback sees them)."""

    def __init__(self) -> None:
        self.frames: list[tuple[Any, dict[str, Any]]] = []
        self._original = convert_frame.FrameCompiler.__call__

    def __enter__(self) -> EmberCapture:
        capture, original = self, self._original

        def call(compiler, frame, cache):
            entry = original(compiler, frame, cache)
            if entry is not None:
                capture.frames.append((entry, dict(frame.f_locals)))
            return entry

        convert_frame.FrameCompiler.__call__ = call
        return self

    def __exit__(self, *exc: object) -> None:
        convert_frame.FrameCompiler.__call__ = self._original


def ember_guards(fn, args, kwargs) -> tuple[Any, dict[str, Any]]:
    """The CompiledGuard of the first (outermost) frame Ember compiles, and its f_locals."""
    ember.reset()
    compiled = ember.compile(fn, backend="eager")
    with EmberCapture() as capture:
        compiled(*args, **kwargs)
    entry, f_locals = capture.frames[0]
    guards = entry.record.guards
    guards = getattr(guards, "base", guards)  # a ShapeGuardedCheck wraps the CompiledGuard
    return guards, f_locals


def dynamo_guard(fn, args, kwargs, code, f_locals) -> Any:
    """torch.compile's guard manager for `code` (compiled by running `fn`)."""
    torch._dynamo.reset()
    torch.compile(fn, backend="eager")(*args, **kwargs)
    entries = dynamo_eval_frame._debug_get_cache_entry_list(code)
    if not entries:
        return None
    manager = entries[0].guard_manager
    if not manager.check(f_locals):
        raise RuntimeError("torch.compile's guard fails on the captured f_locals")
    return manager.check


# ---- timing --------------------------------------------------------------------------


def per_call_ns(check, f_locals, calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        check(f_locals)
    return (time.perf_counter_ns() - start) / calls


def measure(case: str, fn, args, kwargs, calls: int, rounds: int) -> dict[str, Any]:
    guards, f_locals = ember_guards(fn, args, kwargs)
    code = _outer_code(fn)
    candidates = {
        "ember_python": guards.check,
        "ember_native": guards.native,
        "ember_native_getters": _without_tensor_check(guards),
        "floor": id,  # one C call from the timing loop: what no guard can go below
    }
    if guards.native(f_locals) is not True or guards.check(f_locals) is not True:
        raise RuntimeError(f"{case}: Ember's guard fails on its own f_locals")
    torch_check = dynamo_guard(fn, args, kwargs, code, f_locals)
    if torch_check is not None:
        candidates["torch.compile"] = torch_check
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, check in candidates.items():
            samples[name].append(per_call_ns(check, f_locals, calls))
    result: dict[str, Any] = {f"{k}_ns": statistics.median(v) for k, v in samples.items()}
    result.update({f"{k}_min_ns": min(v) for k, v in samples.items()})
    result["tensor_check_built"] = native_tensor.capsule() is not None
    result["guards"] = len(guards.guards)
    result["instructions"] = len(guards.native.instructions)
    result["untranslated"] = len(guards.untranslated)
    return result


def _without_tensor_check(guards) -> Any:
    """The guards' program with tensor matches as attribute reads (no C++ check)."""
    saved = native_tensor.capsule
    native_tensor.capsule = lambda: None
    try:
        assembled, _ = native.assemble(guards.guards, guards._assembled.physical)
    finally:
        native_tensor.capsule = saved
    return native.build_program(assembled, guards.f_globals, guards.f_builtins)


def _outer_code(fn) -> Any:
    """The code object of the frame both compilers treat as the entry point."""
    if isinstance(fn, torch.nn.Module):
        forward = type(fn).forward
        # transformers decorates forward (output capturing); the wrapper's frame is the one
        return getattr(forward, "__code__", None)
    return fn.__code__


def pointwise24(*xs):
    total = xs[0]
    for x in xs[1:]:
        total = total * 0.5 + x
    return total


def pointwise_case() -> tuple[Any, tuple, dict]:
    names = [f"x{i}" for i in range(24)]
    src = f"def pointwise({', '.join(names)}):\n    return " + " + ".join(
        f"{n} * {i + 1}" for i, n in enumerate(names)
    )
    namespace: dict[str, Any] = {}
    exec(compile(src, "<guard_overhead pointwise>", "exec"), namespace)
    return namespace["pointwise"], tuple(torch.randn(16) for _ in names), {}


def gpt2_case(size: str) -> tuple[Any, tuple, dict]:
    case = build("gpt2", size)
    model = case.model.eval()
    return model, (), {"input_ids": case.example_kwargs["input_ids"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="real", choices=("tiny", "real"))
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", default=None)
    parser.add_argument("--no-build", action="store_true", help="don't build the C++ check")
    args = parser.parse_args()
    if not args.no_build and native_tensor.capsule() is None:
        native_tensor.build()
    results = {
        "pointwise24": measure("pointwise24", *pointwise_case(), args.calls, args.rounds),
        f"gpt2_{args.size}": measure(
            "gpt2", *gpt2_case(args.size), max(args.calls // 10, 50), args.rounds
        ),
    }
    results["machine"] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
    }
    for case, numbers in results.items():
        if case == "machine":
            continue
        print(f"{case}: {numbers['guards']} guards, {numbers['instructions']} instructions")
        for key, value in numbers.items():
            if key.endswith("_ns") and not key.endswith("_min_ns"):
                low = numbers[key[:-3] + "_min_ns"]
                print(f"  {key[:-3]:>20}: {value:10.0f} ns per guard call (min {low:.0f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    fh.set_eval_frame(None)
    with torch.no_grad():  # the grad mode every guard was compiled under
        main()
