#!/bin/bash
# Multi-GPU scaling runs of blasmp_array on ONE node: one MPI rank per GPU (no MPS), NVSHMEM over
# NVLink, NVLink multicast off (NVSHMEM_DISABLE_NVLS=1, NCCL_NVLS_ENABLE=0). Phases:
#   bind    each rank reports the GPU it bound (must be GPU local_rank, all distinct)
#   test    the GPU test-suite (tests/mpi -m "not full_sweep") with 2, 4, 8 ranks (as GPUs allow),
#           through tools/gpu-node-test.sh
#   check   a small --check of each operator on the grids of each P (numerical error in eps)
#   weak    float64 GEMM, SYRK, TRSM, n = 16384 sqrt(P) (a multiple of the block): grids 1x1,
#           1x2/2x1, 2x2/1x4, 2x4/4x2
#   strong  for P = 1..8: a small sweep (grids of P x blocks at n = $SCALING_SWEEP_N) picks the
#           best grid/block per operator, then n = 32768 and 65536 run with it
# Results: JSON of the bench command under $OUT (default ./scaling-out), logs next to them, and a
# summary table at the end (measured efficiency / speed-up next to tools/scaling_model.py's
# prediction). See docs/scaling.md.
#
# Usage (repository root):  tools/gpu-scaling.sh [--dry-run] [PHASE...]   (default: all phases)
#   --dry-run              print the plan (the commands) and exit; needs no GPU
#   --summary              only print the summary of the JSON already under $OUT
# Environment:
#   OUT=dir                          results (default ./scaling-out)
#   SCALING_GPUS=8                   GPUs to use (default: nvidia-smi's count; 8 for --dry-run)
#   SCALING_OPS="gemm syrk trsm"     operators
#   SCALING_WEAK_BLOCK=1024          block of the weak runs
#   SCALING_WEAK_N1=16384            1-GPU size of the weak runs (n = N1 sqrt(P))
#   SCALING_BLOCKS="512 1024"        blocks the strong sweep tries
#   SCALING_SWEEP_N=16384            size of the strong sweep
#   SCALING_STRONG_SIZES="32768 65536"
#   SCALING_STRONG_P="1 2 3 4 5 6 7 8"
#   SCALING_REPEAT=3 SCALING_WARMUP=1    timed repeats / warm-ups of the bench command
#   SCALING_CHECK_N=4096             size of the check phase
#   SCALING_TIMEOUT=1800             seconds allowed for one mpirun
#   SCALING_VISIBLE=0                1: each rank sees only its GPU (CUDA_VISIBLE_DEVICES=local
#                                    rank) instead of all GPUs with the backend binding GPU
#                                    local_rank % device_count (the default; same GPU)
#   SCALING_MPIRUN_ARGS="..."        extra mpirun arguments (e.g. "--map-by numa --bind-to numa")
# Variables named BLASMP_*, NVSHMEM_* (e.g. NVSHMEM_SYMMETRIC_SIZE=40G) and CUPY_* go to every rank.
set -u
cd "$(dirname "$0")/.." || exit 1

dry=0 summary_only=0 phases=()
for a in "$@"; do
  case $a in
    --dry-run) dry=1 ;;
    --summary) summary_only=1 ;;
    bind|test|check|weak|strong) phases+=("$a") ;;
    -h|--help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-scaling.sh: unknown argument $a (phases: bind test check weak strong)" >&2; exit 2 ;;
  esac
