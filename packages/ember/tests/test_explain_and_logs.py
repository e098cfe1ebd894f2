"""ember.explain and EMBER_LOGS."""

from __future__ import annotations

import logging

import pytest
import torch

import ember


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def test_explain_reports_graphs_breaks_and_guards():
    a, b = torch.randn(10), -torch.rand(10) - 0.1
    out = ember.explain(toy_example)(a, b)
    assert out.graph_count == 2 and out.graph_break_count == 1
    assert out.ops_per_graph == [["abs", "add", "truediv", "sum", "lt"], ["mul", "mul"]]
    line = toy_example.__code__.co_firstlineno + 2
    assert out.breaks[0].location == f"{__file__}:{line}"
    text = str(out)
    assert "Graph count: 2" in text and "data-dependent" in text and "L['a'] is a tensor" in text


def test_explain_of_a_compiled_function_or_module_explains_what_was_compiled():
    a, b = torch.randn(10), -torch.rand(10) - 0.1
    compiled = ember.compile(toy_example)
    compiled(a, b)  # warm: its own cache would answer a call
    out = ember.explain(compiled)(a, b)
    assert out.graph_count == 2 and out.graph_break_count == 1
    module = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    out = ember.explain(ember.compile(module))(torch.randn(2, 4))
    assert out.graph_count == 1 and out.ops_per_graph[0][-1] == "relu"


class DecoratedForward(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    @ember.compile
    def forward(self, x):
        return self.linear(x).relu()


@pytest.mark.parametrize("backend", [None, "inductor"])
def test_explain_of_a_called_module_whose_forward_is_compiled_reports_its_graph(backend):
    x = torch.randn(2, 4)
    decorated = DecoratedForward()
    assigned = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    assigned.forward = ember.compile(assigned.forward)
    for module in (decorated, assigned):
        expected = module(x)  # compiled and called: its wrapper sets its own compiler
        for target in (module, module.forward):  # the module, and the bound compiled method
            out = ember.explain(target, backend=backend)(x)
            assert out.graph_count == 1 and out.graph_break_count == 0, target
            assert out.ops_per_graph[0][-1] == "relu"
        torch.testing.assert_close(module(x), expected)  # still runs, compiled again


def test_explain_of_a_function_that_calls_a_compiled_function_after_a_break():
    inner = ember.compile(lambda t: t.sin() + 1)

    def outer(a, b):
        if b.sum() < 0:  # a break: what follows runs outside explain's trace of outer
            b = b * -1
        return inner(a * b)

    a, b = torch.randn(10), -torch.rand(10) - 0.1
    expected = outer(a, b)
    out = ember.explain(outer)(a, b)
    # outer up to the branch, the resume after it (inner traced into it)
    assert out.graph_count == 2 and out.graph_break_count == 1
    assert "sin" in out.ops_per_graph[1]
    torch.testing.assert_close(outer(a, b), expected)


def test_explain_leaves_no_compiled_code_behind():
    a = torch.randn(3)
    ember.explain(toy_example)(a, a)
    backend_graphs = []
    ember.compile(toy_example, backend=lambda gm, ex: backend_graphs.append(gm) or gm.forward)(a, a)
    assert backend_graphs, "explain's entries must not satisfy later compiles"


def test_ember_logs_print_graph_guards_bytecode_and_breaks(monkeypatch, caplog):
    monkeypatch.setenv("EMBER_LOGS", "graph,guards,bytecode,graph_breaks")
    a, b = torch.randn(10), torch.randn(10)
    with caplog.at_level(logging.INFO, logger="ember"):
        ember.compile(toy_example)(a, b)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "ORIGINAL BYTECODE" in text and "MODIFIED BYTECODE" in text
    assert "opcode" in text and "call_function" in text  # the graph table
    assert "GUARDS" in text and "GRAPH BREAK" in text


def test_unknown_log_name_is_an_error(monkeypatch):
    monkeypatch.setenv("EMBER_LOGS", "graphs")
    with pytest.raises(ValueError, match="EMBER_LOGS"):
        ember.compile(toy_example)


def test_recompiles_log_names_the_failing_guard(monkeypatch, caplog):
    monkeypatch.setenv("EMBER_LOGS", "recompiles")
    compiled = ember.compile(lambda a: a * 2)
    with caplog.at_level(logging.INFO, logger="ember"):
        compiled(torch.randn(3))
        compiled(torch.randn(4))
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "RECOMPILING" in text and "expected (3,), got (4,)" in text


def test_verbose_graph_break_log_shows_the_inlining_chain(monkeypatch, caplog):
    def inner(a):
        print("break here")
        return a

    def outer(a):
        return inner(a * 2) + 1

    monkeypatch.setenv("EMBER_LOGS", "graph_breaks")
    ember.config.verbose = True
    try:
        with caplog.at_level(logging.INFO, logger="ember"):
            ember.compile(outer)(torch.randn(2))
    finally:
        ember.config.verbose = False
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "user stack" in text and "in outer" in text and "in inner" in text
