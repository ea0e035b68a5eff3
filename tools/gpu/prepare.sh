#!/usr/bin/env bash
# Run here, on a machine with Debian's archive, from the project's root. Fills .device/
# (git-ignored) with what a bare GPU machine that reaches no package registry lacks:
#   .device/debs/      the run-time libraries (yaml-cpp, Boost.Program_options, libjpeg-turbo,
#                      fmt, spdlog) and, with --sources, the -dev packages to build there too
#   .device/bin.tar.xz the binaries of BUILD_DIR (default build-gpu), when it exists: built
#                      here against the GPU machine's LibTorch version (docs/gpu.md), so the
#                      GPU machine only runs them
#   .device/*.sh       tools/gpu/setup.sh and tools/gpu/build.sh
#
#   tools/gpu/prepare.sh [--sources] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
sources=0
if [ "${1:-}" = "--sources" ]; then sources=1; shift; fi
build=${1:-build-gpu}
out=.device
rm -rf "$out" && mkdir -p "$out/debs"
runtime=(libyaml-cpp0.7 libboost-program-options1.74.0 libjpeg62-turbo libfmt9 libspdlog1.10 libre2-9)
dev=(libyaml-cpp-dev libboost-program-options-dev libboost-program-options1.74-dev libboost1.74-dev
     libeigen3-dev libfmt-dev libspdlog-dev libgtest-dev libgmock-dev googletest libjpeg62-turbo-dev
     libgloo-dev nlohmann-json3-dev libre2-dev)
pkgs=("${runtime[@]}")
[ "$sources" = 1 ] && pkgs+=("${dev[@]}")
(cd "$out/debs" && apt-get download "${pkgs[@]}" >/dev/null)
cp tools/gpu/setup.sh tools/gpu/build.sh "$out/"
if [ -x "$build/pipelab" ]; then
  # Only what runs there: the programs and ctest's files. GoogleTest's test discovery runs
  # here (ctest -N), so ctest there needs none of this machine's CMake modules.
  ctest --test-dir "$build" -N >/dev/null
  files=$(cd "$build" && find . -path ./CMakeFiles -prune -o -type f -perm -u+x -name 'pipelab*' -print \
          -o -name 'CTestTestfile.cmake' -print -o -name '*_include.cmake' -print -o -name '*_tests.cmake' -print)
  tar -C "$build" -cJf "$out/bin.tar.xz" $files
fi
du -sh "$out"