done
[ ${#phases[@]} -gt 0 ] || phases=(bind test check weak strong)
has_phase() { local p; for p in "${phases[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }

out=${OUT:-scaling-out}
ops=${SCALING_OPS:-gemm syrk trsm}
weak_block=${SCALING_WEAK_BLOCK:-1024}
weak_n1=${SCALING_WEAK_N1:-16384}
blocks=${SCALING_BLOCKS:-512 1024}
sweep_n=${SCALING_SWEEP_N:-16384}
strong_sizes=${SCALING_STRONG_SIZES:-32768 65536}
strong_p=${SCALING_STRONG_P:-1 2 3 4 5 6 7 8}
repeat=${SCALING_REPEAT:-3}
warmup=${SCALING_WARMUP:-1}
check_n=${SCALING_CHECK_N:-4096}
limit=${SCALING_TIMEOUT:-1800}
py=${PYTHON:-python3}

summary() {
  "$py" - "$out" <<'EOF'
import importlib.util, json, pathlib, sys
out = pathlib.Path(sys.argv[1])
rows = []
for f in sorted(out.glob("*/*.json")):
    try:
        payload = json.loads(f.read_text())
    except (OSError, ValueError) as exc:
        print(f"unreadable {f}: {exc}")
        continue
    for r in payload.get("results", []):
        prof = r.get("profile") or {}
        rows.append(dict(phase=f.parent.name, file=f.name, op=r["op"], n=r["n"], p=r["ranks"],
                         grid=tuple(r["grid"]), block=r["block"][0], t=prof.get("median_s"),
                         check=(r.get("check") or {}).get("passed")))
try:
    spec = importlib.util.spec_from_file_location("scaling_model", "tools/scaling_model.py")
    sm = importlib.util.module_from_spec(spec)
    sys.modules["scaling_model"] = sm
    spec.loader.exec_module(sm)
    machine = sm.Machine()
except Exception as exc:  # the summary must not depend on the model
    print(f"note: no model column ({exc})")
    sm = None
def tf(r):
    return 0.0 if not r["t"] else sm_flops(r) / r["t"] / 1e12
def sm_flops(r):
    n = r["n"]
    return {"gemm": 2.0 * n**3, "syrk": n * (n + 1.0) * n, "trsm": 1.0 * n**3}[r["op"]]
print(f"{'phase':<7}{'op':<6}{'n':>7}{'P':>3} {'grid':<5}{'blk':>5}{'median s':>10}"
      f"{'TF/s':>8}{'TF/s/GPU':>9}{'eff/speed-up':>13}{'model':>7}")
timed = [r for r in rows if r["t"] and r["phase"] in ("weak", "strong", "sweep")]
for r in sorted(timed, key=lambda r: (r["phase"], r["op"], r["n"] if r["phase"] != "weak" else 0,
                                         r["p"], r["grid"], r["block"])):
    rel = mod = ""
    g = r["grid"]
    if r["phase"] == "weak":
        one = [x for x in timed if x["phase"] == "weak" and x["op"] == r["op"] and x["p"] == 1
               and x["block"] == r["block"]]
        if one:
            rel = f"{tf(r) / (r['p'] * tf(one[0])):.3f}"
        if sm:
            n1 = one[0]["n"] if one else 16384
            mod = f"{sm.weak_efficiency(r['op'], g[0], g[1], r['block'], machine, n1):.3f}"
    elif r["phase"] == "strong":
        one = [x for x in timed if x["phase"] == "strong" and x["op"] == r["op"]
               and x["n"] == r["n"] and x["p"] == 1]
        if one:
            rel = f"{one[0]['t'] / r['t']:.2f}x"
        if sm:
            t1 = sm.TIMES[r["op"]](r["n"], 1, 1, r["block"], machine)
            mod = f"{t1 / sm.TIMES[r['op']](r['n'], g[0], g[1], r['block'], machine):.2f}x"
    print(f"{r['phase']:<7}{r['op']:<6}{r['n']:>7}{r['p']:>3} {g[0]}x{g[1]:<3}{r['block']:>5}"
          f"{r['t']:>10.3f}{tf(r):>8.1f}{tf(r) / r['p']:>9.1f}{rel:>13}{mod:>7}")
bad = [r for r in rows if r["check"] is False]
checked = [r for r in rows if r["check"] is not None]
print(f"checks: {len(checked) - len(bad)} of {len(checked)} passed"
      + "".join(f"\n  FAILED {r['op']} n={r['n']} grid {r['grid']} ({r['file']})" for r in bad))
EOF
}

if [ $summary_only = 1 ]; then summary; exit 0; fi

if [ $dry = 1 ]; then
  gpus=${SCALING_GPUS:-8}
else
  gpus=${SCALING_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
  [ "$gpus" -gt 0 ] || { echo "gpu-scaling.sh: nvidia-smi lists no GPU" >&2; exit 1; }
  mkdir -p "$out"/{logs,bind,check,weak,sweep,strong,tests}
  site=${BLASMP_SITE:-/tmp/site}
  if [ -d .whl ] && [ ! -e "$site/.blasmp-installed" ]; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl \
      || { echo "gpu-scaling.sh: installing .whl/*.whl into $site failed" >&2; exit 1; }
    touch "$site/.blasmp-installed"
  fi
fi
export PYTHONPATH=${BLASMP_SITE:-/tmp/site}:$PWD${PYTHONPATH:+:$PYTHONPATH}
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} BLASMP_BACKEND=gpu BLASMP_UNDER_MPIEXEC=1
xvars=(); declare -A seen=()
for v in PYTHONPATH OMP_NUM_THREADS NVSHMEM_DISABLE_NVLS NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST \
         PYTHONUNBUFFERED $(compgen -e | grep -E '^(BLASMP_|NVSHMEM_|CUPY_)' || true); do
  [ -n "${!v+x}" ] && [ -z "${seen[$v]:-}" ] && { xvars+=(-x "$v"); seen[$v]=1; }
done
# shellcheck disable=SC2206  # word splitting of the user's extra arguments is intended
extra=(${SCALING_MPIRUN_ARGS:-})
bindwrap=()
# shellcheck disable=SC2016  # expanded by each rank's shell
[ "${SCALING_VISIBLE:-0}" = 1 ] && \
  bindwrap=(bash -c 'export CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK; exec "$@"' rank)

status=0
# launch P LOG CMD...: one rank per GPU; prints the command (dry run) or runs it under timeout
launch() {
  local p=$1 log=$2; shift 2
  local cmd=(mpirun --allow-run-as-root --bind-to none "${extra[@]}" "${xvars[@]}" -np "$p"
             "${bindwrap[@]}" "$@")
  if [ $dry = 1 ]; then printf '%q ' "${cmd[@]}"; echo; return 0; fi
  if [ "$p" -gt "$gpus" ]; then echo "skip: $p ranks > $gpus GPUs"; return 0; fi
  echo "=== $(date -u +%H:%M:%S) P=$p: $*" | tee -a "$out/logs/run.log"
  timeout -k 30 "$limit" "${cmd[@]}" </dev/null >"$log" 2>&1
  local rc=$?
  tail -n 25 "$log"
  [ $rc -eq 0 ] || { echo "FAILED (rc=$rc): see $log" | tee -a "$out/logs/run.log"; status=1; }
  return $rc
}
bench() {  # [REP=r] bench P NAME OP ARGS...: the bench command, JSON to $out/NAME.json
  local p=$1 name=$2 op=$3; shift 3
  launch "$p" "$out/logs/${name//\//_}.log" "$py" -m blasmp_array.bench "$op" --backend gpu \
    --dtype float64 --repeat "${REP:-$repeat}" --warmup "$warmup" --json "$out/$name.json" "$@"
}
grids_of() {  # grids_of P: every PRxPC with PR*PC = P, comma-separated
  local p=$1 r g=""; for ((r = 1; r <= p; r++)); do ((p % r)) || g+="${g:+,}${r}x$((p / r))"; done
  echo "$g"
}
weak_grids() { case $1 in 1) echo 1x1 ;; 2) echo 1x2,2x1 ;; 4) echo 2x2,1x4 ;; 8) echo 2x4,4x2 ;; esac; }
weak_n() {  # N1 sqrt(P) rounded to a multiple of the block
  "$py" -c "import math,sys; p,b,n1=map(int,sys.argv[1:]); print(max(b, round(n1*math.sqrt(p)/b)*b))" \
    "$1" "$2" "$weak_n1"
}
pcounts() { local p; for p in "$@"; do [ "$p" -le "$gpus" ] && echo "$p"; done; }

