#!/usr/bin/env bash
# The public-suite runner on every GPU of a lent multi-GPU host at once (nvidia-h200-x2 and
# up): one lane per GPU, each lane running its jobs one after another. Device time counts
# the machine held, not its GPUs, so two lanes measure twice the models in one call.
#   LANES="timm:infer-bf16:0/8 timm:infer-bf16:2/8 | timm:infer-bf16:1/8" \
#       SUITES_COMMIT=$(git rev-parse --short HEAD) bash tools/gpu/suites_parallel.sh
# A job is SUITE:MODE:SHARD[:MODELS] (MODELS a comma list; SHARD k/n, 0/1 for all); `|`
# separates lanes, lane i runs on GPU i. ROUNDS (3), MODEL_TIMEOUT (s per model, 150),
# TOTAL_TIMEOUT (s for each lane, 540), PROFILE=1 as in suites.sh, COMPILE_LANES (4: each
# job first compiles its models cold, one process a model and compiler, that many at once
# on the host's cores, then times each alone from the warm caches; about twice the models
# a call; twice the models for all of them at once). Each model is still its
# own process with eager, torch.compile and Ember interleaved, so lanes compare nothing
# across GPUs; they share the host's CPU cores (32 on x2) for compiling.
# Writes $OUT/suites-SUITE-MODE-K_N.jsonl per job, $OUT/laneI.log, and $OUT/summary.md over
# all jobs of this call (summary.py merges any set of these files later too).
set -uo pipefail
source tools/gpu/host_env.sh
export OUT
export SUITES_COMMIT=${SUITES_COMMIT:-unknown}
gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")
IFS='|' read -r -a lanes <<<"${LANES:?set LANES}"
if [ "${#lanes[@]}" -gt "$gpus" ]; then
    echo "LANES has ${#lanes[@]} lanes for $gpus GPUs" >&2
    exit 2
fi
extra=()
[ -n "${PROFILE:-}" ] && extra=(--profile)
run_lane() { # run_lane GPU JOB...: the jobs one after another on one GPU
    local gpu=$1 job suite mode shard models name
    shift
    for job in "$@"; do
        IFS=: read -r suite mode shard models <<<"$job"
        name="suites-$suite-$mode-${shard/\//_}"
        local sel=(--shard "$shard")
        [ -n "$models" ] && sel=(--models "$models")
        echo "== GPU $gpu: $job"
        CUDA_VISIBLE_DEVICES=$gpu python3 benchmarks/suites/run.py --suite "$suite" \
            --mode "$mode" --device cuda --size gpu "${sel[@]}" "${extra[@]}" \
            --compilers "${COMPILERS:-eager,torch.compile,ember}" --rounds "${ROUNDS:-3}" \
            --timeout "${MODEL_TIMEOUT:-150}" --compile-lanes "${COMPILE_LANES:-4}" \
            --out "$OUT/$name.jsonl" 2>&1 \
            | grep --line-buffered -v -e '^\[transformers\]' -e Warning
    done
}
pids=()
for i in "${!lanes[@]}"; do
    read -r -a jobs <<<"${lanes[$i]}"
    # its own process group, so that the deadline also stops the per-model children
    setsid bash -c "$(declare -f run_lane); $(declare -p extra); run_lane $i ${jobs[*]}" \
        >"$OUT/lane$i.log" 2>&1 &
    pids+=($!)
done
deadline=$((SECONDS + ${TOTAL_TIMEOUT:-540}))
while [ "$SECONDS" -lt "$deadline" ] && kill -0 "${pids[@]}" 2>/dev/null; do sleep 2; done
status=0
for pid in "${pids[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
        echo "lane of pid $pid stopped at the deadline"
        kill -TERM -- "-$pid" 2>/dev/null
        status=124
    fi
done
sleep 3
for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
for i in "${!lanes[@]}"; do echo "== lane $i"; grep -v '^\s*$' "$OUT/lane$i.log" | tail -n 40; done
python3 benchmarks/suites/summary.py "$OUT"/suites-*.jsonl | tee "$OUT/summary.md"
exit "$status"
