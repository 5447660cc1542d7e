#!/bin/bash
# The performance runs of the GPU backend on ONE GPU (docs/performance.md), with the bench command:
#   1 rank   GEMM and TRSM, float64, n=$N, against CuPy (cupy.matmul, cupyx solve_triangular)
#            and, with BASELINES=cupy,cublasmp (wheels of tools/fetch-cublasmp-wheels.sh),
#            cuBLASMp, measured in the same run
#   4 ranks  on the same GPU through CUDA MPS, 2x2 grid: GEMM aggregate rate (target >= 85% of the
#            1-rank rate), and one traced run (per-rank, per-stream CUDA-event timeline)
#   face1    the NumPy face, 1 rank, n=$N, default block (256) as a user would: A @ B, A.T @ A,
#            solve_triangular (defaults), trmm, syr2k, symm, against CuPy's a @ b, a.T @ a, cupyx
#            solve_triangular, tril(t) @ b, a @ b.T + b @ a.T, s @ b in the same run
#   faces    the same at n=$NSMALL (4096), checked against NumPy (--check)
#   face4    A.T @ A and solve_triangular on 4 ranks (2x2, MPS), n=$N, default block
#   redist4  A.T.resolve() and A.redistribute(block=1024) from block 2048 on 4 ranks (2x2, MPS),
#            n=$N: GB/s of the matrix moved (docs/redistribution.md), every element checked (--check)
# Usage (repository root, wheels in .whl/):  OUT=/some/dir tools/gpu-perf.sh [PHASE...]
#   trsm4/chol4  TRSM / Cholesky on 4 ranks (2x2, MPS), n=$N, block $BLOCK4
#   chol1/lu1    Cholesky (n=$N) / LU (n=$NSMALL) on 1 rank, default block, against CuPy
#   lu4          LU on 4 ranks (2x2, MPS), n=$N, block $BLOCK4
#   lu1big       LU on 1 rank at n=$N against cupyx lu_factor
#   views4       A[1:, 1:] @ B[1:, 1:] (window views, read in place by GEMM), the same on copies of
#                the windows, A @ B and sum(axis=0) on 4 ranks (2x2, MPS), n=$N, default block
#   prof1        tools/profile_face.py at n=$NSMALL: per-call host profile of the face (docs/performance.md);
#                $PROF_OPS names the calls (default: all)
#   puts4        tools/put_bandwidth.py on 4 ranks (MPS): the NVSHMEM put limit beside redist4
#   lupanel1     tools/getrf_panel_sweep.py at n=$NSMALL and $N: the one-rank LU's panel width
#   defaults1/defaults4  tools/defaults_table.py on 1 / 4 ranks (MPS), n=$N: A @ B, np.linalg.cholesky,
#                lu_factor, np.linalg.solve, np.linalg.inv and A.T @ A with every argument at its default
#                (the working block of the factorisations included), each beside CuPy's call on rank 0 (--cupy)
#   blocks4      tools/factor_block_sweep.py on 4 ranks (2x2, MPS), n=$N, blocks 256-2048: the factorisations'
#                working block (docs/defaults.md: the GPU row of its TABLE)
#   qrpanel1     tools/geqrf_panel_sweep.py at n=$NSMALL and $N: the one-rank QR's look-ahead (panel
#                width, or the library's one geqrf) and how its Q is formed, against cupy.linalg.qr
#   qrtall1      tools/cholqr_sweep.py, 1048576 x 256: the tall-skinny QR's kernels alone (SYRK or
#                batched GEMM Gram, TRSM or split solve) and the call per configuration, against CuPy
#   proflu4      tools/profile_lu.py on 4 ranks (2x2, MPS), n=$N, block $BLOCK4: rank 0's host profile
#   tracelu1     one traced LU call on 1 rank, n=$N (the look-ahead's timeline)
#   qrdefault    np.linalg.qr at n=$N with its default block, 1 rank beside cupy.linalg.qr, then 2x2
#   qrsmall      np.linalg.qr at n=$NSMALL on 1 rank, default block, against cupy.linalg.qr (timed: --check would only check)
#   traceqr1     one traced np.linalg.qr call on 1 rank, n=$N, and its per-stream summary (tools/trace_summary.py)
#   tracest4 / tracechol4 / tracelu4  one traced call on 4 ranks (2x2, MPS), n=$N: solve_triangular
#                (default block, as face4), Cholesky and LU (block $BLOCK4); the per-step profile of
#                the 4-rank misses (summarise with tools/trace_summary.py)
#   traceqr4     one traced np.linalg.qr call on 4 ranks (2x2, MPS, block 1024), n=$N, and its
#                per-stream summary
#   door1        the data door on 1 rank, n=$N, default block (256), float64: each row of $DOOR_ROWS
#                (bm.random.standard_normal/uniform/random, from_numpy, to_numpy, to_numpy(root=0),
#                to_zarr, from_zarr, to_dask().compute()) checked (--check) and timed against its
#                peers in the same run (cupy.random, cupy.asarray, cupy.asnumpy, Dask and zarr with
#                our store's codecs, our to_numpy); one bench command per row, then
#                tools/door_summary.py against the targets (perf-door1.json: every row in $OUT, so
#                the rows may be split over calls with DOOR_ROWS and one $OUT)
#   door4        the same on 4 ranks (2x2, MPS); its summary also compares it with door1's run
#                ($OUT/perf-door1.json, when there: run door1 first, in the same $OUT)
#   vectors1/vectors4  tools/bench_vectors.py on 1 / 4 ranks (2x2, MPS), n=$N: the small calls (A @ x,
#                solve with a vector, element-wise, sums, norms) against CuPy's, then rank 0's host
#                profile of A @ x (docs/numpy.md, "Vectors"); vectors4 then times A @ x and x @ A
#                by the host route too (--matvec-route host), in the same call
#   qr1          QR (n=$N, block 1024), tall-skinny QR (1048576 x 256) and least squares
#                (32768 x 4096, one right-hand side) on 1 rank against CuPy; the tall-skinny and
#                least-squares rows checked (the testers' ratios on the host; n=$N's would take minutes)
#   qr4          the same calls on 4 ranks (2x2, MPS; the tall-skinny QR also on 4x1, whose
#                processes hold whole rows), without CuPy (compare with qr1)
#   qrsq         np.linalg.qr at n=$N (block 1024) on 1 rank against CuPy, then on 4 ranks (2x2, MPS,
#                every rank on the one GPU: the gathered route, docs/qr.md), in one call
#   spectral1    eigh and eigvalsh at n=$NSMALL (checked) and $N, svd at n=8192 (LAPACK's route and
#                method='polar', checked), 1 rank, against CuPy
#   spectral4    the same calls on 4 ranks (2x2, MPS; checked at n=$NSMALL), without CuPy (compare
#                with spectral1; the host checks of n=$N would take minutes)
#   transpose1   A.T.resolve() on 1 rank at n=$NSMALL and $N beside cupy.ascontiguousarray(a.T), every
#                element checked (the one-process transposing copy, docs/redistribution.md)
#   eigvec1      tools/eigvec_parts.py on 1 rank at n in $EIGVEC_N (default 4096 8192 $N): the parts of
#                the device eigenvector route (stage 1, chase, the back-transformations; stedc needs a
#                cuSOLVER with cusolverDnXstedc) one by one, beside cupy.linalg.eigh and eigvalsh
#   eigroutes4   tools/profile_eigh.py on 4 ranks (2x2, MPS), eigvalsh at n=$N, block 64: the gathered
#                route (the root's one-process device two-stage) against the distributed two-stage
#                (which of the two 'auto' should take above GATHER_N on the GPU; docs/eigh.md)
#   phases: gemm1 trsm1 gemm4 trsm4 trace4 face1 faces face4 redist4 chol1 chol4 lu1 lu4 lu1big views4
#           prof1 puts4 lupanel1 blocks4 qrpanel1 qrtall1 defaults1 defaults4 proflu4 door1 door4 vectors1 vectors4 qr1 qr4 qrsq qrsmall qrdefault spectral1 spectral4 eigvec1 eigroutes4 transpose1
#           tracelu1 traceqr1 tracest4 tracechol4 tracelu4 traceqr4
#           (default: gemm1 trsm1 gemm4 trace4)
#   N=16384  NSMALL=4096  BLOCK=2048  BLOCK4=2048  REPEAT=5  PERF_TIMEOUT=150 (seconds per bench command)
#   BASELINES=cupy (--baselines of the 1-rank phases)
#   NODE_RUN=tools/node-run.sh (the launcher of every run: tests/test_sweep_tools.py puts a stub
#   there to walk every phase without a GPU)
#   DOOR_ROWS=random,random_uniform,random_random,from_numpy,to_numpy,to_numpy_root,to_zarr,from_zarr,to_dask
#   DOOR_REPEAT=3  DOOR_TIMEOUT=240 (seconds per row)  DOOR_BASELINES=cupy,dask,zarr  DOOR_DIR (the zarr
#   stores, seen by every rank; default: /tmp of rank 0)
# The bench times our calls only with --profile once --check is given (--check alone checks):
# a checked row passes both.
# Results: $OUT/perf-<phase>.json (the bench command's records), .log next to them; a summary last.
set -u
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-gpu-perf-out}
mkdir -p "$out"
node_run=${NODE_RUN:-tools/node-run.sh}
n=${N:-16384} nsmall=${NSMALL:-4096} block=${BLOCK:-2048} block4=${BLOCK4:-2048} repeat=${REPEAT:-5}
EIGVEC_N=${EIGVEC_N:-4096 8192 $n}
limit=${PERF_TIMEOUT:-150} baselines=${BASELINES:-cupy}
export BLASMP_SIGNAL_TIMEOUT=${BLASMP_SIGNAL_TIMEOUT:-60}
face=${FACE:-matmul,matmul_ata,solve_triangular,trsm,trmm,syr2k,symm}
phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(gemm1 trsm1 gemm4 trace4)
summary=()
bench() {  # phase ranks bench-args...
  local phase=$1 ranks=$2; shift 2
  timeout -k 10 "$limit" "$node_run" "$ranks" python3 -m blasmp_array.bench "$@" \
    --backend gpu --json "$out/perf-$phase.json" > "$out/perf-$phase.log" 2>&1
  summary+=("$phase (np=$ranks: $*): rc=$?")
}
door_rows=${DOOR_ROWS:-random,random_uniform,random_random,from_numpy,to_numpy,to_numpy_root,to_zarr,from_zarr,to_dask}
door() {  # phase ranks bench-args...: one bench command per row (a slow row cannot stop the others)
  local phase=$1 ranks=$2 limit=${DOOR_TIMEOUT:-240} row files=() rows; shift 2
  IFS=, read -ra rows <<< "$door_rows"
  for row in "${rows[@]}"; do
    rm -f "$out/perf-$phase.$row.json"
    bench "$phase.$row" "$ranks" "$row" --n "$n" --repeat "${DOOR_REPEAT:-3}" --warmup 0 --check \
      --profile --compare --baselines "${DOOR_BASELINES:-cupy,dask,zarr}" ${DOOR_DIR:+--dir "$DOOR_DIR"} "$@"
  done
  # every row in $OUT, so that the rows may be spread over several calls (DOOR_ROWS) with one $OUT
  for f in "$out/perf-$phase".*.json; do [ -s "$f" ] && files+=("$f"); done
  [ ${#files[@]} -gt 0 ] || { echo "no row of $phase wrote its JSON" > "$out/perf-$phase.log"; return; }
  python3 tools/door_summary.py merge "$out/perf-$phase.json" "${files[@]}"
  local against=(--one "$out/perf-$phase.json")
  if [ "$phase" = door4 ]; then
    against=(--four "$out/perf-door4.json")
    [ -s "$out/perf-door1.json" ] && against=(--one "$out/perf-door1.json" "${against[@]}")
  fi
  if [ "$phase" = door4 ] && [ ! -s "$out/perf-door1.json" ]; then
    echo "door4: no perf-door1.json in $out (run door1 first): 4-rank rows only" > "$out/perf-$phase.log"
    python3 tools/bench_ratios.py "$out/perf-door4.json" >> "$out/perf-$phase.log" 2>&1
  else
    python3 tools/door_summary.py gpu "${against[@]}" --json "$out/summary-$phase.json" \
      > "$out/perf-$phase.log" 2>&1
  fi
}
for p in "${phases[@]}"; do
  case $p in
    gemm1) bench gemm1 1 gemm --n "$n" --block "$block" --repeat "$repeat" --compare --baselines "$baselines" ;;
    trsm1) bench trsm1 1 trsm --n "$n" --block "$block" --repeat "$repeat" --compare --baselines "$baselines" ;;
    gemm4) bench gemm4 4 gemm --n "$n" --block "$block4" --grid 2x2 --repeat "$repeat" ;;
    trsm4) bench trsm4 4 trsm --n "$n" --block "$block4" --grid 2x2 --repeat "$repeat" ;;
    chol1) bench chol1 1 cholesky --n "$n" --repeat "$repeat" --compare --baselines "$baselines" ;;
    chol4) bench chol4 4 cholesky --n "$n" --block "$block4" --grid 2x2 --repeat "$repeat" ;;
    lu4) bench lu4 4 lu --n "$n" --block "$block4" --grid 2x2 --repeat "$repeat" ;;
    lu1) bench lu1 1 lu --n "$nsmall" --repeat "$repeat" --compare --baselines "$baselines" ;;
    lu1big) bench lu1big 1 lu --n "$n" --repeat "$repeat" --compare --baselines "$baselines" ;;
    views4) bench views4 4 matmul_view,matmul_view_copy,matmul,sum_axis0 --n "$n" --grid 2x2 --repeat "$repeat" ;;
    prof1) BLASMP_BACKEND=gpu timeout -k 10 "$limit" "$node_run" 1 python3 tools/profile_face.py \
             --n "$nsmall" ${PROF_OPS:-} > "$out/perf-prof1.log" 2>&1
           summary+=("prof1 (np=1: tools/profile_face.py --n $nsmall): rc=$?") ;;
    lupanel1) BLASMP_BACKEND=gpu timeout -k 10 "$limit" "$node_run" 1 python3 tools/getrf_panel_sweep.py \
                --n "$nsmall" "$n" --config 512 768 1024 1536 2048 0 --repeat "$repeat" > "$out/perf-lupanel1.log" 2>&1
              summary+=("lupanel1 (np=1: tools/getrf_panel_sweep.py --n $nsmall $n): rc=$?") ;;
    defaults1|defaults4) r=${p#defaults}
        BLASMP_BACKEND=gpu timeout -k 10 "$limit" "$node_run" "$r" python3 tools/defaults_table.py \
          --n "$n" --repeat "$repeat" --calls matmul,cholesky,lu_factor,solve,inv,ata --cupy > "$out/perf-$p.log" 2>&1
        summary+=("$p (np=$r: tools/defaults_table.py --n $n): rc=$?") ;;
    blocks4) BLASMP_BACKEND=gpu timeout -k 10 "$limit" "$node_run" 4 python3 tools/factor_block_sweep.py \
               --n "$n" --blocks 256 512 1024 2048 --repeat "$repeat" > "$out/perf-blocks4.log" 2>&1
             summary+=("blocks4 (np=4: tools/factor_block_sweep.py --n $n): rc=$?") ;;
    qrpanel1) BLASMP_BACKEND=gpu timeout -k 10 "$limit" "$node_run" 1 python3 tools/geqrf_panel_sweep.py \
                --n "$nsmall" 8192 "$n" --panel 512 1024 2048 0 --q-block 0 1024 --panel-factor cholqr lapack --repeat "$repeat" > "$out/perf-qrpanel1.log" 2>&1
              summary+=("qrpanel1 (np=1: tools/geqrf_panel_sweep.py --n $nsmall $n): rc=$?") ;;
    vectors1|vectors4) np_=${p#vectors}
             BLASMP_BACKEND=gpu timeout -k 10 "$limit" "$node_run" "$np_" python3 tools/bench_vectors.py \
               --n "$n" --profile "A @ x" > "$out/perf-$p.log" 2>&1
             summary+=("$p (np=$np_: tools/bench_vectors.py --n $n --profile 'A @ x'): rc=$?")
             if [ "$np_" != 1 ]; then  # the host route of A @ x in the same run, for comparison
               BLASMP_BACKEND=gpu timeout -k 10 "$limit" "$node_run" "$np_" python3 tools/bench_vectors.py \
                 --n "$n" --ops "A @ x" "x @ A" --matvec-route host >> "$out/perf-$p.log" 2>&1
               summary+=("$p (np=$np_: tools/bench_vectors.py --n $n --matvec-route host): rc=$?")
             fi ;;
    qrtall1) BLASMP_BACKEND=gpu timeout -k 10 "$limit" "$node_run" 1 python3 tools/cholqr_sweep.py \
               --m 1048576 --n 256 --config 0:0 16384:32 0:inv 4096:inv 16384:inv --repeat "$repeat" \
               > "$out/perf-qrtall1.log" 2>&1
             summary+=("qrtall1 (np=1: tools/cholqr_sweep.py --m 1048576 --n 256): rc=$?") ;;
    eigvec1) for m in $EIGVEC_N; do
               BLASMP_BACKEND=gpu timeout -k 10 "$limit" "$node_run" 1 python3 tools/eigvec_parts.py \
                 --n "$m" --repeat 3 > "$out/perf-eigvec1-$m.log" 2>&1
               summary+=("eigvec1 (np=1: tools/eigvec_parts.py --n $m): rc=$?")
             done ;;
    eigroutes4) for m in gathered two-stage; do
                  BLASMP_BACKEND=gpu timeout -k 10 "$limit" "$node_run" 4 python3 tools/profile_eigh.py \
                    --n "$n" --block 64 --grid 2x2 --op eigvalsh --method "$m" --repeat 3 > "$out/perf-eigroutes4-$m.log" 2>&1
                  summary+=("eigroutes4 (np=4: tools/profile_eigh.py --n $n --op eigvalsh --method $m): rc=$?")
                done
                cat "$out"/perf-eigroutes4-*.log > "$out/perf-eigroutes4.log" ;;
    proflu4) BLASMP_BACKEND=gpu timeout -k 10 "$limit" "$node_run" 4 python3 tools/profile_lu.py \
               --n "$n" --block "$block4" --grid 2x2 > "$out/perf-proflu4.log" 2>&1
             summary+=("proflu4 (np=4: tools/profile_lu.py --n $n --block $block4): rc=$?") ;;
    puts4) BLASMP_BACKEND=gpu timeout -k 10 "$limit" "$node_run" 4 python3 tools/put_bandwidth.py \
             --mib 1024 > "$out/perf-puts4.log" 2>&1
           summary+=("puts4 (np=4: tools/put_bandwidth.py --mib 1024): rc=$?") ;;
    trace4) bench trace4 4 gemm --n "$n" --block "$block4" --grid 2x2 --repeat 1 \
              --trace "$out/perf-trace4.trace.json" ;;
    tracest4) bench tracest4 4 solve_triangular --n "$n" --grid 2x2 --repeat 1 \
                --trace "$out/perf-tracest4.trace.json" ;;
    tracechol4) bench tracechol4 4 cholesky --n "$n" --block "$block4" --grid 2x2 --repeat 1 \
                  --trace "$out/perf-tracechol4.trace.json" ;;
    tracelu1) bench tracelu1 1 lu --n "$n" --repeat 1 --trace "$out/perf-tracelu1.trace.json" ;;
    traceqr1) bench traceqr1 1 qr --n "$n" --block 1024 --repeat 1 --trace "$out/perf-traceqr1.trace.json"
              python3 tools/trace_summary.py "$out/perf-traceqr1.trace.json" >> "$out/perf-traceqr1.log" 2>&1 ;;
    tracelu4) bench tracelu4 4 lu --n "$n" --block "$block4" --grid 2x2 --repeat 1 \
                --trace "$out/perf-tracelu4.trace.json" ;;
    traceqr4) bench traceqr4 4 qr --n "$n" --block 1024 --grid 2x2 --repeat 1 --trace "$out/perf-traceqr4.trace.json"
              python3 tools/trace_summary.py "$out/perf-traceqr4.trace.json" >> "$out/perf-traceqr4.log" 2>&1 ;;
    face1) bench face1 1 "$face" --n "$n" --repeat "$repeat" --compare --baselines "$baselines" ;;
    faces) bench faces 1 "$face" --n "$nsmall" --repeat "$repeat" --check --profile \
             --compare --baselines "$baselines" ;;
    face4) bench face4 4 matmul_ata,solve_triangular --n "$n" --grid 2x2 --repeat "$repeat" ;;
    transpose1) for m in "$nsmall" "$n"; do
                  bench "transpose1.n$m" 1 transpose --n "$m" --repeat "$repeat" --check --profile \
                    --compare --baselines cupy
                done
                cat "$out/perf-transpose1.n$nsmall.log" "$out/perf-transpose1.n$n.log" \
                  > "$out/perf-transpose1.log" 2>/dev/null ;;
    redist4) bench redist4 4 transpose,redistribute --n "$n" --block 2048 --grid 2x2 \
               --to-grid 2x2 --to-block 1024 --repeat "$repeat" --check --profile ;;
    qr1) bench qr1 1 qr --n "$n" --block 1024 --repeat "$repeat" --compare --baselines "$baselines"
         bench qr1tall 1 qr_tall --m 1048576 --n 256 --repeat "$repeat" --check --profile --compare --baselines "$baselines"
         bench qr1lstsq 1 lstsq --m 32768 --n 4096 --k 1 --repeat "$repeat" --check --profile --compare --baselines "$baselines" ;;
    qrsq) bench qrsq1 1 qr --n "$n" --block 1024 --repeat "$repeat" --compare --baselines "$baselines"
          bench qrsq4 4 qr --n "$n" --block 1024 --grid 2x2 --repeat "$repeat"
          cat "$out/perf-qrsq1.log" "$out/perf-qrsq4.log" > "$out/perf-qrsq.log" 2>/dev/null ;;
    qrdefault) bench qrdefault1 1 qr --n "$n" --repeat "$repeat" --compare --baselines "$baselines"
               bench qrdefault4 4 qr --n "$n" --grid 2x2 --repeat "$repeat"
               cat "$out/perf-qrdefault1.log" "$out/perf-qrdefault4.log" > "$out/perf-qrdefault.log" 2>/dev/null ;;
    qrsmall) bench qrsmall 1 qr --n "$nsmall" --repeat "$repeat" --compare --baselines "$baselines" ;;
    qr4) bench qr4 4 qr --n "$n" --block 1024 --grid 2x2 --repeat "$repeat"
         bench qr4tall 4 qr_tall --m 1048576 --n 256 --grid 2x2 --repeat "$repeat" --check --profile
         bench qr4tallcol 4 qr_tall --m 1048576 --n 256 --grid 4x1 --repeat "$repeat" --check --profile
         bench qr4lstsq 4 lstsq --m 32768 --n 4096 --k 1 --grid 2x2 --repeat "$repeat" --check --profile ;;
    spectral1) bench spectral1small 1 eigh,eigvalsh --n "$nsmall" --repeat 3 --check --profile --compare --baselines "$baselines"
               bench spectral1 1 eigh,eigvalsh --n "$n" --repeat 3 --compare --baselines "$baselines"
               bench spectral1svd 1 svd --n 8192 --repeat 3 --compare --baselines "$baselines"
               bench spectral1polar 1 svd_polar --n 8192 --repeat 3 --check --profile --compare --baselines "$baselines" ;;
    spectral4) bench spectral4small 4 eigh,eigvalsh,svd --n "$nsmall" --grid 2x2 --repeat 3 --check --profile
               bench spectral4 4 eigh,eigvalsh --n "$n" --grid 2x2 --repeat 3
               bench spectral4svd 4 svd --n 8192 --grid 2x2 --repeat 3 ;;
    door1) door door1 1 ;;
    door4) door door4 4 --grid 2x2 ;;
    *) echo "gpu-perf.sh: unknown phase $p (gemm1 trsm1 gemm4 trsm4 trace4 face1 faces face4 redist4 chol1 chol4 lu1 lu4 lu1big views4 prof1 puts4 lupanel1 blocks4 qrpanel1 qrtall1 defaults1 defaults4 proflu4 tracelu1 traceqr1 tracest4 tracechol4 tracelu4 traceqr4 door1 door4 vectors1 vectors4 qr1 qr4 qrsq qrsmall qrdefault spectral1 spectral4 eigvec1 eigroutes4 transpose1)" >&2; exit 2 ;;
  esac
done
echo "=== GPU performance summary (logs in $out)"
printf '%s\n' "${summary[@]}"
for p in "${phases[@]}"; do
  echo "--- $p"
  case $p in door* | transpose1) cat "$out/perf-$p.log" ;; *) tail -n 12 "$out/perf-$p.log" ;; esac
done
