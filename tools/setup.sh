#!/usr/bin/env bash
# Installs everything pipelab needs on a fresh Debian bookworm machine (as root), then
# configures and builds it (Release) into build/. Safe to run again: what is installed
# is reused, and the build is incremental.
#
#   tools/setup.sh                # install + build the `pipelab` command only
#   tools/setup.sh --all          # ... and the test suite and the benchmarks
#   PIPELAB_BUILD_DIR=b tools/setup.sh --all -DPIPELAB_BENCH=OFF   # extra CMake arguments pass through
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${PIPELAB_BUILD_DIR:-build}
targets=(--target pipelab)
if [ "${1:-}" = "--all" ]; then targets=(); shift; fi
python=${PYTHON:-python3}

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# 1. Debian packages: compiler, CMake/Ninja, Python, and the C++ libraries.
packages=(build-essential cmake ninja-build ccache git python3 python3-pip
          libyaml-cpp-dev libeigen3-dev libboost-program-options-dev
          libgtest-dev libgmock-dev libspdlog-dev libfmt-dev
          zlib1g-dev libjpeg62-turbo-dev libgloo-dev nlohmann-json3-dev libre2-dev pkg-config)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  sudo_if_needed apt-get update -q
  sudo_if_needed apt-get install -y -q "${missing[@]}"
else
  say "Debian packages present"
fi

# 2. LibTorch: the one inside PyPI's torch wheel (CUDA-enabled; it also runs on CPU).
#    A torch that is already installed is reused.
if ! command -v "$python" >/dev/null; then python=python3; fi
if "$python" -c 'import torch' 2>/dev/null; then
  say "reusing torch $("$python" -c 'import torch; print(torch.__version__)')"
else
  say "installing torch from PyPI (a few GB with its CUDA libraries)"
  # Debian marks its Python as externally managed (PEP 668); pipelab needs torch where
  # CMake and the interop tests find it, so it goes into that Python.
  "$python" -m pip install torch || "$python" -m pip install --break-system-packages torch
fi
# torch.distributed.pipelining (the peer in tools/bench/bench_processes.py) sends its shapes
# as pickled objects, which needs NumPy; the torch wheel does not require it.
if ! "$python" -c 'import numpy' 2>/dev/null; then
  "$python" -m pip install numpy || "$python" -m pip install --break-system-packages numpy
fi
# The safetensors package: the interop tests read pipelab's .safetensors files with it and
# write the files pipelab reads (tests/core/safetensors_test.cpp).
if ! "$python" -c 'import safetensors' 2>/dev/null; then
  "$python" -m pip install safetensors || "$python" -m pip install --break-system-packages safetensors
fi
# PyYAML: the basis-rotation pipeline reference reads a run's config.yaml
# (tests/schemes/basis_rotation_pipeline_reference.py), and so do the bench scripts.
if ! "$python" -c 'import yaml' 2>/dev/null; then
  "$python" -m pip install pyyaml || "$python" -m pip install --break-system-packages pyyaml
fi
# The test suite's interop checks: torchvision's models (tests/models/torchvision_names_test.cpp).
# Without its dependencies, so that pip never replaces the torch that pipelab builds against;
# its models are plain Python and need only torch and Pillow.
if [ ${#targets[@]} -eq 0 ] && ! "$python" -c 'import torchvision' 2>/dev/null; then
  "$python" -m pip install --no-deps torchvision pillow \
    || "$python" -m pip install --break-system-packages --no-deps torchvision pillow
fi
# Hugging Face's tokenizers and transformers: the BPE ids and RoBERTa's logits are checked
# against them (tests/datasets/bpe_test.cpp, tests/models/roberta_model_test.cpp). Neither
# depends on torch, so pip's dependency resolution leaves pipelab's torch alone.
if [ ${#targets[@]} -eq 0 ] && ! "$python" -c 'import tokenizers, transformers' 2>/dev/null; then
  "$python" -m pip install tokenizers transformers \
    || "$python" -m pip install --break-system-packages tokenizers transformers
fi
torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')

# 3. Configure and build.
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  say "warning: no CUDA toolkit (nvcc) found; the CUDA-enabled LibTorch's CMake files may need it"
fi
say "configuring $build_dir/"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$torch_prefix" -DPython3_EXECUTABLE="$(command -v "$python")" "$@" >/dev/null
if [ ${#targets[@]} -gt 0 ]; then
  say "building the pipelab command (tools/setup.sh --all builds the tests and benchmarks too)"
else
  say "building everything: the command, the test suite, the benchmarks"
fi
cmake --build "$build_dir" "${targets[@]}"
say "done: $build_dir/pipelab --help"
