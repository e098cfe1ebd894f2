#!/usr/bin/env bash
# One device call (about 8 minutes): A/B of the training-step kernel choices still to time,
# each variant in a fresh process, ms a step and peak MB (variants: bisect_variants.py):
#   saved_floats_only  a max pool's saved int8 window offsets cross to the backward NCHW,
#                      and the gather beside NHWC gradients reads them, and the int64 index
#                      recomputed from them, element by element (before 018413b); planned:
#                      the gather kernel 3209 -> 1948 SASS on ResNet-50
#   gathers_vote_by_walk  the max pool's backward output stored NCHW beside NHWC maps, so
#                      the stem batch norm's backward reduction read it element by element
#                      (before 0101394; planned: gather 1948 -> 1014 SASS on ResNet-50)
#   pool_scatter       the max pool's backward as aten's scatter-add, not a gather fused
#                      into the batch norm's backward (pool_backward.py; 24.32 against 24.21
#                      ms on ResNet-50 at 860f3f8's parent)
#   welford_reciprocal a looped Welford update multiplies by one reciprocal a pass (off
#                      since 860f3f8: EfficientNet-B0 41.6 against 36.0 ms; re-checked)
# Timed at 860f3f8's parent and kept: the pass order (variant program_order, 4 ms slower
# on ResNet-50 without it), the stored statistics (stats_only_inline, no change).
#   bash tools/gpu/stats_ab.sh        (through the device tool, carrying .whl)
set -uo pipefail
source tools/gpu/host_env.sh
for spec in "timm resnet50 train-bf16 base,gathers_vote_by_walk,saved_floats_only,pool_scatter,base" \
    "timm botnet26t_256 train-bf16 base,gathers_vote_by_walk,saved_floats_only" \
    "timm efficientnet_b0 train-bf16 base,welford_reciprocal"; do
    read -r suite model mode variants <<<"$spec"
    echo "== $model $mode"
    timeout 300 python3 tools/gpu/bisect_variants.py --suite "$suite" --model "$model" \
        --mode "$mode" --variants "$variants" --steps 20 2>&1 \
        | grep -E "^[a-z_]+: (ok|MISMATCH)|Error"
done
