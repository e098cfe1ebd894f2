"""One Hugging Face model at library defaults on the GPU, Ember (inductor) against eager under
bf16 autocast inference (or fp32 with --fp32): the relative error of the logits, or the
failure with its traceback. Found BertForMaskedLM's illegal memory access and Llama's bf16
mismatch (docs/performance.md, "Public suites (GPU, first shards)").

    python tools/gpu/hf_parity.py BertForMaskedLM [--fp32] [--batch 8] [--seq 512]
"""

from __future__ import annotations

import argparse
import traceback

import torch
import transformers

import ember

SMALL_LLAMA = {"num_hidden_layers": 8, "hidden_size": 1024, "intermediate_size": 2816,
               "num_attention_heads": 16, "num_key_value_heads": 16}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--fp32", action="store_true")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=512)
    args = parser.parse_args()
    cls = getattr(transformers, args.model)
    config = cls.config_class(**(SMALL_LLAMA if args.model.startswith("Llama") else {}))
    for key, value in vars(config).items():  # dropout off: compared with eager
        if "dropout" in key and isinstance(value, float):
            setattr(config, key, 0.0)
    torch.manual_seed(0)
    model = cls(config).cuda().eval()
    ids = torch.randint(0, min(config.vocab_size, 30000), (args.batch, args.seq), device="cuda")
    with torch.no_grad(), torch.autocast("cuda", torch.bfloat16, enabled=not args.fp32):
        expected = model(input_ids=ids).logits.float()
        compiled = ember.compile(model)
        try:
            for _ in range(2):
                got = compiled(input_ids=ids).logits.float()
            torch.cuda.synchronize()
        except Exception as exc:
            traceback.print_exc()
            print(f"RESULT {args.model}: FAIL {type(exc).__name__}")
            return
    error = ((got - expected).norm() / expected.norm()).item()
    graphs = ember.counters["inductor"].get("forward_graphs")
    print(f"RESULT {args.model}: relative error {error:.2e}, {graphs} graphs")


if __name__ == "__main__":
    main()
