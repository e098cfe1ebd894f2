"""A loss that uses only some outputs of a compiled model: the parameters that feed only the
unused outputs keep `grad is None`, as in eager (an optimizer then skips them: no weight
decay or momentum applied to a zero gradient). Tiny HF BERT, loss on last_hidden_state,
the pooler output unused; through aot_eager and inductor."""

from __future__ import annotations

import pytest
import torch

import ember

transformers = pytest.importorskip("transformers")


def _bert():
    torch.manual_seed(0)
    config = transformers.BertConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64,
        vocab_size=100, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    ids = torch.randint(0, 100, (2, 16), generator=torch.Generator().manual_seed(1))
    return transformers.BertModel(config).train(), ids


def _step(model, ids, run=None):
    """One SGD step (momentum, weight decay) whose loss ignores the pooler output; `run` calls
    the model (compiled or not)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.1)
    out = (run or model)(input_ids=ids)
    out.last_hidden_state.pow(2).mean().backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    optimizer.step()
    return grads, {n: p.detach().clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_pooler_unused_gets_no_gradient(backend):
    model, ids = _bert()
    expected_grads, expected_params = _step(model, ids)
    unused = {n for n, g in expected_grads.items() if g is None}
    assert unused == {"pooler.dense.weight", "pooler.dense.bias"}

    model, ids = _bert()
    ember.reset()
    counters = ember.counters[backend]
    before = counters["backward_runs"]
    compiled = ember.compile(model, backend=backend)
    grads, params = _step(model, ids, compiled)
    assert counters["backward_runs"] == before + 1  # the backward really ran compiled
    assert {n for n, g in grads.items() if g is None} == unused
    for name, grad in expected_grads.items():
        if grad is not None:
            torch.testing.assert_close(grads[name], grad, rtol=1e-4, atol=1e-5, msg=name)
    for name, value in expected_params.items():  # the pooler was not decayed
        torch.testing.assert_close(params[name], value, rtol=1e-4, atol=1e-5, msg=name)
