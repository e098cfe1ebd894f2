#!/usr/bin/env bash
# Ember of this tree (A) against Ember of another tree (B: a branch's packages/ carried as a
# tarball in .whl/), the same suite models in one device call: the suite runner once per
# tree, eager and Ember only, so peak memory and speedup over eager compare like for like.
#   git -C WORKTREE archive --format=tar.gz -o .whl/other.tar.gz HEAD packages
#   SUITE=timm MODE=infer-bf16 MODELS=resnet50,vit_base_patch16_224 bash tools/gpu/tree_ab.sh
# OTHER (default .whl/other.tar.gz); ROUNDS (3); PER_TREE_TIMEOUT (s, 270). Writes
# $OUT/ab-{A,B}.jsonl and their logs and prints one line per model: peak MB and speedup of each.
# The frame hook is this tree's (built once by host_env.sh) for both.
set -uo pipefail
source tools/gpu/host_env.sh
OTHER=${OTHER:-.whl/other.tar.gz}
SUITE=${SUITE:-timm} MODE=${MODE:-infer-bf16}
rm -rf /tmp/tree-b && mkdir -p /tmp/tree-b && tar -xzf "$OTHER" -C /tmp/tree-b || exit 1
export SUITES_COMMIT=${SUITES_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
tree_path() { # the PYTHONPATH of the packages under $1
    local p=$1 s
    s=/tmp/fh
    for pkg in bytecode_tracer ember aot_autograd symbolic_shapes events primops inductor_ir \
        codegen_triton_cpp; do
        s=$s:$p/$pkg/src
    done
    echo "$s:$PWD/benchmarks/zoo/src:$PWD/tools:/tmp/site"
}
for label in A B; do
    packages=$PWD/packages
    [ "$label" = B ] && packages=/tmp/tree-b/packages
    echo "== tree $label: $packages"
    PYTHONPATH=$(tree_path "$packages") EMBER_CACHE_DIR=/tmp/ember-cache-$label \
        timeout "${PER_TREE_TIMEOUT:-270}" python3 benchmarks/suites/run.py --suite "$SUITE" \
        --mode "$MODE" --device cuda --size gpu --models "$MODELS" --compilers eager,ember \
        --rounds "${ROUNDS:-3}" --timeout 150 --out "$OUT/ab-$label.jsonl" 2>&1 \
        | grep -v -e '^\[transformers\]' -e Warning > "$OUT/ab-$label.log"
    tail -n 3 "$OUT/ab-$label.log"
done
python3 - "$OUT/ab-A.jsonl" "$OUT/ab-B.jsonl" <<'PY'
import json, sys
def load(path):
    try:
        return {r["model"]: r for r in map(json.loads, open(path))}
    except OSError:
        return {}
a, b = load(sys.argv[1]), load(sys.argv[2])
def cell(r):
    e = (r or {}).get("compilers", {}).get("ember", {})
    if not e:
        return (r or {}).get("error", "missing")[:40]
    ok = "ok" if e.get("passes") else "FAIL"
    peak, speed = e.get("peak_mb"), e.get("speedup")
    eager = r["compilers"].get("eager", {}).get("peak_mb")
    return f"{ok} {speed or 0:.2f}x {peak or 0:.0f} MB (eager {eager or 0:.0f})"
for model in sorted(set(a) | set(b)):
    print(f"{model:40s} A: {cell(a.get(model))} | B: {cell(b.get(model))}")
PY
