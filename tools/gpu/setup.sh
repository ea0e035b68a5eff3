#!/usr/bin/env bash
# Run ON the GPU machine, from the project's root, sourced: `source .device/setup.sh [BUILD_DIR]`.
# Unpacks the carried Debian packages into /opt/deps and the carried binaries (if any) into
# BUILD_DIR (default build-gpu), and sets LD_LIBRARY_PATH to them, to the machine's LibTorch
# and to the CUDA libraries its wheel installed (site-packages/nvidia/*/lib).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
build_dir=${1:-build-gpu}
prefix=/opt/deps
if [ ! -f "$prefix/.done" ]; then
  mkdir -p "$prefix"
  for f in "$here"/debs/*.deb; do dpkg -x "$f" "$prefix"; done
  touch "$prefix/.done"
fi
torch_lib=$(python3 -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
site=$(dirname "$(dirname "$torch_lib")")
nvidia=$(ls -d "$site"/nvidia/*/lib 2>/dev/null | paste -sd: -)
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu:$torch_lib:$nvidia:${LD_LIBRARY_PATH:-}"
if [ -f "$here/bin.tar.xz" ] && [ ! -x "$root/$build_dir/pipelab" ]; then
  mkdir -p "$root/$build_dir" && tar -C "$root/$build_dir" -xJf "$here/bin.tar.xz"
fi
echo "[gpu] torch $(python3 -c 'import torch; print(torch.__version__)'); $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null)"
