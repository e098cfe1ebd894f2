"""What a user reads when the tracer refuses their code under `fullgraph=True`.

The message names the user's file and line, quotes the line (linecache), says in plain
words why the construct cannot go into a graph, and what to do instead. The explanations
live in `HINTS`, keyed by the kind of construct; an `Unsupported` raised with `kind=` picks
its entry directly, one raised without is classified by `KIND_PATTERNS` over its reason.
"""

from __future__ import annotations

import linecache
import re
from dataclasses import dataclass

from ember_bytecode_tracer.exc import Unsupported

DROP_FULLGRAPH = "or drop fullgraph=True to let Ember break the graph here"


@dataclass(frozen=True)
class Hint:
    why: str
    hint: str


HINTS: dict[str, Hint] = {
    "data_dependent_branch": Hint(
        "the branch taken depends on a tensor's values, which exist only when the graph runs, "
        "not while Ember traces it",
        f"use torch.where (or torch.cond) to keep both sides in the graph, {DROP_FULLGRAPH}",
    ),
    "tensor_value_read": Hint(
        "this reads a tensor's data into a Python value (.item(), .tolist(), int(), float(), "
        ".numpy()), which a graph cannot carry",
        "keep the value a tensor (a 0-d tensor works in tensor arithmetic) and read it outside "
        f"the compiled function, {DROP_FULLGRAPH}",
    ),
    "data_dependent_size": Hint(
        "the size of a result depends on a tensor's values (nonzero, boolean masks, unique)",
        "set ember.config.capture_dynamic_output_shape_ops = True with dynamic=True, use a "
        f"fixed-size form (torch.where with three arguments, a mask multiply), {DROP_FULLGRAPH}",
    ),
    "side_effect_builtin": Hint(
        "this builtin has effects outside the graph (printing, input, files)",
        "return or collect what you want to see and print it after the compiled call, "
        + DROP_FULLGRAPH,
    ),
    "unsupported_call": Hint(
        "Ember cannot follow this call into a graph (C code, or effects outside the graph)",
        "call it outside the compiled function and pass its result in, replace it with the "
        f"equivalent torch operation, {DROP_FULLGRAPH}",
    ),
    "autograd_engine": Hint(
        "this runs autograd's engine, which Ember leaves to eager PyTorch",
        f"compile the forward only and call .backward() outside it, {DROP_FULLGRAPH}",
    ),
    "graph_leaf": Hint(
        "a tensor made a leaf requiring grad inside the compiled function (or one computed "
        "from it) leaves it, and a compiled graph hands its outputs back without that history",
        "return what you need without the history (`.detach()` of it, or the gradient its "
        f"`.backward()` gives), make the leaf outside the compiled function, {DROP_FULLGRAPH}",
    ),
    "other": Hint(
        "Ember cannot put this construct into a graph",
        f"move it outside the compiled function, {DROP_FULLGRAPH}",
    ),
}

# (pattern over an Unsupported reason, kind); the first match wins
KIND_PATTERNS: list[tuple[re.Pattern, str]] = [
    (re.compile(r"branch(ing)? on a (tensor|NumPy array)'s value|data-dependent control"),
     "data_dependent_branch"),
    (re.compile(r"data-dependent size|dynamic output shape|nonzero|masked_select|unique"),
     "data_dependent_size"),
    (re.compile(r"reads tensor data into Python|\.item\(\)|\.tolist\(\)|tensor's value is not known"),
     "tensor_value_read"),
    (re.compile(r"builtin (print|input|open|breakpoint)\(\)|effects outside the graph"),
     "side_effect_builtin"),
    (re.compile(r"(makes|creates|created) an autograd leaf"), "graph_leaf"),
    (re.compile(r"backward\(\)|autograd's engine|autograd\.grad"), "autograd_engine"),
    (re.compile(r"call to |implemented in C|is not supported|unsupported"), "unsupported_call"),
]  # fmt: skip


def kind_of(exc: Unsupported) -> str:
    """The kind of construct `exc` refused: its own `kind`, else the first pattern's."""
    if exc.kind in HINTS:
        return exc.kind
    return next((kind for p, kind in KIND_PATTERNS if p.search(exc.reason)), "other")


def source_line(location: str | None) -> tuple[str, int, str] | None:
    """(file, line, the line's text) for a "file:line" location, when the file is readable."""
    if not location or ":" not in location:
        return None
    filename, _, line = location.rpartition(":")
    if not line.isdigit():
        return None
    return filename, int(line), linecache.getline(filename, int(line)).strip()


def _frame_lines(entry: str, location: str | None) -> list[str]:
    """`File "f.py", line 4, in fn` and the quoted line, as Python's tracebacks print them."""
    at, _, function = entry.partition(" in ")
    found = source_line(at if function else location)
    if found is None:
        return [f"  {entry}"]
    filename, line, text = found
    head = f'  File "{filename}", line {line}' + (f", in {function}" if function else "")
    return [head, f"    {text}"] if text else [head]


def fullgraph_message(exc: Unsupported, location: str | None) -> str:
    """The message of the error `fullgraph=True` raises for `exc` at the user's `location`."""
    hint = HINTS[kind_of(exc)]
    stack = list(getattr(exc, "user_stack", None) or [])
    where = f" ({location})" if location else ""
    lines = [f"graph break under fullgraph=True: {exc.reason}", "", f"In your code{where}:"]
    for entry in stack or [location or "<unknown location>"]:
        lines += _frame_lines(entry, location)
    lines += ["", f"Why: {hint.why}.", f"Hint: {hint.hint}."]
    return "\n".join(lines)


__all__ = ["HINTS", "KIND_PATTERNS", "Hint", "fullgraph_message", "kind_of", "source_line"]
