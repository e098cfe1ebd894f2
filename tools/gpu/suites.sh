#!/usr/bin/env bash
# The public-suite runner (benchmarks/suites/run.py) on the lent GPU host, one shard a call:
#   SUITE=timm MODE=infer-bf16 SHARD=0/8 bash tools/gpu/suites.sh
# SUITE: timm | huggingface | torchvision; MODE: infer-fp32 | infer-bf16 | train-bf16;
# SHARD: k/n (default 0/1: the whole suite); MODELS: a comma list instead of the suite's;
# COMPILERS (default eager,torch.compile,ember); ROUNDS (5); MODEL_TIMEOUT (s per model, 300);
# TOTAL_TIMEOUT (s for the shard, 560: one device command runs at most 600 s); PROFILE=1 adds
# each compiler's GPU time per step by kernel kind to the records (run.py --profile).
# The host has its own torch, triton, transformers and torchvision and reaches no registry:
# carry .whl with hatchling and its deps (for frame_hook's build) and timm's wheel, made here
# with `pip download --no-deps -d .whl hatchling pathspec pluggy trove-classifiers timm==1.0.31`
# (timm is pinned in constraints.txt; the host's own timm is used where .whl has none).
# Writes $OUT/suites-SUITE-MODE-K_N.jsonl (one line per model, appended as each finishes, so
# a cut-off shard keeps what it measured), its log, and $OUT/summary.md (summary.py of it).
# Merge the shards of several calls with: python benchmarks/suites/summary.py out*/suites-*.jsonl
set -uo pipefail
source tools/gpu/host_env.sh
SUITE=${SUITE:-timm} MODE=${MODE:-infer-bf16} SHARD=${SHARD:-0/1}
# the commit of the tree this runs: pass it as SUITES_COMMIT=$(git rev-parse --short HEAD)
# (the device's copy of the tree may carry stale git metadata: its HEAD is not this tree's)
export SUITES_COMMIT=${SUITES_COMMIT:-unknown}
python3 -c "import sys, torch, triton, transformers; print(sys.version.split()[0], torch.__version__, triton.__version__, transformers.__version__, torch.cuda.get_device_name())"
python3 -c "import sys; sys.path.insert(0, 'benchmarks/suites'); from vision_import import import_timm; t = import_timm(); import torchvision; print('timm', t.__version__, 'torchvision', torchvision.__version__)" \
    || echo "timm or torchvision missing: their models are recorded as skipped"
name="suites-$SUITE-$MODE-${SHARD/\//_}"
models=()
extra=()
[ -n "${PROFILE:-}" ] && extra=(--profile)
[ -n "${MODELS:-}" ] && models=(--models "$MODELS")
timeout "${TOTAL_TIMEOUT:-560}" python3 benchmarks/suites/run.py --suite "$SUITE" --mode "$MODE" \
    --device cuda --size gpu --shard "$SHARD" "${models[@]}" "${extra[@]}" \
    --compilers "${COMPILERS:-eager,torch.compile,ember}" --rounds "${ROUNDS:-5}" \
    --timeout "${MODEL_TIMEOUT:-300}" --out "$OUT/$name.jsonl" 2>&1 \
    | grep -v -e '^\[transformers\]' -e Warning | tee "$OUT/$name.log"
status=${PIPESTATUS[0]}
python3 benchmarks/suites/summary.py "$OUT/$name.jsonl" | tee "$OUT/summary.md"
exit "$status"
