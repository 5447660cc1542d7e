#!/bin/bash
# Bring a newer cuSOLVER to the GPU node for a measurement: the image's cuSOLVER 12.0.4 has no
# cusolverDnXstedc (the device eigenvector route of docs/eigh.md needs it); 12.4.1.2 has it.
# Downloads the nvidia-cusolver wheel, keeps only the sm_90 code of libcusolver.so.12
# (tools/wheel_for_one_arch.py) and writes it xz-compressed to .cusolver/ (45 MB: with .whl/
# under the device's 64 MiB transfer). Ignored by git: add `.cusolver/` to .git/info/exclude.
# On the node (docs/gpu-node.md, "A newer cuSOLVER") the library CuPy and nvmath-python load by
# path is swapped for it for one call and put back after.
# Usage: tools/fetch-cusolver-lib.sh [VERSION] [ARCH]   (default 12.4.1.2 and 90)
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-12.4.1.2}
arch=${2:-90}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps -d "$tmp" "nvidia-cusolver==$version" 2>&1 | grep -v '^WARNING' || true
python3 tools/wheel_for_one_arch.py "$tmp"/nvidia_cusolver-*.whl --arch "$arch" --out "$tmp/out"
mkdir -p .cusolver
python3 - "$tmp/out" <<'PY'
import glob, lzma, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z, lzma.open(".cusolver/libcusolver.so.12.xz", "wb") as out:
    out.write(z.read("nvidia/cu13/lib/libcusolver.so.12"))
PY
ls -l .cusolver
