#!/usr/bin/env bash
# Correctness and cliff checks on the lent GPU, one device call (run from the repo root with
# .whl carried):  bash tools/gpu/checks.sh [CHECK...]   (default: every check)
#   bert      tools/gpu/bert_check.py: BERT/DistilBERT MLM at defaults, bf16 autocast
#   llama     tools/gpu/hf_parity.py LlamaForCausalLM: logits error under bf16 autocast
#   convnext  tools/gpu/convnext_probe.py, bf16 autocast and fp32
#   probe     tools/gpu/probe.py PROBE_MODEL: kernel tables of eager/torch.compile/Ember
# Each check's output goes to $OUT/<check>.log; the last lines of each are printed.
set -uo pipefail
source tools/gpu/host_env.sh
run() { # name, timeout, command...
    local name=$1 limit=$2
    shift 2
    echo "== $name"
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    echo "rc=$?"
    grep -v -e Warning -e '^\[transformers\]' "$OUT/$name.log" | tail -n "${TAIL:-25}"
}
for check in ${@:-bert llama convnext}; do
    case $check in
        bert) run bert 240 python3 tools/gpu/bert_check.py ;;
        llama) run llama 150 python3 tools/gpu/hf_parity.py LlamaForCausalLM ;;
        convnext)
            run convnext-bf16 200 python3 tools/gpu/convnext_probe.py
            run convnext-fp32 200 python3 tools/gpu/convnext_probe.py --fp32 ;;
        probe) run probe 240 python3 tools/gpu/probe.py "${PROBE_MODEL:-convnext_tiny}" ;;
        *) echo "unknown check $check" ;;
    esac
done
