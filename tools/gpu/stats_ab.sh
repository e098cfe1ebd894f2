#!/usr/bin/env bash
# One device call (about 8 minutes) for f0cd59d, not yet timed on the GPU: a reduction's
# per-channel divisions and roots stored in its own kernel (graph.STATISTIC_BROADCAST_MIN)
# and split reductions int32 (kernel.SPLIT_BOUND_BY_CHUNKS), A/B against both switched back
# (`stats_inline`), ms a step and peak MB, a fresh process per variant. Planned on the CPU
# (tools/triton_plan.py --ptx): ResNet-50's training step 410 -> 320 G SASS thread-
# instructions, its batch-norm pointwise kernels 50-106 -> about 16 an element.
#   bash tools/gpu/stats_ab.sh        (through the device tool, carrying .whl)
set -uo pipefail
source tools/gpu/host_env.sh
for spec in "timm resnet50 train-bf16" "timm convnext_tiny train-bf16" \
    "timm efficientnet_b0 train-bf16" "timm vit_base_patch16_224 train-bf16" \
    "timm resnet50 infer-bf16"; do
    read -r suite model mode <<<"$spec"
    echo "== $model $mode"
    timeout 110 python3 tools/gpu/bisect_variants.py --suite "$suite" --model "$model" \
        --mode "$mode" --variants base,stats_inline --steps 20 2>&1 \
        | grep -E "^(base|stats_inline):|Error"
done
