"""Ember's frame hook at work: a tiny specializing JIT in 60 lines.

`power_sum(n, p)` sums i**p for i < n with a Python loop. The callback below plays the
part of Ember's tracer: when a call misses the cache it "compiles" a version specialized
to the observed exponent (a closed form, Faulhaber's formulas for p = 1, 2, 3) and returns
it with a guard on `p`. Later calls with the same `p` run the specialized code straight
from the cache; a new `p` fails the guards and compiles again; an exponent it cannot
specialize runs the original code. Results are checked against the original every time.

    python examples/frame_hook_demo.py
"""

from __future__ import annotations

import time

import ember_frame_hook as fh


def power_sum(n, p):
    total = 0
    for i in range(n):
        total += i**p
    return total


CLOSED_FORMS = {
    1: "n * (n - 1) // 2",
    2: "(n - 1) * n * (2 * n - 1) // 6",
    3: "(n * (n - 1) // 2) ** 2",
}
compiled_for = []


def specialize(frame, cache):
    """The callback: runs on a cache miss with the hook off."""
    if frame.f_code is not power_sum.__code__:
        return None  # not ours: the original code runs
    p = frame.f_locals["p"]
    if type(p) is not int or p not in CLOSED_FORMS:
        return None
    source = f"def power_sum(n, p):\n    return {CLOSED_FORMS[p]}\n"
    namespace: dict = {}
    exec(compile(source, f"<specialized p={p}>", "exec"), namespace)
    compiled_for.append(p)
    return fh.GuardedCode(
        namespace["power_sum"].__code__,
        guard=lambda f_locals, p=p: type(f_locals["p"]) is int and f_locals["p"] == p,
    )


def timed(fn, *args, repeat=5):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn(*args)
        best = min(best, time.perf_counter() - start)
    return result, best


def main() -> None:
    n = 200_000
    print(f"power_sum(n={n}, p) -- original Python loop vs code specialized by the hook\n")
    print(f"{'p':>3} {'original ms':>12} {'hooked ms':>10} {'speedup':>9}  result matches")
    for p in (1, 2, 3, 2, 4):
        t_orig = t_hook = float("inf")
        for _ in range(3):  # interleaved, best of each
            expected, t = timed(power_sum, n, p, repeat=1)
            t_orig = min(t_orig, t)
            with fh.eval_frame(specialize):
                got, t = timed(power_sum, n, p, repeat=1)
            t_hook = min(t_hook, t)
            assert got == expected, (p, got, expected)
        note = "" if p in CLOSED_FORMS else "  (not specialized: original code ran)"
        print(
            f"{p:>3} {t_orig * 1e3:12.2f} {t_hook * 1e3:10.3f} {t_orig / t_hook:8.0f}x  True{note}"
        )

    entries = fh.cache_entries(power_sum.__code__)
    print(f"\ncallback compiled for p in {compiled_for}; the second p=2 row hit the cache")
    print(f"cache entries (most recently used first): {len(entries)}")
    for entry in entries:
        print(f"  {entry.code.co_filename:<18} hits={entry.hits}")
    print(f"hook counters: {fh.stats()}")
    assert compiled_for == [1, 2, 3], compiled_for


if __name__ == "__main__":
    main()
