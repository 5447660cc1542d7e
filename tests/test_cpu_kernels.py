"""The CPU backend's local TRSM by halves (``_cpu_kernels._trsm_halves``) against the
definition, for every side, triangle, op and diagonal, with the unreferenced triangle poisoned
with NaN; pass/fail from the componentwise backward error ``|op(T) x - alpha b| <= c n eps
|op(T)| |x|`` (Higham, Thm 8.5)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from blasmp_array.backends import _cpu_kernels as kernels


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("leaf", [1, 4, 64])
def test_trsm_by_halves(dtype, leaf, monkeypatch):
    monkeypatch.setattr(kernels, "TRSM_LEAF", leaf)
    rng = np.random.default_rng(leaf)
    n, k, alpha = 37, 5, 2.0
    eps = np.finfo(dtype).eps
    for side, uplo, trans, diag in itertools.product("LR", "LU", "NTC", "NU"):
        a = rng.standard_normal((n, n)) + n * np.eye(n)
        if np.dtype(dtype).kind == "c":
            a = a + 1j * rng.standard_normal((n, n))
        a = a.astype(dtype)
        t = np.tril(a) if uplo == "L" else np.triu(a)
        if diag == "U":
            np.fill_diagonal(t, 1)
        stored = a.copy()
        stored[np.triu_indices(n, 1) if uplo == "L" else np.tril_indices(n, -1)] = np.nan
        b = rng.standard_normal((n, k) if side == "L" else (k, n)).astype(dtype)
        x = b.copy()
        kernels.trsm(alpha, stored, x, side, uplo, trans, diag)
        op = {"N": t, "T": t.T, "C": t.conj().T}[trans].astype(np.complex128)
        xh = x.astype(np.complex128)
        resid = (op @ xh if side == "L" else xh @ op) - alpha * b
        scale = np.abs(op) @ np.abs(xh) if side == "L" else np.abs(xh) @ np.abs(op)
        worst = (np.abs(resid) / scale).max() / eps
        assert worst <= 4 * n, f"{side}{uplo}{trans}{diag}: backward error {worst:.3g} eps"


def test_scipy_is_imported_on_the_host_thread():
    """The CPU backend imports SciPy's LAPACK when it is created, on the host thread, before
    any stream thread runs a kernel: a stream thread importing it beside another importing
    thread can fail (Python's import locks raise ``_DeadlockError``). ``import blasmp_array``
    alone stays SciPy-free."""
    import subprocess
    import sys

    code = (
        "import os, sys, threading\n"
        "os.environ['BLASMP_CPU_STREAM_THREADS'] = '1'\n"
        "import numpy as np\n"
        "import blasmp_array as bm\n"
        "assert 'scipy.linalg' not in sys.modules\n"
        "be = bm.ProcessGrid(backend='cpu').backend\n"
        "assert 'scipy.linalg.lapack' in sys.modules, 'the backend must import SciPy'\n"
        "gate = threading.Event()\n"
        "be.launch(be.compute, gate.wait)  # the stream thread is held: nothing below runs yet\n"
        "a = np.asfortranarray(np.eye(4) * 2)\n"
        "be.getrf(a, np.zeros(4, np.int32), np.zeros(1, np.int32), be.compute)\n"
        "gate.set()\n"
        "be.synchronize()\n"
        "assert np.allclose(np.diag(a), 2)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
