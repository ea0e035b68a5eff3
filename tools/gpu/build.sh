#!/usr/bin/env bash
# Run ON the GPU machine, from the project's root, after `tools/gpu/prepare.sh --sources`
# here: builds pipelab there against the machine's own LibTorch (slower than carrying
# binaries built here, but needs no matching LibTorch on this side).
#   bash .device/build.sh [extra CMake arguments]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/setup.sh" build-gpu
abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
torch_cmake=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTORCH_CUDA_ARCH_LIST=9.0 \
  -DCMAKE_PREFIX_PATH="$torch_cmake;/opt/deps/usr;/opt/deps/usr/lib/x86_64-linux-gnu/cmake" \
  -DCMAKE_CXX_FLAGS="-D_GLIBCXX_USE_CXX11_ABI=$abi" "$@"
cmake --build build-gpu -j"$(nproc)"
