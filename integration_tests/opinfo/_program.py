"""One program per op_db entry: a generated function of its samples' tensors.

The function is written out as Python source (``op(t0, c0, dim=c1)`` per sample) rather than
rebuilding arguments with pytree at run time, so the tracer sees what a user would write: the
tensors are the function's parameters, everything else is a constant it reads from globals.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils import _pytree as pytree


@dataclasses.dataclass
class Program:
    fn: Callable[..., list[Any]]  # fn(*tensors) -> one output per sample
    tensors: list[torch.Tensor]
    source: str


def _has_tensor(value: Any) -> bool:
    return any(isinstance(leaf, torch.Tensor) for leaf in pytree.tree_leaves(value))


class _Writer:
    def __init__(self) -> None:
        self.tensors: list[torch.Tensor] = []
        self.constants: dict[str, Any] = {}

    def expr(self, value: Any) -> str:
        if isinstance(value, torch.Tensor):
            self.tensors.append(value)
            return f"t{len(self.tensors) - 1}"
        if type(value) in (list, tuple) and _has_tensor(value):
            items = ", ".join(self.expr(v) for v in value)
            return f"[{items}]" if isinstance(value, list) else f"({items},)"
        if type(value) is dict and _has_tensor(value):
            items = ", ".join(f"{k!r}: {self.expr(v)}" for k, v in value.items())
            return "{" + items + "}"
        name = f"c{len(self.constants)}"
        self.constants[name] = value
        return name

    def call(self, sample: Any) -> str:
        args = [self.expr(sample.input), *(self.expr(a) for a in sample.args)]
        if all(str(k).isidentifier() for k in sample.kwargs):
            args += [f"{k}={self.expr(v)}" for k, v in sample.kwargs.items()]
        elif sample.kwargs:
            args.append(f"**{self.expr(dict(sample.kwargs))}")
        return f"op({', '.join(args)})"


def build_program(op: Any, samples: Sequence[Any], name: str) -> Program:
    """``fn(*tensors)`` returning ``[op(sample 0), op(sample 1), ...]``."""
    writer = _Writer()
    calls = [writer.call(s) for s in samples]
    params = ", ".join(f"t{i}" for i in range(len(writer.tensors)))
    body = ",\n        ".join(calls)
    source = f"def program({params}):\n    return [\n        {body},\n    ]\n"
    namespace: dict[str, Any] = {"op": op.op, **writer.constants}
    exec(compile(source, f"<opinfo {name}>", "exec"), namespace)
    return Program(namespace["program"], writer.tensors, source)
