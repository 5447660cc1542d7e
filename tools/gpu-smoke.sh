#!/bin/bash
# A short check of the GPU backend on one GPU with one rank (minutes, for a scarce device):
# the transport and GPU-backend tests, then GEMM and TRSM checked and profiled against CuPy.
# Usage (repository root, wheels in .whl/):  OUT=/some/dir tools/gpu-smoke.sh
# Logs: $OUT/smoke-tests.log, $OUT/smoke-gemm.json, $OUT/smoke-trsm.json; summary printed last.
set -u
cd "$(dirname "$0")/.."
out=${OUT:-gpu-smoke-out}
mkdir -p "$out"
n=${BLASMP_SMOKE_N:-16384}
block=${BLASMP_SMOKE_BLOCK:-2048}
export BLASMP_SIGNAL_TIMEOUT=${BLASMP_SIGNAL_TIMEOUT:-30}
summary=()
BLASMP_GPU_TEST_RANKS=1 BLASMP_GPU_TEST_TIMEOUT=${BLASMP_SMOKE_TEST_TIMEOUT:-120} \
  BLASMP_GPU_TEST_PER_TEST_TIMEOUT=30 OUT=$out \
  tools/gpu-node-test.sh tests/mpi/test_transport.py tests/mpi/test_gpu_backend.py -x \
  > "$out/smoke-tests.log" 2>&1
summary+=("tests (1 rank): rc=$? $(grep -E 'passed|failed|error' "$out/smoke-tests.log" | tail -1)")
for op in gemm trsm; do
  timeout -k 5 "${BLASMP_SMOKE_OP_TIMEOUT:-90}" tools/node-run.sh 1 python3 -m blasmp_array.bench \
    "$op" --backend gpu --n 2048 --block 256 --check --quiet > "$out/smoke-$op-check.log" 2>&1
  summary+=("$op check n=2048 block=256: rc=$?")
  timeout -k 5 "${BLASMP_SMOKE_OP_TIMEOUT:-90}" tools/node-run.sh 1 python3 -m blasmp_array.bench \
    "$op" --backend gpu --n "$n" --block "$block" --profile --compare --baselines cupy \
    --repeat 5 --warmup 1 --json "$out/smoke-$op.json" > "$out/smoke-$op.log" 2>&1
  summary+=("$op profile n=$n block=$block: rc=$?")
done
echo "=== GPU smoke summary (logs in $out)"
printf '%s\n' "${summary[@]}"
for op in gemm trsm; do tail -n 8 "$out/smoke-$op-check.log"; tail -n 25 "$out/smoke-$op.log"; done
