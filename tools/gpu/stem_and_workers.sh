#!/usr/bin/env bash
# One device call (about 8 minutes) for the two changes of 2026-12-01 not yet timed on the GPU:
# - narrow stems NCHW in inference graphs (bd2036f, 4ab0cff): each model A/B against the old
#   channels-last stem (`stem_nhwc`), ms a step and peak MB, a fresh process per variant;
# - the Triton build workers started before the trace, lighter and warmed up (05535e9):
#   the cold compile of two HF models by stage (compare with performance.md's 28c4d4d rows:
#   BERT 13.8 s first call, 6.8 s in the workers).
#   bash tools/gpu/stem_and_workers.sh        (through the device tool, carrying .whl)
set -uo pipefail
source tools/gpu/host_env.sh
for spec in "levit_128 infer-fp32" "ghostnet_100 infer-fp32" "mobilenetv2_100 infer-bf16" \
    "efficientnet_b0 infer-bf16" "ghostnet_100 infer-bf16"; do
    read -r model mode <<<"$spec"
    echo "== $model $mode"
    timeout 120 python3 tools/gpu/bisect_variants.py --suite timm --model "$model" --mode "$mode" \
        --variants base,stem_nhwc --steps 30 2>&1 | grep -E "^(base|stem_nhwc):|Error"
done
echo "== cold compile by stage"
timeout 150 python3 tools/gpu/compile_profile.py --suite huggingface \
    --models BertForMaskedLM,BlenderbotSmallForCausalLM --mode infer-bf16 --out "$OUT" 2>&1 \
    | grep -E '^\{' | cut -c1-600
