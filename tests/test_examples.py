"""Run every worked example of ``examples/`` at 1 and 4 ranks: each checks its own result and
exits non-zero when a check fails.

The examples are launched the way a user runs them (``mpiexec -n N python examples/X.py``,
with their default, small sizes), with the environment of the distributed suite
(``tests/test_mpi.py``: one BLAS thread per rank, the CPU backend unless ``BLASMP_BACKEND`` says
otherwise) and a timeout each, so a hang fails the test instead of CI.

``BLASMP_EXAMPLE_RANKS`` chooses the rank counts (default ``"1 4"``), ``BLASMP_EXAMPLE_LAUNCHER``
the launcher, a command prefix in which ``{n}`` is the rank count (default: ``mpiexec -n {n}``
and this Python). On a GPU node (docs/gpu-node.md)::

    BLASMP_BACKEND=gpu BLASMP_EXAMPLE_RANKS="1 2 4" \\
        BLASMP_EXAMPLE_LAUNCHER="tools/node-run.sh {n} python3" \\
        python3 -m pytest tests/test_examples.py -p no:cacheprovider
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_mpi import mpiexec

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
RANKS = [int(n) for n in os.environ.get("BLASMP_EXAMPLE_RANKS", "1 4").split()]
TIMEOUT = float(os.environ.get("BLASMP_EXAMPLE_TIMEOUT", "240"))
#: the last line every example prints when all its checks passed
PASSED = "all checks passed"


def launcher(nprocs: int) -> list[str]:
    custom = os.environ.get("BLASMP_EXAMPLE_LAUNCHER")
    if custom:
        return shlex.split(custom.format(n=nprocs))
    return [mpiexec(), "-n", str(nprocs), sys.executable]


def test_examples_are_found() -> None:
    names = {path.stem for path in EXAMPLES}
    assert {"quickstart", "ridge_regression", "gaussian_process", "zarr_cholesky"} <= names
    assert {"dask_roundtrip", "pca"} <= names


@pytest.mark.mpi
@pytest.mark.parametrize("nprocs", RANKS, ids=lambda n: f"np{n}")
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example(example: Path, nprocs: int, tmp_path: Path) -> None:
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        PYTHONUNBUFFERED="1",
        TMPDIR=str(tmp_path),  # the examples' temporary stores, removed with tmp_path
    )
    env.setdefault("BLASMP_BACKEND", "cpu")
    cmd = [*launcher(nprocs), str(example.relative_to(ROOT))]
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        pytest.fail(f"{shlex.join(cmd)} timed out after {TIMEOUT} s (deadlock?)\n{out[-5000:]}")
    report = (
        f"{shlex.join(cmd)} exited {proc.returncode}\n{proc.stdout[-8000:]}\n{proc.stderr[-4000:]}"
    )
    assert proc.returncode == 0, report
    # rank 0 prints its checks and the verdict; every rank exits with the same status
    assert proc.stdout.rstrip().endswith(PASSED), report
    assert "FAIL" not in proc.stdout, report
