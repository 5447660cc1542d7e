#!/bin/bash
# The data door on the CPU backend against its targets: every data row of the bench (random,
# random_uniform, random_random, from_numpy, to_numpy, to_numpy_root, to_zarr, from_zarr,
# to_dask) at n=$N on 1 and 2 ranks, each round one bench command with its peers in the same run
# (NumPy default_rng and h.copy() on one thread; Dask with as many workers as ranks; zarr), then
# tools/door_summary.py: per round the time ours / reference, and the median over the rounds.
#
# Usage (repository root, in the environment of `pip install -e ".[mpich,test,bench]"`):
#   tools/door_cpu.sh OUTDIR
#   N=4096 ROUNDS=3 REPEAT=3 RANKS="1 2" BLOCK=256 BENCH_LOCK=/tmp/bench.lock DIR=<stores' parent>
# Results: OUTDIR/door-cpu-np<R>-round<K>.json (the bench's records; round 1 also --check), the
# logs next to them, and OUTDIR/door-cpu-summary.json with the table printed at the end. Each
# bench command holds the lock file $BENCH_LOCK (flock) while it runs, so that other benchmarks
# on a shared machine do not run at the same time; with one BLAS thread per rank.
set -u
out=${1:?usage: tools/door_cpu.sh OUTDIR}
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$out"
n=${N:-4096} rounds=${ROUNDS:-3} repeat=${REPEAT:-3} block=${BLOCK:-256} lock=${BENCH_LOCK:-/tmp/bench.lock}
ranks_list=${RANKS:-1 2}
rows=random,random_uniform,random_random,from_numpy,to_numpy,to_numpy_root,to_zarr,from_zarr,to_dask
py=${PYTHON:-python}
launcher=$(dirname "$(command -v "$py")")/mpiexec
[ -x "$launcher" ] || launcher=mpiexec
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 BLASMP_BACKEND=cpu
locked() { if command -v flock > /dev/null; then flock "$lock" "$@"; else "$@"; fi; }
for r in $ranks_list; do
  case $r in 1|2) ;; *) echo "door_cpu.sh: RANKS may hold 1 and 2 (the targets' rank counts), got $r" >&2; exit 2 ;; esac
done
status=0
args=()
for r in $ranks_list; do
  files=()
  for ((k = 1; k <= rounds; k++)); do
    f="$out/door-cpu-np$r-round$k"
    check=(); [ "$k" = 1 ] && check=(--check)
    echo "=== $r rank(s), round $k of $rounds: $f.json"
    locked "$launcher" -n "$r" "$py" -m blasmp_array.bench "$rows" --n "$n" --block "$block" \
      --profile "${check[@]}" --compare --baselines numpy,dask,zarr --repeat "$repeat" \
      ${DIR:+--dir "$DIR"} --json "$f.json" --quiet > "$f.log" 2>&1 || { status=1; tail -n 20 "$f.log"; }
    [ -s "$f.json" ] && files+=("$f.json")
  done
  [ ${#files[@]} -gt 0 ] || continue
  if [ "$r" = 1 ]; then args+=(--one "${files[@]}"); else args+=(--two "${files[@]}"); fi
done
[ ${#args[@]} -gt 0 ] || { echo "door_cpu.sh: no round wrote its JSON (logs in $out)" >&2; exit 1; }
if [[ " ${args[*]} " != *" --one "* ]]; then
  echo "door_cpu.sh: the summary needs the 1-rank rounds (RANKS must include 1)" >&2; exit 1
fi
"$py" tools/door_summary.py cpu "${args[@]}" --json "$out/door-cpu-summary.json"
exit $status
