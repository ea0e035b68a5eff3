#!/usr/bin/env bash
# Benchmark (not a test): how pipelab shares a machine. Runs the quickstart alone, then two
# copies at the same time, and prints each run's training throughput (summary.json,
# samples/s over all epochs) and its share of the solo figure. Goal: each of two concurrent
# runs keeps >= 40% of its solo throughput.
#
#   tools/bench/bench_concurrent.sh [PIPELAB] [EPOCHS] [extra pipelab run arguments...]
#   tools/bench/bench_concurrent.sh build/pipelab 2 --set run.threads=2   # every core, as LibTorch would
set -euo pipefail
cd "$(dirname "$0")/../.."
pipelab=${1:-build/pipelab}
epochs=${2:-2}
shift $(( $# > 2 ? 2 : $# ))
out=$(mktemp -d /tmp/pipelab-bench-concurrent-XXXX)
trap 'rm -rf "$out"' EXIT
extra=("$@")
run() {
  "$pipelab" run experiments/quickstart.yaml --quiet --set run.epochs="$epochs" --set run.output="$out/$1" \
    ${extra[@]+"${extra[@]}"} >/dev/null
}
throughput() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['samples_per_second'])" "$out/$1/summary.json"; }
run solo
solo=$(throughput solo)
run a & pa=$!
run b & pb=$!
wait $pa $pb
a=$(throughput a); b=$(throughput b)
python3 - "$solo" "$a" "$b" "${extra[*]:-default threads}" <<'PY'
import sys
solo, a, b, how = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
print(f"quickstart ({how}; OMP_WAIT_POLICY {__import__('os').environ.get('OMP_WAIT_POLICY', 'unset')})")
print(f"  alone          {solo:9.0f} samples/s")
print(f"  two at once    {a:9.0f} and {b:.0f} samples/s: {a / solo:.0%} and {b / solo:.0%} of alone (goal >= 40%)")
PY
