#!/bin/bash
# Add to .whl/ what the cuBLASMp and cuSOLVERMp baselines of `--compare` need on the GPU node
# (which has NCCL 2.28 and neither library): nvidia-cublasmp-cu13 (the newest nvmath-python 1.0
# accepts, < 0.10), nvidia-cusolvermp-cu13 0.9.0 (the newest that depends on that cuBLASMp) and
# NCCL >= 2.29 (cuBLASMp 0.8+ calls ncclPutSignal/ncclWaitSignal, new in 2.29), all three
# stripped to the node's GPU architecture by tools/wheel_for_one_arch.py so that everything fits
# the device's 64 MiB transfer. Run after ../shared/gpu/fetch-wheels.sh, from the repository root.
# Usage: tools/fetch-cublasmp-wheels.sh [ARCH]   (default 90: the H100/H200)
set -euo pipefail
cd "$(dirname "$0")/.."
arch=${1:-90}
dest=.whl
mkdir -p "$dest"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
get() {  # NAME==VERSION DIR
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_18_x86_64 --platform manylinux2014_x86_64 \
    -d "$2" "$1" 2>&1 | grep -v '^WARNING' || true
}
rm -f "$dest"/nvidia_cublasmp_cu13-*.whl "$dest"/nvidia_cusolvermp_cu13-*.whl "$dest"/nvidia_nccl_cu13-*.whl
get nvidia-cublasmp-cu13==0.9.1.3056 "$tmp"
get nvidia-cusolvermp-cu13==0.9.0.6427 "$tmp"
get nvidia-nccl-cu13==2.29.2 "$tmp"
for w in "$tmp"/nvidia_cublasmp_cu13-*.whl "$tmp"/nvidia_cusolvermp_cu13-*.whl "$tmp"/nvidia_nccl_cu13-*.whl; do
  python3 tools/wheel_for_one_arch.py "$w" --arch "$arch" --out "$dest"
done
ls -1 "$dest"
du -sh "$dest"
