# Sourced by the device-call scripts (suites.sh, checks.sh, inductor_h200.sh): the lent GPU
# host has its own torch, triton, transformers and torchvision and reaches no registry, so
# the frame hook is built from the carried .whl (hatchling and its deps; timm's wheel too,
# made with `pip download --no-deps -d .whl hatchling pathspec pluggy trove-classifiers
# timm==1.0.31`), and the other packages run from their sources.
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if [ ! -f /tmp/fh/.ember-built ]; then # once per call: a second script sourcing this reuses it
    python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site python3 -m pip install -q --no-build-isolation --no-index --no-deps \
        --target /tmp/fh ./packages/frame_hook || exit 1
    touch /tmp/fh/.ember-built
fi
_P=$PWD/packages
export PYTHONPATH=/tmp/fh:$_P/bytecode_tracer/src:$_P/ember/src:$_P/aot_autograd/src:$_P/symbolic_shapes/src:$_P/events/src:$_P/primops/src:$_P/inductor_ir/src:$_P/codegen_triton_cpp/src:$PWD/benchmarks/zoo/src:$PWD/tools:/tmp/site
export EMBER_CACHE_DIR=${EMBER_CACHE_DIR:-/tmp/ember-cache}
python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__, torch.cuda.get_device_name())"
