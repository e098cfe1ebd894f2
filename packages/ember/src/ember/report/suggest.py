"""Suggested rewrites for the common graph-break reasons, keyed by what the reason says."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Suggestion:
    title: str
    advice: str
    before: str = ""
    after: str = ""


# (pattern over the tracer's break reason, suggestion); the first match wins.
SUGGESTIONS: list[tuple[re.Pattern, Suggestion]] = [
    (
        re.compile(r"branch(ing)? on a (tensor|NumPy array)'s value|data-dependent control"),
        Suggestion(
            "Data-dependent branch",
            "Python's `if` needs the tensor's value, which only exists when the graph runs. "
            "Compute both sides and select with torch.where, so the choice stays in the graph.",
            "if b.sum() < 0:\n    b = b * -1",
            "b = torch.where(b.sum() < 0, b * -1, b)",
        ),
    ),
    (
        re.compile(r"\.item\(\)|\.tolist\(\)|value is not known at trace time"),
        Suggestion(
            "Tensor value read into Python",
            "`.item()` turns a tensor into a Python number, which the graph cannot carry. "
            "Keep it a 0-d tensor and use it in tensor arithmetic; read it with .item() "
            "outside the compiled function if Python needs it.",
            "v = y.sum().item()\nreturn y * v",
            "v = y.sum()          # a 0-d tensor\nreturn y * v",
        ),
    ),
    (
        re.compile(r"builtin print\(\)"),
        Suggestion(
            "print() in compiled code",
            "print has effects outside the graph, so the graph ends before it. Return or "
            "collect what you want to see and print it after the compiled call, or log it "
            "only from code that is not compiled.",
            "y = x.cos()\nprint(y.mean())\nreturn y + 1",
            "y = x.cos()\nreturn y + 1, y.mean()   # print the mean after the call",
        ),
    ),
    (
        re.compile(r"call to |implemented in C|is not supported|unsupported"),
        Suggestion(
            "Call the tracer cannot follow",
            "The function is opaque to the tracer (C code, or effects outside the graph). "
            "Call it outside the compiled function and pass its result in as an argument, "
            "or replace it with the equivalent torch operation.",
            "def step(x):\n    pid = os.getpid()\n    ...",
            "pid = os.getpid()\ndef step(x, pid):\n    ...",
        ),
    ),
]


def suggest(reason: str) -> Suggestion | None:
    for pattern, suggestion in SUGGESTIONS:
        if pattern.search(reason):
            return suggestion
    return None
