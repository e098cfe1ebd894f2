#!/usr/bin/env bash
# One device call (about 8 minutes) for c68fb6e, not yet timed on the GPU: a backward's
# recomputed values made just before their first reader and kept out of groups far ahead
# of it. Each training step A/B against the old placement (`recompute_early`), ms a step
# and peak MB, a fresh process per variant. Planned on the CPU: ViT-B's backward 1237 ->
# 812 MB, ResNet-50's 1430 -> 1127 MB, with 10-12 more kernels.
#   bash tools/gpu/recompute_ab.sh        (through the device tool, carrying .whl)
set -uo pipefail
source tools/gpu/host_env.sh
for spec in "timm vit_base_patch16_224" "timm resnet50" "huggingface GPT2ForSequenceClassification" \
    "huggingface LlamaForCausalLM"; do
    read -r suite model <<<"$spec"
    echo "== $model train-bf16"
    timeout 170 python3 tools/gpu/bisect_variants.py --suite "$suite" --model "$model" \
        --mode train-bf16 --variants base,recompute_early --steps 20 2>&1 \
        | grep -E "^(base|recompute_early):|Error"
done
