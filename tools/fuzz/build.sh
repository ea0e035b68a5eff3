#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) into build-fuzz/, installing clang
# and its runtime from Debian's packages if missing, then makes their seed corpora:
#   pipelab_fuzz_pt_reader  the .pt reader              corpus: build-fuzz/corpus
#   pipelab_fuzz_schedule   schedule text/CSV + validator corpus: build-fuzz/schedule-corpus
#   pipelab_fuzz_safetensors the safetensors reader     corpus: build-fuzz/safetensors-corpus
# Run one:
#   tools/fuzz/build.sh && build-fuzz/pipelab_fuzz_pt_reader build-fuzz/corpus -max_total_time=1800
#   build-fuzz/pipelab_fuzz_schedule build-fuzz/schedule-corpus -max_total_time=600
#   build-fuzz/pipelab_fuzz_safetensors build-fuzz/safetensors-corpus -max_total_time=600
# Findings go to crash-*/leak-*/timeout-* files; minimise one with -minimize_crash=1 and
# commit it as a regression test (.pt files under tests/data/pt_crashers/, which
# tests/core/pt_reader_hardening_test.cpp reads; schedules as a case in
# tests/core/schedule_validate_test.cpp).
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v clang++ >/dev/null || ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "ok installed"; then
  apt-get install -y -q clang libclang-rt-14-dev
fi
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPIPELAB_FUZZ=ON \
  -DPIPELAB_TESTS=OFF -DPIPELAB_BENCH=OFF -DCMAKE_PREFIX_PATH="$torch_prefix" >/dev/null
cmake --build build-fuzz --target pipelab_fuzz_pt_reader pipelab_fuzz_schedule pipelab_fuzz_safetensors
python3 tools/fuzz/make_corpus.py build-fuzz/corpus
python3 tools/fuzz/make_safetensors_corpus.py build-fuzz/safetensors-corpus
# Schedule seeds: the golden tables and the example files, each under every choice of rules
# (the first byte: bit 0 CSV, the rest the rules the fuzzer validates with).
mkdir -p build-fuzz/schedule-corpus
for f in tests/golden/*.txt experiments/schedules/*.sched; do
  for pick in 0 2 4 12; do
    { printf "\\$(printf '%03o' "$pick")"; cat "$f"; } > "build-fuzz/schedule-corpus/$(basename "$f").$pick"
  done
done
for f in experiments/schedules/*.csv; do
  for pick in 1 3 5; do
    { printf "\\$(printf '%03o' "$pick")"; cat "$f"; } > "build-fuzz/schedule-corpus/$(basename "$f").$pick"
  done
done