echo "gpu-scaling.sh: $gpus GPU(s), phases: ${phases[*]}, output: $out$([ $dry = 1 ] && echo ' (dry run)')"

if has_phase bind; then
  for p in $(pcounts 2 4 8); do
    # shellcheck disable=SC2016
    launch "$p" "$out/bind/np$p.log" "$py" -c 'import os, blasmp_array as bm
g = bm.ProcessGrid(backend="gpu"); vis = os.environ.get("CUDA_VISIBLE_DEVICES")
ids = g.comm.allgather(int(vis) if vis else g.backend.device_id)
if g.rank == 0:
    print("ranks -> GPUs:", ids)
    assert sorted(ids) == list(range(g.size)), "each rank must have its own GPU (local_rank)"'
  done
fi

if has_phase test; then
  ranks=$(pcounts 2 4 8 | xargs)
  cmd=(env BLASMP_GPU_TEST_RANKS="$ranks" OUT="$out/tests" tools/gpu-node-test.sh tests/mpi -m "not full_sweep")
  if [ $dry = 1 ]; then printf '%q ' "${cmd[@]}"; echo
  else "${cmd[@]}" 2>&1 | tee "$out/logs/tests.log"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1; fi
fi

if has_phase check; then
  for p in $(pcounts 1 2 4 8); do
    for op in $ops; do
      bench "$p" "check/$op-np$p" "$op" --check --sweep --sizes "$check_n" --grids "$(grids_of "$p")" \
        --blocks "${blocks// /,}" --quiet
    done
  done
