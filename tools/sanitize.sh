#!/usr/bin/env bash
# Builds the test suite under a sanitizer and runs it (GCC's; nothing to install):
#   tools/sanitize.sh thread    # ThreadSanitizer, test area exec: the threaded, sequential
#                               # and distributed executors, every scheme (build-tsan/)
#   tools/sanitize.sh address   # AddressSanitizer + UndefinedBehaviorSanitizer, test areas
#                               # core and exec, the .pt reader included (build-asan/)
# Extra arguments go to the test binary (e.g. --gtest_filter='PtReaderHardening.*').
#
# What to expect: LibTorch is not instrumented, so a sanitizer sees pipelab's code and the
# C and C++ runtimes, not LibTorch's. Two races TSan reports inside c10d's Gloo constructor
# are suppressed (tools/tsan.supp; docs/contributing.md, "Sanitizers"); any other report
# fails the run. LibTorch's own allocations would be leaks to ASan, so leak detection is
# off for the whole suite (ASAN_OPTIONS=detect_leaks=1 for the reader's tests: clean).
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?usage: tools/sanitize.sh thread|address [test arguments...]}
shift
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
case "$kind" in
  thread) dir=build-tsan; flags="-fsanitize=thread"; areas="exec" ;;
  address) dir=build-asan; flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize=vptr"; areas="core;exec" ;;
  *) echo "tools/sanitize.sh: unknown sanitizer '$kind' (thread or address)" >&2; exit 2 ;;
esac
# -O1 -g1: a sanitizer build is slow to compile; line numbers are all a report needs.
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1 -DNDEBUG" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
  -DPIPELAB_TEST_AREAS="$areas" -DPIPELAB_BENCH=OFF -DCMAKE_PREFIX_PATH="$torch_prefix" >/dev/null
cmake --build "$dir" --target pipelab_tests
export OMP_NUM_THREADS=1  # OpenMP's threads are LibTorch's (uninstrumented) business
if [ "$kind" = thread ]; then
  # TSan maps its shadow memory at fixed addresses, which this kernel's address-space
  # randomisation can occupy ("unexpected memory mapping"): run without it.
  export TSAN_OPTIONS=${TSAN_OPTIONS:-suppressions=$PWD/tools/tsan.supp}
  exec setarch "$(uname -m)" -R "$dir/tests/pipelab_tests" "$@"
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
exec "$dir/tests/pipelab_tests" "$@"
