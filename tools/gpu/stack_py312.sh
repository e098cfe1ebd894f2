#!/usr/bin/env bash
# On the lent GPU machine (Python 3.12, its own torch): build the frame hook with pip, then
# run the frame hook, bytecode, tracer, ember and integration suites from source, and a
# CUDA smoke test of ember.compile. Run from the repo root through the device tool,
# carrying .whl (hatchling and its deps; that machine reaches no registry):
#   bash tools/gpu/stack_py312.sh
set -uo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
PYTHONPATH=/tmp/site python3 -m pip install -q --no-build-isolation --no-index --no-deps \
    --target /tmp/fh ./packages/frame_hook || exit 1
SRC=/tmp/fh:$PWD/packages/bytecode_tracer/src:$PWD/packages/ember/src:$PWD/benchmarks/zoo/src:$PWD/tools
export PYTHONPATH=$SRC
python3 -c "import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__, torch.cuda.get_device_name())"
status=0
run() { echo "== $1"; shift; (cd "$1" && shift && python3 -m pytest -q -p no:cacheprovider "$@" 2>&1 | tail -3) || status=1; }
run frame_hook packages/frame_hook/tests .
run bytecode packages/bytecode_tracer tests/bytecode
run tracer+guards packages/bytecode_tracer tests/tracer tests/guards
run ember packages/ember tests
run integration . integration_tests/test_toy_example.py integration_tests/test_zoo_tracer.py
python3 - <<'PY' || status=1
import torch, ember
def f(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b
a, b = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
out = ember.explain(f)(a, b)
got = ember.compile(f)(a, b)
assert torch.allclose(got, f(a, b)) and got.is_cuda
print("cuda smoke:", out.graph_count, "graphs,", out.graph_break_count, "break; result matches eager on", got.device)
PY
exit $status
