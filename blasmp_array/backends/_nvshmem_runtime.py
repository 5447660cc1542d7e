"""The process-wide GPU runtime of the GPU backend: binding a GPU, the MPS check, NVSHMEM
initialisation (explicit, once per process, UID bootstrap over mpi4py) and its finalisation at
exit.

NVSHMEM can be initialised only once per process, over one set of processes (its PEs). The first
:class:`~blasmp_array.backends.gpu.GPUBackend` initialises it over its communicator (PE ``i`` is
rank ``i`` of that communicator); later backends must use a congruent communicator (the same
processes in the same order, e.g. a ``Dup``).
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .base import env_flag

__all__ = ["Runtime", "ensure_runtime", "mps_running", "mps_problem"]

#: name of the file that nvidia-cuda-mps-control writes into its pipe directory while it runs
MPS_PID_FILE = "nvidia-cuda-mps-control.pid"


def mps_pipe_directory(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return env.get("CUDA_MPS_PIPE_DIRECTORY") or "/tmp/nvidia-mps"


def mps_running(env: Mapping[str, str] | None = None) -> bool:
    """True when a CUDA MPS control daemon runs for ``$CUDA_MPS_PIPE_DIRECTORY``.

    The pipe directory keeps its ``control`` pipe after the daemon quits (seen on the H200 node),
    so the daemon's pid file and the liveness of that pid decide. ``BLASMP_ASSUME_MPS=1``
    overrides the check (for sites that run MPS where this process cannot see its files).
    """
    env = os.environ if env is None else env
    if env_flag("BLASMP_ASSUME_MPS", env):
        return True
    pid_file = os.path.join(mps_pipe_directory(env), MPS_PID_FILE)
    try:
        with open(pid_file) as f:
            pid = int(f.read().strip() or "0")
    except (OSError, ValueError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True  # alive, owned by another user
    except OSError:
        return False
    return True


def mps_problem(ranks_on_node: int, gpus_on_node: int, running: bool) -> str | None:
    """The error message when ``ranks_on_node`` processes would share ``gpus_on_node`` GPUs
    without CUDA MPS, else None."""
    if ranks_on_node <= gpus_on_node or running:
        return None
    return (
        f"{ranks_on_node} MPI ranks share {gpus_on_node} GPU(s) on this node but CUDA MPS is not "
        "running: NVSHMEM supports several processes per GPU only under MPS (without it "
        "signal_wait aborts with 'not supported with limited MPG'). Start MPS before mpirun: "
        "`export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log "
        "NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1; nvidia-cuda-mps-control -d` "
        "(pass these variables to every rank, e.g. `mpirun -x CUDA_MPS_PIPE_DIRECTORY ...`; stop "
        "it with `echo quit | nvidia-cuda-mps-control`), or run through tools/node-run.sh, which "
        "does all of this; or use at most one rank per GPU."
    )


class Runtime:
    """What :func:`ensure_runtime` set up: the bound device and NVSHMEM's PEs."""

    def __init__(self, comm: Any, device_id: int, ranks_on_node: int, gpus_on_node: int) -> None:
        self.comm = comm
        self.device_id = device_id
        self.ranks_on_node = ranks_on_node
        self.gpus_on_node = gpus_on_node
        self.at_exit: list[Callable[[], None]] = []
        self.finalized = False


_runtime: Runtime | None = None


def ensure_runtime(comm: Any) -> Runtime:
    """Bind this process's GPU and initialise NVSHMEM over ``comm`` (collective, once)."""
    global _runtime
    from mpi4py import MPI

    if _runtime is not None:
        if _runtime.finalized:
            raise RuntimeError("NVSHMEM was already finalised in this process")
        same = MPI.Comm.Compare(_runtime.comm, comm) in (MPI.IDENT, MPI.CONGRUENT)
        if not comm.allreduce(same, op=MPI.LAND):
            raise RuntimeError(
                "the GPU backend's NVSHMEM runtime was initialised over another communicator; "
                "NVSHMEM is initialised once per process, so every GPU backend must use the same "
                "processes in the same order (build grids over that communicator)"
            )
        return _runtime

    from ._cuda_env import prefer_eager_loading

    prefer_eager_loading()
    import cupy

    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        ndev = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # noqa: BLE001 - reported below, identically on every rank
        ndev, why = 0, f"{type(exc).__name__}: {exc}"
    else:
        why = ""
    problem = None
    if ndev == 0:
        problem = f"the GPU backend found no CUDA device on rank {comm.Get_rank()} ({why})"
    else:
        problem = mps_problem(local.Get_size(), ndev, mps_running())
    problems = [p for p in comm.allgather(problem) if p]
    if problems:
        local.Free()
        raise RuntimeError(problem or f"on another rank: {problems[0]}")

    os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
    if local.Get_size() > ndev:
        os.environ.setdefault("NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "1")
    device_id = local.Get_rank() % ndev
    ranks_on_node = local.Get_size()
    local.Free()
    cupy.cuda.Device(device_id).use()
    from cuda.core import Device

    dev = Device(device_id)
    dev.set_current()
    import nvshmem.core as nvshmem

    # UID bootstrap: rank 0 creates the id, MPI broadcasts it
    uid = nvshmem.get_unique_id(empty=comm.Get_rank() != 0)
    comm.Bcast(uid._data.view(np.int8), root=0)
    nvshmem.init(
        device=dev,
        uid=uid,
        rank=comm.Get_rank(),
        nranks=comm.Get_size(),
        initializer_method="uid",
    )
    _runtime = Runtime(comm.Dup(), device_id, ranks_on_node, ndev)
    atexit.register(_finalize)
    return _runtime


def _finalize() -> None:
    """At exit: let the backends free their symmetric memory, then finalise NVSHMEM."""
    rt = _runtime
    if rt is None or rt.finalized:
        return
    ok = True
    for fn in rt.at_exit:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - exiting anyway
            ok = False
            import sys

            print(f"[blasmp_array] GPU backend clean-up at exit failed: {exc}", file=sys.stderr)
    rt.finalized = True
    if ok:
        import nvshmem.core as nvshmem

        nvshmem.finalize()
