"""pytest plugin (`-p run_limits`): a slice of a long upstream file, and a time limit per test.

Both runs of a file (torch.compile and Ember) load it, so both see the same tests:
- `EMBER_CONFORMANCE_SHARD=K/N` keeps the K-th of N interleaved slices of the collected tests
  (every N-th test from the K-th, in collection order), so that a file too long for one run
  (test_misc.py: 700 tests) is measured shard by shard, each with its own results file.
- `EMBER_CONFORMANCE_TEST_TIMEOUT=S` fails a test still running after S seconds with
  `TestTimedOut` (SIGALRM): one test that hangs or runs far longer under one compiler costs
  that test, not the whole file's results.
"""

from __future__ import annotations

import os
import signal

import pytest


class TestTimedOut(Exception):
    """The test ran past the per-test limit of the conformance run."""

    __test__ = False  # not a test class for pytest's collection


def shard_of(spec: str) -> tuple[int, int]:
    k, n = (int(part) for part in spec.split("/"))
    if not 1 <= k <= n:
        raise ValueError(f"shard {spec!r}: want K/N with 1 <= K <= N")
    return k, n


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    spec = os.environ.get("EMBER_CONFORMANCE_SHARD")
    if not spec:
        return
    k, n = shard_of(spec)
    kept = [item for i, item in enumerate(items) if i % n == k - 1]
    dropped = [item for i, item in enumerate(items) if i % n != k - 1]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept


def _timed_out(signum: int, frame: object) -> None:
    raise TestTimedOut(
        f"the test ran past EMBER_CONFORMANCE_TEST_TIMEOUT="
        f"{os.environ.get('EMBER_CONFORMANCE_TEST_TIMEOUT')} s"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    limit = int(os.environ.get("EMBER_CONFORMANCE_TEST_TIMEOUT") or 0)
    if limit <= 0:
        yield
        return
    previous = signal.signal(signal.SIGALRM, _timed_out)
    signal.alarm(limit)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
