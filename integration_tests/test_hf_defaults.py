"""HuggingFace models as users build them: library defaults (attn_implementation="sdpa",
use_cache and return_dict as the config says), tiny configs, through ember.compile.

Per family: one graph and no break (ember.explain), compiled outputs equal to eager's (the
returned cache's key/value tensors included), a second call with the same shapes compiles
nothing new, and a training forward + loss.backward() outside the compiled function gives
eager's gradients. Runs on whichever transformers is installed: the pinned release in
`integration`, the newest one in the `hf_latest` nox session.
"""

from __future__ import annotations

import pytest
import torch

import ember

transformers = pytest.importorskip("transformers")
T = transformers

IDS = (2, 16)


def _ids(length: int = IDS[1]) -> torch.Tensor:
    return torch.randint(0, 100, (IDS[0], length), generator=torch.Generator().manual_seed(1))


def _decoder_only(model_cls, config_cls, **extra):
    def build():
        config = config_cls(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=64, vocab_size=100, **extra,
        )  # fmt: skip
        return model_cls(config), {"input_ids": _ids()}

    return build


def _encoder(model_cls, config_cls):
    def build():
        config = config_cls(
            num_hidden_layers=2, hidden_size=32, num_attention_heads=4, intermediate_size=64,
            vocab_size=100,
        )  # fmt: skip
        return model_cls(config), {"input_ids": _ids()}

    return build


def _gpt2():
    config = T.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=100, bos_token_id=0,
                          eos_token_id=0)  # fmt: skip
    return T.GPT2LMHeadModel(config), {"input_ids": _ids()}


def _distilbert():
    config = T.DistilBertConfig(n_layers=2, dim=32, n_heads=4, hidden_dim=64, vocab_size=100)
    return T.DistilBertModel(config), {"input_ids": _ids()}


def _vit():
    config = T.ViTConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                         intermediate_size=64, image_size=32, patch_size=8)  # fmt: skip
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    return T.ViTModel(config), {"pixel_values": pixels}


def _t5():
    config = T.T5Config(num_layers=2, num_decoder_layers=2, d_model=32, d_kv=8, num_heads=4,
                        d_ff=64, vocab_size=100, decoder_start_token_id=0)  # fmt: skip
    return T.T5ForConditionalGeneration(config), {
        "input_ids": _ids(),
        "decoder_input_ids": _ids(8),
    }


def _whisper():
    config = T.WhisperConfig(
        vocab_size=100, num_mel_bins=16, encoder_layers=2, decoder_layers=2, d_model=32,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
        decoder_ffn_dim=64, max_source_positions=16, max_target_positions=32,
        decoder_start_token_id=0, pad_token_id=0, bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    features = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(1))
    return T.WhisperForConditionalGeneration(config), {
        "input_features": features,
        "decoder_input_ids": _ids(8),
    }


FAMILIES = {
    "bert": _encoder(T.BertModel, T.BertConfig),
    "roberta": _encoder(T.RobertaModel, T.RobertaConfig),
    "distilbert": _distilbert,
    "vit": _vit,
    "gpt2": _gpt2,
    "llama": _decoder_only(T.LlamaForCausalLM, T.LlamaConfig),
    "mistral": _decoder_only(T.MistralForCausalLM, T.MistralConfig),
    "qwen2": _decoder_only(T.Qwen2ForCausalLM, T.Qwen2Config),
    "t5": _t5,
    "whisper": _whisper,
}
# T5 and Whisper build their cache from a deep copy of their config (copy.deepcopy traced,
# variables/object_copy.py).
PARAMS = list(FAMILIES)
# The encoder-decoders' training steps (about 30 s) are the extended session's in CI's
# `integration`; `nox -s hf_latest` runs them on every CI run against the newest transformers.
TRAIN_PARAMS = [
    pytest.param(n, marks=pytest.mark.extended) if n in ("t5", "whisper") else n for n in PARAMS
]


