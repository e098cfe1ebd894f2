"""HF BERT and DistilBERT (transformers 5) through `ember.compile`: traced, transformers builds
a bidirectional mask `arange(L)[None, None, :, None] >= 0` expanded to (B, 1, L, L) where eager
passes none. The graph proves it all true and the attention gets no mask (on CUDA aten would
otherwise refuse the mask's stride-0 last dim for its fused kernels and run the float32 math
path); a padding mask from the caller stays. Attention stays one fused extern prim forward and
backward, bf16 autocast inference and fp32 training, against eager; the Triton target (CPU
interpreter, child process) lowers the same graph."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

transformers = pytest.importorskip("transformers")


def tiny(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "bert":
        config = transformers.BertConfig(
            vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=37, max_position_embeddings=64,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        )  # fmt: skip
        return transformers.BertForMaskedLM(config)
    config = transformers.DistilBertConfig(
        vocab_size=100, dim=32, n_layers=2, n_heads=2, hidden_dim=37,
        max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
    )  # fmt: skip
    return transformers.DistilBertForMaskedLM(config)


class PrimGraphs:
    """The prim graphs the inductor pipeline compiles (its PrimCompiler, spied on)."""

    def __init__(self, monkeypatch) -> None:
        from ember.backends import artifact_cache, inductor

        monkeypatch.setenv(artifact_cache.ENV_DISABLE, "0")  # compiled, not loaded

        self.sdpa_masks: list = []
        self.ops: collections.Counter = collections.Counter()
        compile_ = inductor.PrimCompiler.__call__

        def spy(compiler, gm, example_inputs):
            for node in gm.graph.nodes:
                if node.op != "call_function":
                    continue
                name = str(node.target).removeprefix("ember_prims.").removesuffix(".default")
                self.ops[name] += 1
                if name in ("sdpa_flash_cpu", "sdpa_flash_cpu_backward"):
                    self.sdpa_masks.append(node.args[3 if name == "sdpa_flash_cpu" else 6])
            return compile_(compiler, gm, example_inputs)

        monkeypatch.setattr(inductor.PrimCompiler, "__call__", spy)


DECOMPOSED = {"bmm", "amax", "exp", "softmax"}


def _inputs(padded: bool) -> dict:
    ids = torch.randint(0, 100, (2, 16), generator=torch.Generator().manual_seed(1))
    if not padded:
        return {"input_ids": ids}
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 11:] = 0
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("name", ["bert", "distilbert"])
@pytest.mark.parametrize("padded", [False, True], ids=["no_padding", "padding_mask"])
def test_bf16_inference_attention_is_one_extern(monkeypatch, name, padded):
    import ember

    ember.reset()
    graphs = PrimGraphs(monkeypatch)
    model = tiny(name).eval()
    kwargs = _inputs(padded)
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16):
        expected = model(**kwargs).logits
        got = ember.compile(model)(**kwargs).logits
    assert got.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), expected.float(), rtol=2e-2, atol=2e-2)
    assert ember.counters["inductor"]["forward_graphs"] == 1
    assert graphs.ops["sdpa_flash_cpu"] == 2 and not DECOMPOSED & set(graphs.ops), graphs.ops
    if padded:  # the caller's padding: a mask that stays
        assert all(isinstance(m, torch.fx.Node) for m in graphs.sdpa_masks)
    else:  # the traced all-true mask: gone
        assert graphs.sdpa_masks == [None, None]
    assert not ember.counters["aten_fallbacks"] and not ember.counters["inductor_fallbacks"]


@pytest.mark.parametrize("name", ["bert", "distilbert"])
def test_training_step_attention_backward_is_one_extern(monkeypatch, name):
    import copy

    import ember

    ember.reset()
    graphs = PrimGraphs(monkeypatch)
    model = tiny(name).train()
    twin = copy.deepcopy(model)
    kwargs = _inputs(False)
    labels = kwargs["input_ids"]
    expected = model(**kwargs, labels=labels).loss
    got = ember.compile(twin)(**kwargs, labels=labels).loss
    torch.testing.assert_close(got, expected)
    expected.backward()
    got.backward()
    for mine, theirs in zip(twin.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-4, atol=1e-5)
    stats = ember.counters["inductor"]
    assert stats["forward_graphs"] == 1 and stats["backward_graphs"] == 1
    assert graphs.ops["sdpa_flash_cpu"] == 2 and graphs.ops["sdpa_flash_cpu_backward"] == 2
    # no attention decomposed: the loss' log_softmax is the only max-reduction
    assert graphs.ops["bmm"] == 0 and graphs.ops["amax"] == 1, graphs.ops
    assert all(m is None for m in graphs.sdpa_masks)


TRITON_CHILD = textwrap.dedent(
    """
    import json, sys, torch, ember
    import pytest
    sys.path.insert(0, sys.argv[1])
    from test_hf_attention_masks import tiny, _inputs, PrimGraphs, DECOMPOSED

    monkeypatch = pytest.MonkeyPatch()
    graphs = PrimGraphs(monkeypatch)
    results = {}
    for name, padded in (("bert", False), ("distilbert", False), ("bert", True)):
        model = tiny(name).eval()
        kwargs = _inputs(padded)
        with torch.no_grad(), torch.autocast("cpu", torch.bfloat16):
            expected = model(**kwargs).logits.float()
            got = ember.compile(model)(**kwargs).logits.float()
        torch.testing.assert_close(got, expected, rtol=2e-2, atol=2e-2)
    print(json.dumps({"ops": dict(graphs.ops), "masks": [m is None for m in graphs.sdpa_masks],
                      "inductor": dict(ember.counters["inductor"])}))
    """
)


def test_triton_target_lowers_the_maskless_attention(tmp_path):
    pytest.importorskip("triton", reason="the Triton target needs the 'triton' extra")
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "EMBER_INDUCTOR_TARGET": "triton",
        "EMBER_CACHE_DIR": str(tmp_path / "cache"),
    }
    here = os.path.dirname(__file__)
    out = subprocess.run(
        [sys.executable, "-c", TRITON_CHILD, here],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-4000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["ops"]["sdpa_flash_cpu"] == 6, result
    assert not DECOMPOSED & set(result["ops"]), result
    # no mask where the traced one was all true; the padded batch keeps its mask
    assert result["masks"] == [True] * 4 + [False] * 2
    assert result["inductor"]["forward_graphs"] == 3
