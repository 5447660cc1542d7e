#!/bin/bash
# Run a command as N MPI ranks on one GPU node, sharing its GPUs; CUDA MPS is started when the
# ranks outnumber the GPUs (NVSHMEM needs MPS for signal_wait with several PEs per GPU) and
# stopped at the end.
#
# Usage (from the repository root):  tools/node-run.sh N COMMAND [ARGS...]
#   e.g. tools/node-run.sh 4 python3 -m pytest tests/mpi -m "not full_sweep"
# Wheels in .whl/ (downloaded on a machine with network by ../shared/gpu/fetch-wheels.sh or
# pip download) are installed once into /tmp/site, without network. The package itself is used
# from the checkout (PYTHONPATH=$PWD). NVLink multicast stays off (NVSHMEM_DISABLE_NVLS=1,
# NCCL_NVLS_ENABLE=0). Environment variables named BLASMP_* and NVSHMEM_* are passed to every rank.
set -u
n=${1:?usage: tools/node-run.sh N COMMAND [ARGS...]}; shift
[ $# -gt 0 ] || { echo "node-run.sh: no command given" >&2; exit 2; }
site=${BLASMP_SITE:-/tmp/site}
if [ -d .whl ] && [ ! -e "$site/.blasmp-installed" ]; then
  # three tries 10 s apart: on a freshly started node the first install once found a wheel
  # "invalid" that the same call installed a minute later (files still arriving?); the sizes
  # are printed with each failure to tell that from a broken wheel
  for try in 1 2 3; do
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
      .whl/*.whl && { touch "$site/.blasmp-installed"; break; }
    echo "node-run.sh: installing .whl/*.whl into $site failed (try $try of 3); sizes:" >&2
    ls -l .whl >&2
    [ "$try" -lt 3 ] || exit 1
    sleep 10
  done
fi
export PYTHONPATH=$site:$PWD${PYTHONPATH:+:$PYTHONPATH}
# NCCL, cuBLASMp and cuSOLVERMp (nvidia/cu13/lib) brought as wheels (tools/fetch-cublasmp-
# wheels.sh: the image's NCCL 2.28 is too old for cuBLASMp) are found by the dynamic linker
# before the image's copies: it searches LD_LIBRARY_PATH before a library's RUNPATH, so every
# library of the process binds to one NCCL
for d in "$site/nvidia/cublasmp/cu13/lib" "$site/nvidia/cu13/lib" "$site/nvidia/nccl/lib"; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
done
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# library kernels loaded at start: a lazy load inside a pipeline can deadlock (backends/_cuda_env.py)
export CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-EAGER}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$gpus" -gt 0 ] || { echo "node-run.sh: nvidia-smi lists no GPU" >&2; exit 1; }
mps=0
if [ "$n" -gt "$gpus" ]; then
  export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/mps-pipe}
  export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/mps-log}
  export NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  # the pipe directory keeps its `control` pipe after the daemon quits: trust the pid file
  pidf="$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
  if [ -s "$pidf" ] && kill -0 "$(cat "$pidf")" 2>/dev/null; then
    echo "node-run.sh: MPS already running ($CUDA_MPS_PIPE_DIRECTORY)" >&2
  elif nvidia-cuda-mps-control -d; then
    mps=1
    for _ in $(seq 50); do [ -s "$pidf" ] && break; sleep 0.1; done
  else
    echo "node-run.sh: could not start CUDA MPS (nvidia-cuda-mps-control -d)" >&2
  fi
fi
stop_mps() { [ "$mps" = 1 ] && echo quit | nvidia-cuda-mps-control; mps=0; }
trap stop_mps EXIT
vars=(); declare -A seen=()
for v in PYTHONPATH OMP_NUM_THREADS NVSHMEM_DISABLE_NVLS NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST \
         PYTHONUNBUFFERED CUDA_MODULE_LOADING CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY LD_LIBRARY_PATH \
         $(compgen -e | grep -E '^(BLASMP_|NVSHMEM_|CUPY_)' || true); do
  [ -n "${!v+x}" ] && [ -z "${seen[$v]:-}" ] && { vars+=(-x "$v"); seen[$v]=1; }
done
# in the background, so that a TERM (e.g. from `timeout`) stops mpirun and MPS at once
mpirun --allow-run-as-root --oversubscribe --bind-to none "${vars[@]}" -np "$n" "$@" </dev/null &
child=$!
trap 'kill -TERM "$child" 2>/dev/null; wait "$child"; stop_mps; exit 143' TERM INT
wait "$child"
rc=$?
stop_mps
exit $rc
