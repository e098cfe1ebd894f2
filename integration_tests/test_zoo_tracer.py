"""Every zoo model (tiny) through ember.compile with the eager backend: results equal to eager,
graphs really ran, and the graph-break count is reported."""

from __future__ import annotations

import pytest
import torch

import ember
from ember_zoo import build, names, output_tensors, training_loss


class Counting:
    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


@pytest.mark.parametrize("name", names())
def test_zoo_model_traces_to_eager_results(name, record_property):
    case = build(name, "tiny")
    ember.reset()
    backend = Counting()
    compiled = ember.compile(case.model, backend=backend)
    with torch.no_grad():
        got = compiled(*case.example_inputs, **case.example_kwargs)
        expected = case.model(*case.example_inputs, **case.example_kwargs)
    for g, e in zip(output_tensors(got), output_tensors(expected), strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    assert backend.graphs, "nothing was compiled: a silent fallback to eager"
    ops = sum(1 for gm in backend.graphs for n in gm.graph.nodes if n.op.startswith("call"))
    assert ops >= 5
    explained = ember.explain(case.model)(*case.example_inputs, **case.example_kwargs)
    record_property("graphs", explained.graph_count)
    record_property("graph_breaks", explained.graph_break_count)
    print(
        f"{name}: {explained.graph_count} graphs, {explained.graph_break_count} breaks, {ops} ops"
    )


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer_block", "rnn", "gpt2"])
def test_zoo_training_step_gradients_match(name):
    eager_case = build(name, "tiny")
    compiled_case = build(name, "tiny")
    ember.reset()
    compiled_model = ember.compile(compiled_case.model)
    training_loss(eager_case).backward()
    loss = compiled_case.loss(
        compiled_model(*compiled_case.example_inputs, **compiled_case.example_kwargs)
    )
    loss.backward()
    for (pname, p), q in zip(
        eager_case.model.named_parameters(), compiled_case.model.parameters(), strict=True
    ):
        assert q.grad is not None, pname
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5, msg=pname)


def test_real_size_bert_layers_share_traces_within_the_cache_limit(caplog):
    """Twelve encoder layers (more than the cache limit of 8) must not recompile per layer:
    modules are guarded by class, so every layer reuses the same compiled frames."""
    import logging

    case = build("bert", "real")
    ember.reset()
    backend = Counting()
    compiled = ember.compile(case.model, backend=backend)
    with torch.no_grad(), caplog.at_level(logging.WARNING, logger="ember"):
        got = compiled(*case.example_inputs, **case.example_kwargs)
        expected = case.model(*case.example_inputs, **case.example_kwargs)
    for g, e in zip(output_tensors(got), output_tensors(expected), strict=True):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    assert not [r for r in caplog.records if "cache limit" in r.getMessage()]
    assert len(backend.graphs) < 24, f"{len(backend.graphs)} graphs: layers are recompiling"


@pytest.mark.parametrize("name", ["gpt2", "bert", "t5", "llama"])
def test_hf_models_trace_to_one_graph(name):
    """HF models take their compile-friendly paths under a trace (is_compiling, masks kept,
    ModelOutput built in the graph, try/finally around the forward): no graph break."""
    case = build(name, "tiny")
    ember.reset()
    explained = ember.explain(case.model)(*case.example_inputs, **case.example_kwargs)
    reasons = [f"{b.reason} at {b.location}" for b in explained.breaks]
    assert explained.graph_break_count == 0, reasons
    assert explained.graph_count == 1
