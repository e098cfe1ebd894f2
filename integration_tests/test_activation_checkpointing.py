"""Activation checkpointing (torch.utils.checkpoint) in compiled training steps, under the
default backend and aot_eager: one graph, values and gradients equal to eager, and fewer
bytes saved for backward than without checkpointing (the partitioners recompute the
checkpointed regions' activations; ember_aot_autograd/regions.py)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import ember
from ember_aot_autograd import partition_report

BACKENDS = ["inductor", "aot_eager"]


class Blocks(torch.nn.Module):
    def __init__(self, checkpointed: bool) -> None:
        super().__init__()
        self.checkpointed = checkpointed
        self.layers = torch.nn.ModuleList(
            torch.nn.Sequential(
                torch.nn.LayerNorm(32), torch.nn.Linear(32, 96), torch.nn.GELU(),
                torch.nn.Linear(96, 32),
            )
            for _ in range(3)
        )  # fmt: skip

    def forward(self, x):
        for layer in self.layers:
            x = x + (checkpoint(layer, x, use_reentrant=False) if self.checkpointed else layer(x))
        return x.square().mean()


def grads(run, model, x):
    model.zero_grad()
    loss = run(x)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def assert_close(got, expected):
    assert torch.allclose(got[0], expected[0], atol=1e-5)
    for name, grad in expected[1].items():
        assert torch.allclose(got[1][name], grad, atol=1e-5), name


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpointed_blocks_train_in_one_graph_like_eager(backend):
    ember.reset()
    torch.manual_seed(0)
    model = Blocks(checkpointed=True)
    x = torch.randn(8, 32)
    explained = ember.explain(model)(x)
    assert explained.graph_count == 1 and not explained.breaks
    ember.reset()
    compiled = ember.compile(model, backend=backend, fullgraph=True)
    for _ in range(2):
        assert_close(grads(compiled, model, x), grads(model, model, x))


def _graph(model, x):
    graphs = []

    def record(gm, example_inputs):
        graphs.append((gm, example_inputs))
        return gm.forward

    ember.reset()
    ember.compile(model, backend=record, fullgraph=True)(x)
    assert len(graphs) == 1
    return graphs[0]


def test_checkpointing_saves_fewer_bytes_for_backward():
    torch.manual_seed(0)
    plain, checkpointed = Blocks(checkpointed=False), Blocks(checkpointed=True)
    checkpointed.load_state_dict(plain.state_dict())
    x = torch.randn(8, 32, requires_grad=True)
    gm, inputs = _graph(checkpointed, x)
    assert sum("recompute" in n.meta for n in gm.graph.nodes) >= 12  # 4 modules x 3 layers
    with_ckpt = partition_report(gm, inputs)
    without = partition_report(*_graph(plain, x))
    for name in ("default", "min_cut"):
        saved, before = with_ckpt[name], without[name]
        assert saved.saved_activation_bytes < before.saved_activation_bytes, name
        assert saved.backward_ops > before.backward_ops, name  # the recompute
    # what remains saved: the regions' boundaries and items of multi-output ops (layer
    # norm's statistics), well under what the plain graph saves
    assert (
        2 * with_ckpt["min_cut"].saved_activation_bytes < without["min_cut"].saved_activation_bytes
    )


def test_dropout_in_checkpointed_region_matches_uncheckpointed_compile():
    # inductor draws its own random numbers (not eager's): the checkpointed compile must
    # draw the same mask as the plain compile, and use it in forward and backward alike
    def step(checkpointed):
        torch.manual_seed(0)
        w = torch.randn(16, 16, requires_grad=True)

        def body(x):
            return torch.nn.functional.dropout(torch.tanh(x @ w), 0.5, training=True)

        def fn(x):
            return (checkpoint(body, x, use_reentrant=False) if checkpointed else body(x)).sum()

        ember.reset()
        compiled = ember.compile(fn, backend="inductor", fullgraph=True)
        x = torch.randn(16, 16, requires_grad=True)
        torch.manual_seed(5)
        loss = compiled(x)
        loss.backward()
        return loss.detach(), {"w": w.grad, "x": x.grad}

    assert_close(step(True), step(False))


def _gpt2(dropout: float):
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=100, bos_token_id=0, eos_token_id=0,
        resid_pdrop=dropout, embd_pdrop=dropout, attn_pdrop=dropout,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    model.gradient_checkpointing_enable()
    model.train()
    return model


def _hf_step(run, model, ids, seed=1):
    model.zero_grad()
    torch.manual_seed(seed)
    out = run(input_ids=ids, labels=ids)
    out.loss.backward()
    return out.loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def test_hf_gradient_checkpointing_graphs():
    model = _gpt2(dropout=0.1)
    ids = torch.randint(0, 100, (2, 8))
    ember.reset()
    explained = ember.explain(model)(input_ids=ids, labels=ids)
    # the checkpointed layers and the forward hook gradient_checkpointing_enable() puts on
    # the input embeddings all trace: one graph
    assert explained.graph_count == 1 and not explained.breaks, explained.breaks


@pytest.mark.parametrize("backend", BACKENDS)
def test_hf_gradient_checkpointing_matches_eager(backend):
    # with dropout under aot_eager (eager's generator); without under inductor (its own)
    model = _gpt2(dropout=0.1 if backend == "aot_eager" else 0.0)
    ids = torch.randint(0, 100, (2, 8))
    ember.reset()
    compiled = ember.compile(model, backend=backend)
    assert_close(_hf_step(compiled, model, ids), _hf_step(model, model, ids))
