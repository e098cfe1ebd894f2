#!/usr/bin/env bash
# CI as on a new machine: a clean clone of this checkout's HEAD with ../shared beside it,
# run by `CI=true bash .ci/run` under an empty HOME (no pip cache, no ~/.cache/ember, no
# kept nox venvs), so that a cache or a venv left on this machine cannot hide a missing step.
#
#   bash tools/clean_ci.sh [SCRATCH_DIR]      (default /tmp/ember-clean-ci; emptied first)
#
# Prints the wall time and leaves the log in SCRATCH_DIR/ci.log.
set -euo pipefail
repo=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
scratch=${1:-/tmp/ember-clean-ci}
rm -rf "$scratch"
mkdir -p "$scratch/home"
cp -r "$repo/../shared" "$scratch/shared"
git clone -q "$repo" "$scratch/main"
commit=$(git -C "$scratch/main" rev-parse --short HEAD)
# pyenv lives under the real HOME; keep finding it when HOME is the empty one
export PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}
start=$(date +%s)
set +e
# and nothing of this shell's Python setup: a PYTHONPATH into a working tree once made the
# sessions test that tree's sources instead of the clone's installed packages
clean_path=$(tr ':' '\n' <<< "$PATH" | grep -v -e venv -e '\.nox' | paste -sd:)
(cd "$scratch/main" && env -u PYTHONPATH -u PYTHONHOME -u VIRTUAL_ENV PATH="$clean_path" \
    HOME="$scratch/home" XDG_CACHE_HOME="$scratch/home/.cache" CI=true \
    bash .ci/run) > "$scratch/ci.log" 2>&1
rc=$?
set -e
echo "clean CI of $commit: rc=$rc in $(( $(date +%s) - start )) s (log: $scratch/ci.log)"
exit $rc
