from __future__ import annotations

import pytest
import torch

import ember_frame_hook as fh
from ember_bytecode_tracer.convert_frame import FrameCompiler


class CountingBackend:
    """Records each graph it is given and runs it as is."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    @property
    def graph_count(self) -> int:
        return len(self.graphs)

    def ops(self, index: int = 0) -> list[str]:
        return [
            getattr(n.target, "__name__", str(n.target))
            for n in self.graphs[index].graph.nodes
            if n.op.startswith("call")
        ]

    @property
    def op_count(self) -> int:
        return sum(len(self.ops(i)) for i in range(self.graph_count))


class Compiled:
    """Runs a function with the tracer hooked in; keeps the backend and the records."""

    def __init__(self, fn, *, fullgraph: bool = False, dynamic: bool | None = None, **kw) -> None:
        self.fn = fn
        self.backend = CountingBackend()
        self.compiler = FrameCompiler(self.backend, fullgraph=fullgraph, dynamic=dynamic, **kw)

    def __call__(self, *args, **kwargs):
        with fh.eval_frame(self.compiler):
            return self.fn(*args, **kwargs)

    @property
    def breaks(self):
        return [b for r in self.compiler.records for b in r.breaks]


@pytest.fixture(autouse=True)
def fresh_caches():
    fh.set_eval_frame(None)
    fh.reset()
    yield
    fh.set_eval_frame(None)
    fh.reset()


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return (
            isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and torch.allclose(a, b, equal_nan=True)
        )
    if isinstance(a, list | tuple):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(same(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def skip_reasons(compiled: Compiled) -> list[str]:
    return [f"{code.co_name}: {reason}" for code, reason in compiled.compiler.skipped]
