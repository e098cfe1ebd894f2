"""Tracer-level twins of issue 26's "crashes where eager works": each traces into a graph that
runs like eager (or breaks the graph where it must), never raises where eager runs."""

from __future__ import annotations

import torch

from conftest import Compiled


def test_keyword_named_argument_is_passed_by_position():
    # FX prints kwargs as `name = value`: `from = -10` would not compile as Python
    def f(t):
        t = t.clone()
        t.random_(**{"from": -10, "to": 10})
        return t + 1

    compiled = Compiled(f, fullgraph=True)
    torch.manual_seed(1)
    got = compiled(torch.zeros(32, dtype=torch.int64))
    torch.manual_seed(1)
    assert torch.equal(got, f(torch.zeros(32, dtype=torch.int64)))
    assert compiled.backend.graph_count == 1
    (node,) = [n for n in compiled.backend.graphs[0].graph.nodes if n.target == "random_"]
    assert node.args[1] == -10 and "from" not in node.kwargs
