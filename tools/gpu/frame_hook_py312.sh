#!/usr/bin/env bash
# Builds ember-frame-hook with pip on the lent GPU machine's Python 3.12, runs its tests,
# the overhead benchmark and the demo. Run through the device tool from the repo root,
# carrying .whl (hatchling and its dependencies as py3 wheels; no registry there):
#   bash tools/gpu/frame_hook_py312.sh
set -euo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 --version
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-build-isolation --no-index --no-deps --target /tmp/fh ./packages/frame_hook
export PYTHONPATH=/tmp/fh:/tmp/site
python3 -c "import ember_frame_hook, sys; print('built', ember_frame_hook.__file__, sys.version)"
(cd packages/frame_hook/tests && python3 -m pytest -q -p no:cacheprovider . 2>&1 | tee "$OUT/tests.log" | tail -5)
python3 benchmarks/frame_hook_overhead.py --json "$OUT/overhead.json" | tee "$OUT/overhead.md"
python3 examples/frame_hook_demo.py | tee "$OUT/demo.log"
