"""Issue 13 on a GPU: tiny HF GPT-2/BERT/Llama (library defaults) over 8 sequence lengths
through the inductor backend, compared with eager; prints each model's graph counts.
Expect at most 2 forward graphs per model and no static specializations; with
EMBER_LOGS=dynamic, no `Eq(sK, N)` guard "added at backend ..." (aot's trace runs under the
Python dispatcher). `--off` traces aot without the dispatcher (the old behaviour), for a
baseline."""

from __future__ import annotations

import contextlib
import sys

import torch
import transformers as T

import ember
import ember_aot_autograd.session as aot_session
from ember.stats import counters

if "--off" in sys.argv:
    aot_session.symbolic_dispatch = lambda values: contextlib.nullcontext()

MODELS = {
    "gpt2": lambda: T.GPT2LMHeadModel(
        T.GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=100, n_positions=256)
    ),
    "bert": lambda: T.BertModel(
        T.BertConfig(
            num_hidden_layers=2,
            hidden_size=64,
            num_attention_heads=2,
            intermediate_size=128,
            vocab_size=100,
        )
    ),
    "llama": lambda: T.LlamaModel(
        T.LlamaConfig(
            num_hidden_layers=2,
            hidden_size=64,
            num_attention_heads=2,
            num_key_value_heads=1,
            intermediate_size=128,
            vocab_size=100,
        )
    ),
}

for name, make in MODELS.items():
    ember.reset()
    counters.clear()
    torch.manual_seed(0)
    model = make().cuda().eval()
    compiled = ember.compile(model, backend="inductor")
    kwargs = {} if name == "bert" else {"use_cache": False}
    with torch.no_grad():
        for n in range(5, 77, 9):
            ids = torch.randint(0, 100, (2, n), device="cuda")
            torch.testing.assert_close(
                compiled(ids, **kwargs)[0], model(ids, **kwargs)[0], rtol=1e-3, atol=1e-3
            )
    print(name, dict(counters["inductor"]), dict(counters["graph_fallbacks"]), flush=True)
