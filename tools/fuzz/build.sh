#!/usr/bin/env bash
# Builds the .pt reader's fuzzer with clang's libFuzzer (ASan + UBSan) into build-fuzz/,
# installing clang and its runtime from Debian's packages if missing, then makes the seed
# corpus. Run it:
#   tools/fuzz/build.sh && build-fuzz/pipelab_fuzz_pt_reader build-fuzz/corpus -max_total_time=1800
# Findings go to crash-*/leak-*/timeout-* files; minimise one with -minimize_crash=1 and
# commit it under tests/data/pt_crashers/ (tests/core/pt_reader_hardening_test.cpp reads
# every file there).
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v clang++ >/dev/null || ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "ok installed"; then
  apt-get install -y -q clang libclang-rt-14-dev
fi
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPIPELAB_FUZZ=ON \
  -DPIPELAB_TESTS=OFF -DPIPELAB_BENCH=OFF -DCMAKE_PREFIX_PATH="$torch_prefix" >/dev/null
cmake --build build-fuzz --target pipelab_fuzz_pt_reader
python3 tools/fuzz/make_corpus.py build-fuzz/corpus
