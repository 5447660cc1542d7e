"""The kernel warm-up registry (ops/engine/_warmup.py); no MPI.

Every module that launches stream kernels registers a warm-up sample; ``begin_pipeline`` on a
backend whose kernels compile lazily (the GPU's CuPy) runs each sample once per dtype before the
pipeline starts. Here a CPU backend-like fake (NumPy, the CPU backend's BLAS kernels called
synchronously) marked ``jit_kernels`` runs the real samples, so that a sample broken by a change
of its module's helpers fails here rather than first on a GPU node.
"""

from __future__ import annotations

import collections
import importlib
import pkgutil

import numpy as np
import pytest

from blasmp_array.backends import _cpu_kernels
from blasmp_array.ops.engine import _warmup
from blasmp_array.ops.engine._warmup import begin_pipeline, registered_samples, warmup_kernels

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]

#: the modules whose kernels must be warmed (those that launch helpers on a stream or enqueue
#: CuPy kernels between a pipeline's signal waits), and the backend's BLAS3 kernels (_warmup)
MODULES = [
    "engine._warmup",
    "engine._triangle",
    "engine.panels",
    "blas3.gemm",
    "blas3.syrk",
    "blas3.symm",
    "blas3.trmm",
    "blas3.trsm",
    "engine.redistribute",
    "lapack.cholesky",
    "lapack.lu",
    "lapack._householder",
    "engine._messages",
    "lapack._cholqr",
    "engine.selection",
]


class FakeBackend:
    """What the samples and ``begin_pipeline`` use of a backend, on the host, synchronously."""

    xp = np
    compute = "compute"

    def __init__(self, jit_kernels: bool = True) -> None:
        self.jit_kernels = jit_kernels
        self.calls: collections.Counter[str] = collections.Counter()

    def synchronize(self) -> None:
        self.calls["synchronize"] += 1

    def begin(self) -> None:
        self.calls["begin"] += 1

    def _blas(self, name: str, stream: str, *args: object) -> None:
        assert stream == self.compute
        self.calls[name] += 1
        getattr(_cpu_kernels, name)(*args)

    def gemm(self, alpha, a, b, beta, c, trans_a, trans_b, stream):
        self._blas("gemm", stream, alpha, a, b, beta, c, trans_a, trans_b)

    def syrk(self, alpha, a, beta, c, uplo, trans, stream):
        self._blas("syrk", stream, alpha, a, beta, c, uplo, trans)

    def syr2k(self, alpha, a, b, beta, c, uplo, trans, stream):
        self._blas("syr2k", stream, alpha, a, b, beta, c, uplo, trans)

    def trmm(self, alpha, a, b, side, uplo, trans, diag, stream, out=None):
        self._blas("trmm", stream, alpha, a, b, side, uplo, trans, diag, out)

    def trsm(self, alpha, a, b, side, uplo, trans, diag, stream):
        self._blas("trsm", stream, alpha, a, b, side, uplo, trans, diag)

    def modified_lu(self, a, d, stream):
        self._blas("modified_lu", stream, a, d)


@pytest.fixture
def counted(monkeypatch):
    """The registry with every sample wrapped to count its runs per dtype (the real sample
    still runs)."""
    runs: collections.Counter[tuple[str, np.dtype]] = collections.Counter()

    def counting(name, sample):
        def run(backend, xp, dtype):
            runs[name, dtype] += 1
            sample(backend, xp, dtype)

        return run

    samples = registered_samples()
    monkeypatch.setattr(
        _warmup, "_SAMPLES", {name: counting(name, s) for name, s in samples.items()}
    )
    return runs, samples


def test_every_kernel_module_registers_a_sample():
    modules = {name.rsplit(".", 1)[0] for name in registered_samples()}
    for mod in MODULES:
        assert f"blasmp_array.ops.{mod}" in modules, mod


def test_begin_pipeline_imports_every_ops_module(monkeypatch):
    """``begin_pipeline`` imports every module of the ops package (once): a sample cannot be
    missing because its module was not imported yet."""
    import blasmp_array.ops as ops

    expected = {
        m.name
        for m in pkgutil.walk_packages(ops.__path__, prefix="blasmp_array.ops.")
        if not m.ispkg
    }
    assert {f"blasmp_array.ops.{m}" for m in MODULES} <= expected
    imported: list[str] = []
    real = importlib.import_module
    monkeypatch.setattr(_warmup, "_ops_imported", False)
    monkeypatch.setattr(
        _warmup.importlib, "import_module", lambda name: imported.append(name) or real(name)
    )
    begin_pipeline(FakeBackend(jit_kernels=False), np.float64)
    assert imported == []  # nothing to warm, nothing imported
    begin_pipeline(FakeBackend(), np.float64)
    begin_pipeline(FakeBackend(), np.float32)
    assert sorted(imported) == sorted(expected)


def test_begin_pipeline_runs_every_sample_once_per_dtype(counted):
    runs, samples = counted
    b = FakeBackend()
    for _ in range(2):
        for dt in DTYPES:
            begin_pipeline(b, dt)
    assert runs == {(name, np.dtype(dt)): 1 for name in samples for dt in DTYPES}
    assert b.calls["begin"] == 2 * len(DTYPES)
    assert b.calls["synchronize"] == len(DTYPES)  # once after each dtype's warm-up
    for blas in ("gemm", "syrk", "syr2k", "trmm", "trsm"):
        assert b.calls[blas] > 0, blas
    # another backend is warmed on its own
    b2 = FakeBackend()
    begin_pipeline(b2, np.float64)
    assert all(runs[name, np.dtype(np.float64)] == 2 for name in samples)


def test_backend_without_jit_runs_no_sample(counted):
    runs, _ = counted
    b = FakeBackend(jit_kernels=False)
    begin_pipeline(b, np.float64)
    assert not runs
    assert b.calls == {"begin": 1}


def test_sample_registered_late_runs_at_the_next_pipeline(counted, monkeypatch):
    runs, samples = counted
    b = FakeBackend()
    begin_pipeline(b, np.float64)
    late: list[np.dtype] = []

    @warmup_kernels
    def sample(backend, xp, dtype):
        late.append(dtype)

    name = f"{__name__}.{sample.__qualname__}"
    assert name in _warmup._SAMPLES
    begin_pipeline(b, np.float64)
    begin_pipeline(b, np.float64)
    assert late == [np.dtype(np.float64)]
    assert all(runs[n, np.dtype(np.float64)] == 1 for n in samples)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.int64, np.uint32])
def test_moved_only_dtypes_warm_only_data_movement(counted, dtype):
    """A bool or integer array is only moved (views, masks, ``np.where`` conditions), never
    computed on: only the ``any_dtype`` samples run for it (the BLAS samples would fail: no
    cuBLAS routine takes bool) and they run without error on the real kernels."""
    runs, samples = counted
    begin_pipeline(FakeBackend(), dtype)
    ran = {name for name, dt in runs if dt == np.dtype(dtype)}
    assert ran == set(_warmup._ANY_DTYPE) & set(samples)
    assert "blasmp_array.ops.engine.redistribute._warm_redistribute" in ran
