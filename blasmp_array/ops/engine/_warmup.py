"""Load, before a pipeline enqueues its first signal wait, every CuPy kernel its helpers launch.

Why: loading a CUDA module waits for the whole device, including a stream that is blocked in a
stream-ordered signal wait. CuPy compiles its element-wise kernels on first use and loads them
then (``cuModuleLoadData``). If the host thread that enqueues an operator met a first-use kernel
after enqueueing a wait, it would block until a peer's signal released that wait: the rank stops
enqueueing, and a wait whose release depends on this host's later work would never end.
(The GPU backend also asks CUDA to load the libraries' kernels eagerly, ``CUDA_MODULE_LOADING=
EAGER``, for cuBLAS's kernels; see ``backends/_cuda_env.py``.)

The registry
------------
Each module declares, once and next to the kernels it launches, a *warm-up sample*: a function
``sample(backend, xp, dtype) -> None`` decorated with :func:`warmup_kernels`, that launches
each of its stream helpers once on tiny arrays laid out to produce the same kernel variants as
real panels (contiguous and strided, one and two dimensional, every mask and op), synchronously
(on the host thread; only the backend's BLAS kernels take a stream). A sample must allocate with
``xp`` (never the collective ``backend.empty``) and must not communicate: it runs on each rank
on its own.

:func:`begin_pipeline` replaces ``backend.begin()`` at the start of every operator: on a backend
whose kernels are compiled lazily (``backend.jit_kernels``) it first runs every registered
sample not yet run for this backend and dtype, then synchronises, all before anything of the
operator is enqueued. On the CPU backend it is ``backend.begin()``.

Which samples are registered: this module imports nothing of the package; a sample is
registered when its module is imported. So that no sample can be missing when a pipeline
starts, :func:`begin_pipeline` imports every module of the ``blasmp_array.ops`` package and its
floors once (``pkgutil.walk_packages`` over the package's path: a new operator module is picked
up without a list to edit; an import by name at run time, the one way this bottom floor reaches
the floors above it). A sample registered later (a module outside ``ops``, imported after the first
warm-up) still runs, at the next :func:`begin_pipeline`: what has run is recorded per sample
and dtype (``backend._warmed_kernels``), not per dtype.

The backend's own BLAS3 kernels (``backend.gemm``, ``syrk``, ``syr2k``, ``trmm``, ``trsm``)
belong to no operator module; their sample is the one defined here.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ...backends.base import Backend

__all__ = ["begin_pipeline", "warmup_kernels", "registered_samples", "sample_matrix"]

#: ``sample(backend, xp, dtype)``: launches a module's kernels once on tiny arrays
Sample = Callable[[Any, Any, np.dtype], None]

#: the registry: ``"module.qualname"`` -> sample, in registration order
_SAMPLES: dict[str, Sample] = {}

#: keys of the samples also run for dtypes that are only moved (``any_dtype=True``)
_ANY_DTYPE: set[str] = set()

#: the dtypes the operators compute in (every sample runs for them)
_BLAS_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64", "complex64", "complex128"))

_ops_imported = False


def warmup_kernels(sample: Sample | None = None, *, any_dtype: bool = False) -> Any:
    """Register ``sample(backend, xp, dtype)`` as the warm-up of the calling module's kernels
    (a decorator, bare or called; returns ``sample`` unchanged). Registering a function of the
    same module and name again replaces it (module reloads).

    Samples are run for the BLAS dtypes (float32/64, complex64/128); ``any_dtype=True`` marks a
    sample of pure data movement (pack/unpack/copy kernels) that is also run for the dtypes
    only moved, never computed on (bool, integers: views, masks, ``np.where`` conditions)."""

    def register(s: Sample) -> Sample:
        key = f"{s.__module__}.{s.__qualname__}"
        _SAMPLES[key] = s
        if any_dtype:
            _ANY_DTYPE.add(key)
        else:
            _ANY_DTYPE.discard(key)
        return s

    return register(sample) if sample is not None else register


def registered_samples() -> dict[str, Sample]:
    """A copy of the registry, ``"module.qualname" -> sample`` (after importing every module
    of ``blasmp_array.ops``, as :func:`begin_pipeline` does)."""
    _import_ops()
    return dict(_SAMPLES)


def sample_matrix(xp: Any, dtype: Any, n: int = 6) -> Any:
    """The ``n x n`` C-ordered ``0, 1, 2, ...`` matrix of ``dtype`` the samples work on."""
    return xp.asarray(np.arange(n * n, dtype=np.float64).reshape(n, n)).astype(dtype)


def begin_pipeline(backend: Backend, dtype: Any) -> None:
    """Warm the kernels of ``dtype`` (each registered sample once per backend and dtype), then
    ``backend.begin()``."""
    if backend.jit_kernels:
        _warm(backend, np.dtype(dtype))
    backend.begin()


def _warm(backend: Backend, dt: np.dtype) -> None:
    _import_ops()
    warmed: set[tuple[str, np.dtype]] = backend.__dict__.setdefault("_warmed_kernels", set())
    todo = [
        (name, s)
        for name, s in _SAMPLES.items()
        if (name, dt) not in warmed and (dt in _BLAS_DTYPES or name in _ANY_DTYPE)
    ]
    if not todo:
        return
    xp = backend.xp
    for _, sample in todo:
        sample(backend, xp, dt)
    backend.synchronize()
    warmed.update((name, dt) for name, _ in todo)


def _import_ops() -> None:
    """Import every module of the ``ops`` package (once), so that every sample is registered."""
    global _ops_imported
    if _ops_imported:
        return
    ops = __package__.rpartition(".")[0]
    package = sys.modules[ops]  # blasmp_array.ops, imported before this module
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{ops}."):
        if not info.ispkg:  # walk_packages imports the floors (subpackages) itself
            importlib.import_module(info.name)
    _ops_imported = True


@warmup_kernels
def _backend_blas3(backend: Backend, xp: Any, dtype: np.dtype) -> None:
    """The backend's BLAS3 kernels on strided operands and outputs (copied to and from
    contiguous work arrays), with zero and non-zero scalars (alpha == 0 only scales a
    triangle)."""
    local = sample_matrix(xp, dtype)
    st, one, zero = backend.compute, dtype.type(1), dtype.type(0)
    sq, out = local[:3, :3], local[2:5, 2:5]
    ops = ("N", "C") if dtype.kind == "c" else ("N", "T")
    for uplo in ("L", "U"):
        for op in ops:
            for alpha, beta in ((one, zero), (zero, one), (one, one)):
                backend.gemm(alpha, sq, sq, beta, out, op, "N", st)
                backend.syrk(alpha, sq, beta, out, uplo, op, st)
                backend.syr2k(alpha, sq, sq, beta, out, uplo, op, st)
            for side in ("L", "R"):
                backend.trmm(one, sq, out, side, uplo, op, "N", st)
                backend.trmm(one, sq, out, side, uplo, op, "N", st, out=xp.zeros_like(sq))
                backend.trsm(one, sq, out, side, uplo, op, "U", st)
