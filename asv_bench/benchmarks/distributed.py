"""Distributed benchmarks: every operator, the NumPy-face calls (``A @ B``, ``A.T @ A``,
``solve_triangular``), construction, redistribution and transpose.

asv runs each benchmark in its own process, and a distributed run needs ``mpiexec``, so
``setup`` launches ``mpiexec -n RANKS python -m blasmp_array.bench OP ... --profile --json`` and
the ``track_*`` method reports what the ranks measured (the median over repeats of the slowest
rank's time, as GFLOP/s, or GB/s for data movement). Parameters: ranks, grid shape, block size,
backend. GPU cases are skipped (``NotImplementedError``) where no GPU is usable; grid shapes that
coincide for a rank count are measured once.

Environment variables: ``BLASMP_ASV_N`` (matrix size, default 2048), ``BLASMP_ASV_REPEAT``
(default 3), ``BLASMP_ASV_RANKS`` (comma-separated rank counts, default ``1,2``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

N = int(os.environ.get("BLASMP_ASV_N", "2048"))
REPEAT = int(os.environ.get("BLASMP_ASV_REPEAT", "3"))
RANKS = [int(r) for r in os.environ.get("BLASMP_ASV_RANKS", "1,2").split(",") if r.strip()]
GRIDS = ["square", "1xP"]
BLOCKS = [256]
BACKENDS = ["cpu", "gpu"]


def _mpiexec() -> str | None:
    local = Path(sys.executable).parent / "mpiexec"
    return str(local) if local.exists() else shutil.which("mpiexec")


def _gpu_usable() -> bool:
    try:
        import cupy

        return bool(cupy.cuda.runtime.getDeviceCount() > 0)
    except Exception:
        return False


def _grid_shape(kind: str, ranks: int) -> tuple[int, int]:
    if kind == "1xP":
        return (1, ranks)
    pr = int(ranks**0.5)
    while ranks % pr:
        pr -= 1
    return (pr, ranks // pr)


def run_bench(op: str, ranks: int, grid: str, block: int, backend: str, extra=()) -> dict:
    """Run the bench command under mpiexec; return its single JSON result record."""
    if backend == "gpu" and not _gpu_usable():
        raise NotImplementedError("no usable GPU: GPU benchmark skipped")
    shape = _grid_shape(grid, ranks)
    if grid != "square" and shape == _grid_shape("square", ranks):
        raise NotImplementedError(f"grid {grid} is the square grid for {ranks} rank(s)")
    launcher = _mpiexec()
    if launcher is None:
        raise NotImplementedError("no mpiexec found")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [
            launcher,
            "-n",
            str(ranks),
            sys.executable,
            "-m",
            "blasmp_array.bench",
            op,
            "--n",
            str(N),
            "--block",
            str(block),
            "--grid",
            f"{shape[0]}x{shape[1]}",
            "--backend",
            backend,
            "--profile",
            "--repeat",
            str(REPEAT),
            "--warmup",
            "1",
            "--json",
            str(out),
            "--quiet",
            *extra,
        ]
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
        return json.loads(out.read_text())["results"][0]


class _Distributed:
    op = ""
    params = (RANKS, GRIDS, BLOCKS, BACKENDS)
    param_names = ["ranks", "grid", "block", "backend"]
    timeout = 1200
    number = 1
    repeat = 1

    def extra(self, ranks, grid, block):
        """Extra arguments of the bench command (none by default)."""
        return ()

    def setup(self, ranks, grid, block, backend):
        extra = self.extra(ranks, grid, block)
        self.result = run_bench(self.op, ranks, grid, block, backend, extra)


class _Operator(_Distributed):
    """A BLAS3 operator: GFLOP/s of all ranks together."""

    def track_gflops(self, ranks, grid, block, backend):
        return self.result["profile"]["gflops_total"]

    track_gflops.unit = "GFLOP/s"


class _DataMovement(_Distributed):
    """Construction / redistribution: GB/s of the matrix moved."""

    def track_gbytes_per_s(self, ranks, grid, block, backend):
        return self.result["profile"]["gbytes_per_s"]

    track_gbytes_per_s.unit = "GB/s"


class Gemm(_Operator):
    op = "gemm"


class Symm(_Operator):
    op = "symm"


class Syrk(_Operator):
    op = "syrk"


class Syr2k(_Operator):
    op = "syr2k"


class Trmm(_Operator):
    op = "trmm"


class Trsm(_Operator):
    op = "trsm"


class Matmul(_Operator):
    """``A @ B`` as a NumPy user writes it (GEMM underneath)."""

    op = "matmul"


class MatmulAtA(_Operator):
    """``A.T @ A``: SYRK plus the symmetric fill, the full result a NumPy user gets."""

    op = "matmul_ata"


class SolveTriangular(_Operator):
    """``bm.linalg.solve_triangular(T, B, lower=True)`` with SciPy's defaults
    (``check_finite=True``)."""

    op = "solve_triangular"


class MatmulView(_Operator):
    """``A[1:, 1:] @ B[1:, 1:]``: windows at an offset inside a block (a view on 1-process grid
    dimensions, a copy elsewhere), against :class:`Matmul` on the same sizes."""

    op = "matmul_view"


class Cholesky(_Operator):
    op = "cholesky"


class LU(_Operator):
    """``bm.linalg.lu_factor(A)`` (LU with partial pivoting, ``2 n^3 / 3`` flops)."""

    op = "lu"


class QR(_Operator):
    """``np.linalg.qr(A)``, square: Householder QR (``Q`` formed; ``4 m n^2 - 4 n^3 / 3``)."""

    op = "qr"


class QRTall(_Operator):
    """``np.linalg.qr(A)`` of a tall-skinny ``32 N x N / 32`` matrix: CholeskyQR2."""

    op = "qr_tall"

    def extra(self, ranks, grid, block):
        return ("--m", str(32 * N), "--n", str(max(1, N // 32)))


class Lstsq(_Operator):
    """``bm.linalg.lstsq(A, b)``, ``A`` ``4 N x N / 4``, one right-hand side."""

    op = "lstsq"

    def extra(self, ranks, grid, block):
        return ("--m", str(4 * N), "--n", str(max(1, N // 4)), "--k", "1")


class Eigh(_Operator):
    """``np.linalg.eigh(A)`` of a Hermitian ``N x N`` (eigenvalues and eigenvectors;
    ``4 n^3 / 3 + 2 n^3`` flops counted)."""

    op = "eigh"


class Eigvalsh(_Operator):
    """``np.linalg.eigvalsh(A)`` of a Hermitian ``N x N`` (``4 n^3 / 3`` flops counted)."""

    op = "eigvalsh"


class SVD(_Operator):
    """``np.linalg.svd(A)``, square, full ``U`` and ``Vh`` (``4 m n^2 + 8 n^3`` flops by the
    bench's count)."""

    op = "svd"


class SVDPolar(_Operator):
    """``bm.linalg.svd(A, method='polar')``, square: the SVD through the polar decomposition
    (QDWH), counted with :class:`SVD`'s flops so that the two rates compare."""

    op = "svd_polar"


class Redistribute(_DataMovement):
    """Block halved and grid transposed at once (the bench's default target)."""

    op = "redistribute"


class RedistributeBlock(_DataMovement):
    """Block change only: block -> block / 2 on the same grid."""

    op = "redistribute"

    def extra(self, ranks, grid, block):
        pr, pc = _grid_shape(grid, ranks)
        return ("--to-grid", f"{pr}x{pc}", "--to-block", str(max(1, block // 2)))


class RedistributeGrid(_DataMovement):
    """Grid change only: the transposed grid, same block (skipped where it is the same)."""

    op = "redistribute"

    def extra(self, ranks, grid, block):
        pr, pc = _grid_shape(grid, ranks)
        if pr == pc:
            raise NotImplementedError(f"the {pr}x{pc} grid is its own transpose")
        return ("--to-grid", f"{pc}x{pr}", "--to-block", str(block))


class Transpose(_DataMovement):
    """``A.T.resolve()``: the distributed transpose on the same grid."""

    op = "transpose"


class FromNumpy(_DataMovement):
    op = "from_numpy"


class SumAxis0(_DataMovement):
    """``np.sum(A, axis=0)``: GB/s of the matrix read."""

    op = "sum_axis0"
