#!/usr/bin/env bash
# One device call (about 8 minutes) A/B of the batch-norm statistics work, each variant in a
# fresh process, ms a step and peak MB:
#   stats_only_inline  a reduction's per-channel divisions and roots recomputed per element
#                      (graph.STATISTIC_BROADCAST_MIN off)
#   program_order      a group's nodes in program order (scheduler/pass_order.py off): the
#                      stored statistic cut ResNet-50's two-statistic backward kernels into
#                      two unsplit passes, 4 ms a step slower on the H200 (6c73983)
#   welford_reciprocal a looped Welford update multiplies by one reciprocal a pass (slower
#                      on both models, 2026-12-02: off by default)
#                      (reduction_emit.WELFORD_RECIPROCAL_A_PASS off)
#   pool_scatter       the stem max pool's backward as aten's scatter-add, not a gather
#                      fused into the batch norm's backward (pool_backward.py)
# Planned on the CPU (tools/triton_plan.py --ptx): ResNet-50's training step 410 -> 311 G
# SASS thread-instructions with the statistics stored and the passes regrouped.
#   bash tools/gpu/stats_ab.sh        (through the device tool, carrying .whl)
set -uo pipefail
source tools/gpu/host_env.sh
for spec in "timm resnet50 train-bf16 base,program_order,welford_reciprocal,stats_only_inline,pool_scatter" \
    "timm convnext_tiny train-bf16 base,stats_only_inline" \
    "timm efficientnet_b0 train-bf16 base,welford_reciprocal" \
    "timm vit_base_patch16_224 train-bf16 base,stats_only_inline"; do
    read -r suite model mode variants <<<"$spec"
    echo "== $model $mode"
    timeout 250 python3 tools/gpu/bisect_variants.py --suite "$suite" --model "$model" \
        --mode "$mode" --variants "$variants" --steps 20 2>&1 \
        | grep -E "^[a-z_]+: (ok|MISMATCH)|Error"
done
