#!/usr/bin/env bash
# Benchmark (not a test): does `pipelab simulate`, replaying a run's own measured costs
# (metrics/costs.json), predict that run's step time and memory? For each executor
# (threaded: 2 stage threads of 1 intra-op thread each; sequential: 1 thread), scheme (gpipe
# without checkpointing, pipedream_flush = 1F1B) and micro-batch count (4, 8), it trains
# experiments/simulate/validate_mlp.yaml for 2 epochs (the last one traced), replays it, and
# prints predicted vs measured step time and each device's host memory peak. Rounds interleave
# the configurations. Goals (docs/simulate.md): threaded within 10%, sequential within 3%,
# memory within 10%. Run it alone: a second busy process skews every figure.
#
#   tools/bench/validate_simulate.sh [PIPELAB] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
pipelab=${1:-build/pipelab}
rounds=${2:-3}
out=$(mktemp -d /tmp/pipelab-validate-XXXX)
trap 'rm -rf "$out"' EXIT
printf "%-10s %-16s %2s %5s  %9s %9s %7s  %s\n" executor scheme m round measured predicted error "memory per device (measured -> predicted MiB, error)"
for round in $(seq 1 "$rounds"); do
  for executor in threaded sequential; do
    for scheme in gpipe pipedream_flush; do
      for m in 4 8; do
        dir="$out/$executor-$scheme-$m-$round"
        section="{type: $scheme, chunks: $m}"
        if [ "$scheme" = gpipe ]; then section="{type: gpipe, chunks: $m, checkpoint: never}"; fi
        sets=(--set run.output="$dir" --set "scheme=$section")
        if [ "$executor" = sequential ]; then sets+=(--set run.executor=sequential --set run.threads=1); fi
        "$pipelab" run experiments/simulate/validate_mlp.yaml --quiet "${sets[@]}" >/dev/null
        replay=(--executor devices)
        if [ "$executor" = sequential ]; then replay=(--executor sequential); fi
        report=$("$pipelab" simulate experiments/simulate/validate_mlp.yaml "${sets[@]}" "${replay[@]}" \
                 --costs "$dir/metrics/costs.json")
        python3 - "$executor" "$scheme" "$m" "$round" "$report" <<'PY'
import re, sys
executor, scheme, m, rnd, report = sys.argv[1:]
step = re.search(r"measured step ([\d.]+) ms .*predicted ([\d.]+) ms: ([+-][\d.]+)%", report)
mem = re.findall(r"device (\d+) \(stages? [\d, ]+\): .*measured ([\d.]+) MiB, predicted ([\d.]+) MiB: ([+-][\d.]+)%", report)
memory = "  ".join(f"d{d} {a} -> {b} ({e}%)" for d, a, b, e in mem)
print(f"{executor:<10} {scheme:<16} {m:>2} {rnd:>5}  {step[1]:>9} {step[2]:>9} {step[3]:>6}%  {memory}")
PY
      done
    done
  done
done