fi

if has_phase weak; then
  for p in $(pcounts 1 2 4 8); do
    n=$(weak_n "$p" "$weak_block")
    for op in $ops; do
      bench "$p" "weak/$op-np$p" "$op" --profile --sweep --sizes "$n" --grids "$(weak_grids "$p")" \
        --blocks "$weak_block"
    done
  done
fi

if has_phase strong; then
  # shellcheck disable=SC2086  # a list of rank counts
  for p in $(pcounts $strong_p); do
    for op in $ops; do
      # a small sweep over the grids of P and the blocks picks the configuration
      REP=2 bench "$p" "sweep/$op-np$p" "$op" --profile --sweep --sizes "$sweep_n" \
        --grids "$(grids_of "$p")" --blocks "${blocks// /,}"
      if [ $dry = 1 ]; then
        grid="<best grid of sweep/$op-np$p.json>" block="<best block>"
      else
        read -r grid block < <("$py" - "$out/sweep/$op-np$p.json" <<'EOF'
import json, sys
try:
    res = [r for r in json.load(open(sys.argv[1]))["results"] if (r.get("profile") or {}).get("median_s")]
    best = min(res, key=lambda r: r["profile"]["median_s"])
    print(f"{best['grid'][0]}x{best['grid'][1]} {best['block'][0]}")
except (OSError, ValueError, KeyError):
    print("- -")
EOF
)
        [ "$grid" = - ] && { echo "no sweep result for $op P=$p: strong runs skipped"; status=1; continue; }
      fi
      for n in $strong_sizes; do
        bench "$p" "strong/$op-n$n-np$p" "$op" --profile --n "$n" --grid "$grid" --block "$block"
      done
    done
  done
fi

if [ $dry = 0 ]; then
  echo "=== summary ($out)"
  summary | tee "$out/summary.txt"
fi
exit $status
