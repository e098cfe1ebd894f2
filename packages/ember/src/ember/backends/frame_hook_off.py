"""Compiled backward graphs run with Ember's frame hook off.

A forward graph is called by the tracer's runner, which turns the hook off around it. A
backward graph is called by autograd's engine from wherever `loss.backward()` runs, often
a compiled frame with the hook on: without this, the generated wrapper's Python (a file in
the kernel cache) would be traced as a user frame.
"""

from __future__ import annotations

from collections.abc import Callable

import ember_frame_hook as fh


def without_frame_hook(run: Callable) -> Callable:
    set_eval_frame = fh.set_eval_frame

    def run_backward(*args):
        previous = set_eval_frame(None)
        try:
            return run(*args)
        finally:
            set_eval_frame(previous)

    return run_backward
