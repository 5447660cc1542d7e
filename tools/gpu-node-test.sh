#!/bin/bash
# Run the distributed test-suite on the GPU backend of one GPU node, for several rank counts
# (default 1 2 4; more ranks than GPUs share them through CUDA MPS, which tools/node-run.sh
# starts and stops).
#
# Usage (from the repository root):  tools/gpu-node-test.sh [PYTEST_ARGS...]
#   (default arguments: tests/mpi -m "not full_sweep")
#   BLASMP_GPU_TEST_RANKS="1 2 4"   rank counts
#   BLASMP_GPU_TEST_TIMEOUT=900      seconds allowed for one rank count (the whole mpirun)
#   BLASMP_GPU_TEST_PER_TEST_TIMEOUT=300   pytest-timeout of one test
#   OUT=/some/dir                    where the logs go (default: gpu-test-logs/)
#   BLASMP_RACE_REPEATS=20           repeats of each operator in tests/mpi/test_races.py
# Each rank writes its pytest output to $OUT/gpu-npN.rankR.log (rank 0's is also printed);
# a summary of the last pytest line of every rank ends the output. Exit status: 0 when every
# rank of every rank count passed.
set -u
cd "$(dirname "$0")/.."
out=${OUT:-gpu-test-logs}
mkdir -p "$out"
ranks=${BLASMP_GPU_TEST_RANKS:-1 2 4}
limit=${BLASMP_GPU_TEST_TIMEOUT:-900}
per_test=${BLASMP_GPU_TEST_PER_TEST_TIMEOUT:-300}
export BLASMP_BACKEND=gpu BLASMP_UNDER_MPIEXEC=1 OMP_NUM_THREADS=1
# tests/mpi/test_races.py: identical calls of every pipelined operator, this many times each
export BLASMP_RACE_REPEATS=${BLASMP_RACE_REPEATS:-20}
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(tests/mpi -m "not full_sweep")
summary=()
status=0
for n in $ranks; do
  echo "=== GPU test-suite with $n rank(s): pytest ${args[*]}"
  start=$(date +%s)
  # shellcheck disable=SC2016
  timeout -k 10 "$limit" tools/node-run.sh "$n" bash -c '
    log="$0/gpu-np$1.rank${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}.log"; t=$2; shift 2
    if [ "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}" = 0 ]; then
      python3 -m pytest -q -p no:cacheprovider -o addopts= --timeout="$t" -rfE "$@" 2>&1 | tee "$log"
      exit "${PIPESTATUS[0]}"
    else
      exec python3 -m pytest -q -p no:cacheprovider -o addopts= --timeout="$t" -rfE "$@" >"$log" 2>&1
    fi' "$out" "$n" "$per_test" "${args[@]}"
  rc=$?
  secs=$(( $(date +%s) - start ))
  [ $rc -eq 0 ] || status=1
  for ((r = 0; r < n; r++)); do
    f="$out/gpu-np$n.rank$r.log"
    last=$( [ -f "$f" ] && grep -E '(passed|failed|error|skipped|no tests ran)' "$f" | tail -1 )
    summary+=("np=$n rank=$r rc=$rc ${secs}s: ${last:-<no pytest summary; see $f>}")
  done
done
echo "=== summary (logs in $out)"
printf '%s\n' "${summary[@]}"
exit $status
