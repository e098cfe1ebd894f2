#!/usr/bin/env bash
# Device calls (two groups, about 8 minutes each): A/B of the training-step choices still to time, each
# variant in a fresh process, ms a step and peak MB (variants: bisect_variants.py), every
# model's variants run base, variant, variant, base (the first process of a call ran slower
# on 2026-12-02: an order-bound A/B is read from both orders):
#   recompute_library_operands  forward values a backward matmul or convolution gradient
#                      reads recomputed (aot min-cut's SAVE_LIBRARY_OPERANDS off). Saving them
#                      won group 1 on 2026-12-02 (efb0c8a): ESE-VoVNet 27.2 / 30.2 ms a step
#                      (7253 / 4510 MB), ResNet-50 22.3 / 22.8 ms (4971 / 3019 MB): on since then
#   welford_reciprocal a looped Welford update multiplies by one reciprocal a pass (off
#                      since 860f3f8; order-bound twice: 40.91 / 37.62 and 41.56 / 36.01)
# Timed and kept (0c450c5): the pool layouts (gathers_vote_by_walk 29.91, saved_floats_only
# 27.04, pool_scatter 27.88 against 24.52 / 23.37 ms on ResNet-50), the pass order
# (program_order), the stored statistics (stats_only_inline).
#   bash tools/gpu/stats_ab.sh 1      (through the device tool, carrying .whl; group 1 or 2,
#                                      each about 8 minutes: four fresh compiles a model)
set -uo pipefail
source tools/gpu/host_env.sh
save=base,recompute_library_operands,recompute_library_operands,base
case "${1:-1}" in
1) specs=("timm ese_vovnet19b_dw train-bf16 $save" "timm resnet50 train-bf16 $save") ;;
2) specs=("huggingface GPT2LMHeadModel train-bf16 $save"
    "timm efficientnet_b0 train-bf16 base,welford_reciprocal,welford_reciprocal,base") ;;
*) echo "group 1 or 2" >&2; exit 2 ;;
esac
for spec in "${specs[@]}"; do
    read -r suite model mode variants <<<"$spec"
    echo "== $model $mode"
    timeout 300 python3 tools/gpu/bisect_variants.py --suite "$suite" --model "$model" \
        --mode "$mode" --variants "$variants" --steps 20 2>&1 \
        | grep -E "^[a-z_]+: (ok|MISMATCH)|Error"
done
