#!/usr/bin/env bash
# Issue 6 on the lent H200 (Python 3.12, its own torch/triton/transformers/torchvision), run
# from the repo root through the device tool, carrying .whl (hatchling and its deps):
#   bash tools/gpu/inductor_h200.sh STAGE...
# stages: smoke (Triton target on real CUDA: small graphs + zoo tiny, infer and train),
#         breaks (graph breaks of the HF models with the transformers installed there),
#         profile (top GPU kernels of eager / torch.compile / Ember, PROFILE_MODELS),
#         matmul (aten vs the Triton matmul template, gpu_kernels.py --only matmul),
#         kernels (benchmarks/gpu_kernels.py), opinfo (sharded OpInfo sweep on cuda),
#         models (benchmarks/zoo_baseline.py --device cuda), dynamic (benchmarks/dynamic_shapes.py),
#         compile (cold/warm compile time), fuzz (tools/fuzz_tracer.py on the host's CPU cores:
#         FUZZ_COUNT programs from FUZZ_START, seed FUZZ_SEED, FUZZ_JOBS workers),
#         stage_ab (benchmarks/stage_ab.py: Ember's/PyTorch's tracer x backend crossed, AB_MODELS),
#         autotune (tools/gpu/autotune_cuda.py: backend="autotune" with its CUDA candidates),
#         hostprof (tools/gpu/host_profile.py per HOSTPROF="model:mode ...", code in hostprof.tgz),
#         gputests (pytest of GPU_TESTS on the GPU),
#         wrappertime (tools/gpu/wrapper_time.py: generated code's share of host time, WRAPPER_MODELS),
#         userstep (tools/gpu/dropout_training.py: GPT-2 defaults + AdamW inside the step, USERSTEP_ARGS).
# Everything it prints is also under $OUT.
set -uo pipefail
source tools/gpu/host_env.sh
status=0
for stage in "$@"; do
  echo "== $stage $(date +%T)"
  case $stage in
    smoke)
      timeout ${SMOKE_TIMEOUT:-400} python3 tools/gpu/triton_smoke.py 2>&1 | tee "$OUT/smoke.txt" || status=1 ;;
    breaks)
      python3 tools/gpu/graph_breaks.py 2>&1 | tee "$OUT/breaks.txt" || status=1 ;;
    profile)
      for m in ${PROFILE_MODELS:-gpt2}; do for mode in infer train; do
        timeout 300 python3 tools/gpu/profile_model.py $m $mode 2>&1 | grep -v Warning | tee -a "$OUT/profile.txt"
      done; done ;;
    matmul)
      python3 benchmarks/gpu_kernels.py --only matmul --json "$OUT/matmul.json" 2>&1 | tee "$OUT/matmul.txt" || status=1 ;;
    debug)
      python3 tools/gpu/debug_block.py 2>&1 | tee "$OUT/debug.txt" || status=1 ;;
    kernels)
      python3 benchmarks/gpu_kernels.py --only ${KERNELS_ONLY:-all} --json "$OUT/kernels.json" 2>&1 | tee "$OUT/kernels.txt" || status=1 ;;
    opinfo)
      shards=12
      for k in $(seq 0 $((shards - 1))); do
        EMBER_OPINFO_DEVICE=cuda EMBER_CACHE_DIR=/tmp/opinfo-cache-$k timeout 300 python3 \
          integration_tests/opinfo/sweep.py --backends inductor --shard $k/$shards \
          --json /tmp/opinfo-$k.json > /tmp/opinfo-$k.log 2>&1 &
      done
      wait
      grep -h REPRO /tmp/opinfo-*.log > "$OUT/opinfo_repros.txt"; tail -3 /tmp/opinfo-0.log
      python3 integration_tests/opinfo/merge_shards.py /tmp/opinfo-*.json | tee "$OUT/opinfo.txt" || status=1 ;;
    models)
      python3 benchmarks/zoo_baseline.py --device cuda --size real --repeats 5 \
        --models "${MODELS:-mlp,transformer_block,cnn,bert,gpt2,t5,llama,resnet}" \
        --compilers eager,torch.compile,ember,ember-reduce-overhead --json "$OUT/models.json" \
        2>&1 | tee "$OUT/models.txt" || status=1 ;;
    dynamic)
      python3 benchmarks/dynamic_shapes.py --device cuda --size ${DYNAMIC_SIZE:-small} \
        --models "${DYNAMIC_MODELS:-bert,gpt2,llama}" --json "$OUT/dynamic.json" 2>&1 \
        | grep -v '^\[transformers\]' | tee "$OUT/dynamic.txt" || status=1 ;;
    compile)
      python3 benchmarks/compile_time.py --device cuda --size real --mode train \
        --models "${COMPILE_MODELS:-gpt2,resnet}" 2>&1 | tee "$OUT/compile.txt" || status=1 ;;
    dyncheck)
      EMBER_LOGS=dynamic timeout 300 python3 tools/gpu/dynamic_check.py 2>&1 \
        | tee "$OUT/dyncheck.txt" | grep -v "^\[transformers\]" | tail -40 || status=1 ;;
    fuzz)
      start=${FUZZ_START:-0}
      timeout ${FUZZ_TIMEOUT:-560} python3 tools/fuzz_tracer.py --count ${FUZZ_COUNT:-5000} \
        --start $start --seed ${FUZZ_SEED:-2027} --jobs ${FUZZ_JOBS:-15} --timeout 60 \
        --out /tmp/fuzz-$start 2>&1 | tail -20 | tee "$OUT/fuzz-$start.txt" || status=1
      if ls /tmp/fuzz-$start/fail_* > /dev/null 2>&1; then
        tar -czf "$OUT/fuzz-fail-$start.tgz" -C /tmp/fuzz-$start . ; status=1
      fi ;;
    stage_ab)
      for mode in infer train; do
        python3 benchmarks/stage_ab.py --device cuda --size real --repeats 5 --mode $mode \
          --models "${AB_MODELS:-mlp,transformer_block,gpt2,bert}" --json "$OUT/stage_ab_$mode.json" \
          2>&1 | grep -v '^\[transformers\]' | tee "$OUT/stage_ab_$mode.txt" || status=1
      done ;;
    hostprof)
      mkdir -p /tmp/hostprof
      for spec in ${HOSTPROF:-llama:train gpt2:train resnet:train}; do
        timeout 300 python3 tools/gpu/host_profile.py ${spec%%:*} ${spec##*:} --out /tmp/hostprof/${spec%%:*}_${spec##*:} \
          2>&1 | grep -v -e '^\[transformers\]' -e Warning -e USDT | tee -a "$OUT/hostprof.txt" || status=1
        tar -czf "$OUT/hostprof.tgz" -C /tmp/hostprof .  # after each model: a cut-off run keeps the rest
      done ;;
    wrappertime)
      for m in ${WRAPPER_MODELS:-llama gpt2 resnet}; do
        timeout 300 python3 tools/gpu/wrapper_time.py $m ${WRAPPER_ARGS:-} 2>&1 | grep -v -e '^\[transformers\]' -e Warning \
          | tee -a "$OUT/wrappertime.txt" || status=1
      done ;;
    userstep)
      timeout 500 python3 tools/gpu/dropout_training.py --dump-graphs "$OUT/mixed" ${USERSTEP_ARGS:-} 2>&1 \
        | grep -v -e '^\[transformers\]' -e Warning | tee "$OUT/userstep.txt" || status=1 ;;
    gputests)
      timeout 400 python3 -m pytest -q -p no:cacheprovider ${GPU_TESTS:-packages/ember/tests/backends/test_cudagraphs.py \
        packages/primops/tests/prims/test_random.py packages/ember/tests/test_under_profilers.py} 2>&1 \
        | tail -30 | tee "$OUT/gputests.txt" || status=1 ;;
    autotune)
      timeout 500 python3 tools/gpu/autotune_cuda.py 2>&1 | grep -v '^\[transformers\]' \
        | tee "$OUT/autotune.txt" || status=1 ;;
    *) echo "unknown stage $stage"; status=1 ;;
  esac
done
exit $status
