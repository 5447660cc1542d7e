"""Launch the distributed test-suite (``tests/mpi``) under ``mpiexec -n N`` for several N.

Each launch has a timeout, so a deadlock fails this test quickly instead of hanging CI; every
rank also runs with a per-test ``--timeout`` that kills it (and so the MPI job) on a hang.
Select a subset with ``BLASMP_MPI_ARGS`` (extra pytest arguments passed to every rank), e.g.
``BLASMP_MPI_ARGS="-k gemm" pytest tests/test_mpi.py``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RANKS = [int(n) for n in os.environ.get("BLASMP_TEST_RANKS", "1 2 3 4 6").split()]
LAUNCH_TIMEOUT = float(os.environ.get("BLASMP_MPI_TIMEOUT", "900"))
# the exhaustive sweeps are opt-in: BLASMP_MPI_MARK="full_sweep" (or "") selects them
MARK = os.environ.get("BLASMP_MPI_MARK", "not full_sweep")


def mpiexec() -> str:
    """The mpiexec next to this Python (the PyPI `mpich` wheel), else the one on PATH."""
    local = Path(sys.executable).parent / "mpiexec"
    found = str(local) if local.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.fail("no mpiexec found: install the 'mpich' extra or a system MPI")
    return found


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", RANKS, ids=lambda n: f"np{n}")
def test_distributed_suite(nprocs: int) -> None:
    env = dict(
        os.environ,
        BLASMP_UNDER_MPIEXEC="1",
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
    )
    env.setdefault("BLASMP_BACKEND", "cpu")
    extra = shlex.split(os.environ.get("BLASMP_MPI_ARGS", ""))
    cmd = [
        mpiexec(),
        "-n",
        str(nprocs),
        sys.executable,
        "-m",
        "pytest",
        "tests/mpi",
        "-q",
        "-x",
        "-p",
        "no:cacheprovider",
        "--timeout=300",
        "--timeout-method=thread",
        "-o",
        "addopts=",
        "-m",
        MARK,
        *extra,
    ]
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"")[-20000:]
        pytest.fail(f"mpiexec -n {nprocs} timed out after {LAUNCH_TIMEOUT}s (deadlock?)\n{out!r}")
    if proc.returncode != 0:
        pytest.fail(
            f"distributed suite failed with {nprocs} ranks (exit {proc.returncode}):\n"
            f"{proc.stdout[-30000:]}\n{proc.stderr[-10000:]}"
        )
    assert " passed" in proc.stdout, proc.stdout[-5000:]