def build(name: str, *, train: bool = False):
    torch.manual_seed(0)
    model, inputs = FAMILIES[name]()
    assert model.config._attn_implementation == "sdpa"  # the library default
    if train:
        # Dropout draws differ between eager and compiled code: compare without them.
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
            for key, value in list(vars(module).items()):  # T5Attention keeps its rate
                if isinstance(value, float) and "dropout" in key:
                    setattr(module, key, 0.0)
        for key, value in list(vars(model.config).items()):
            if isinstance(value, float) and ("dropout" in key or "pdrop" in key):
                setattr(model.config, key, 0.0)
        return model.train(), inputs
    return model.eval(), inputs


def tensors_of(value) -> list:
    """The tensors a model output holds, in order: ModelOutput fields, tuples, and the
    key/value tensors of a returned cache (compared like any other output)."""
    found = []

    def walk(v):
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif isinstance(v, list | tuple):
            for item in v:
                walk(item)
        elif hasattr(v, "to_tuple"):
            walk(v.to_tuple())
        elif hasattr(v, "self_attention_cache"):  # EncoderDecoderCache
            walk(v.self_attention_cache)
            walk(v.cross_attention_cache)
        elif hasattr(v, "layers"):  # DynamicCache
            for layer in v.layers:
                walk([layer.keys, layer.values])
        elif v is not None:
            found.append(type(v))

    walk(value)
    return found


def assert_same_outputs(got, expected) -> None:
    got, expected = tensors_of(got), tensors_of(expected)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        if isinstance(e, type):
            assert g is e
        else:
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


class CountingBackend:
    """aot_eager, counting the graphs it is given (a recompile shows up as a new graph)."""

    def __init__(self) -> None:
        self.graphs = 0
        self.inner = ember.lookup_backend("aot_eager")

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return self.inner(gm, example_inputs)


@pytest.mark.parametrize("name", PARAMS)
def test_inference_is_one_graph_equal_to_eager(name):
    model, inputs = build(name)
    with torch.no_grad():
        explained = ember.explain(model)(**inputs)
        assert [b.reason for b in explained.breaks] == []
        assert explained.graph_count == 1
        expected = model(**inputs)
        ember.reset()
        backend = CountingBackend()
        compiled = ember.compile(model, backend=backend)
        assert_same_outputs(compiled(**inputs), expected)
        assert backend.graphs == 1
        assert_same_outputs(compiled(**inputs), expected)
        assert backend.graphs == 1, "the second call with the same shapes recompiled"
    if hasattr(expected, "past_key_values") and expected.past_key_values is not None:
        assert len(tensors_of(expected.past_key_values)) > 0  # the cache really was compared


@pytest.mark.parametrize("name", TRAIN_PARAMS)
def test_training_forward_backward_matches_eager(name):
    model, inputs = build(name, train=True)
    explained = ember.explain(model)(**inputs)
    assert [b.reason for b in explained.breaks] == []
    assert explained.graph_count == 1

    def loss_of(output):
        # every floating output takes part, so every parameter gets a gradient in both runs
        parts = [t for t in tensors_of(output) if isinstance(t, torch.Tensor)]
        return sum(t.float().pow(2).mean() for t in parts if t.is_floating_point())

    loss_of(model(**inputs)).backward()
    expected = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    ember.reset()
    backend = CountingBackend()
    compiled = ember.compile(model, backend=backend)
    loss_of(compiled(**inputs)).backward()
    got = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert backend.graphs == 1
    assert got.keys() == expected.keys()
    for key, grad in expected.items():
        torch.testing.assert_close(got[key], grad, rtol=1e-4, atol=1e-5, msg=key)


def test_sdpa_is_one_node_in_the_captured_graph():
    model, inputs = build("llama")
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    with torch.no_grad():
        ember.reset()
        ember.compile(model, backend=keep)(**inputs)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    calls = [n for gm in graphs for n in gm.graph.nodes if n.target is sdpa]
    assert len(graphs) == 1 and len(calls) == 2  # one per layer, not decomposed
