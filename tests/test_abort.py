"""An uncaught exception on one rank must end the whole MPI job, not leave the others hanging."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_mpi import mpiexec

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent(
    """
    from mpi4py import MPI
    import blasmp_array as bm
    grid = bm.ProcessGrid(backend="cpu")   # installs the abort hook
    if MPI.COMM_WORLD.Get_rank() == 1:
        raise ValueError("deliberate failure on rank 1")
    MPI.COMM_WORLD.Barrier()               # rank 0 would wait here forever
    """
)


def _run(env_extra: dict[str, str], timeout: float) -> tuple[int | None, str]:
    """Run SCRIPT on 2 ranks; (exit code or None on timeout, output). On a timeout the whole
    process group is killed so that no rank is left spinning in MPI."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("BLASMP_NO_ABORT", None)
    env.update(env_extra)
    proc = subprocess.Popen(
        [mpiexec(), "-n", "2", sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        process_group=0,  # its own process group, killed whole on a timeout
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out


@pytest.mark.mpi
def test_exception_on_one_rank_aborts_the_job() -> None:
    code, out = _run({}, timeout=60)
    assert code is not None, f"the job hung instead of aborting:\n{out}"
    assert code != 0, out
    assert "deliberate failure on rank 1" in out, out
    assert "rank 1 of 2" in out, out


@pytest.mark.mpi
def test_no_abort_opt_out_hangs() -> None:
    """With BLASMP_NO_ABORT=1 the default hook is kept: rank 0 stays blocked (the problem the
    hook solves), so the job outlives a short timeout."""
    code, out = _run({"BLASMP_NO_ABORT": "1"}, timeout=6)
    assert code is None, f"expected a hang without the hook, got exit {code}:\n{out}"


def test_thread_level_check() -> None:
    code = textwrap.dedent(
        """
        import mpi4py
        mpi4py.rc.thread_level = "single"
        from mpi4py import MPI
        from blasmp_array.backends.cpu import CPUBackend
        try:
            CPUBackend(MPI.COMM_WORLD)
        except RuntimeError as exc:
            assert "thread_level" in str(exc), exc
            print("raised as expected")
        """
    )
    env = dict(os.environ, BLASMP_NO_ABORT="1")
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "raised as expected" in proc.stdout, proc.stdout + proc.stderr
