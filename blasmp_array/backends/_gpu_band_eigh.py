"""Eigenvalues and eigenvectors of a real symmetric band matrix on the GPU: stages 2 and 3 of the
two-stage eigensolver (``ops/lapack/eigh.py``) with eigenvectors, nothing through the host but
the eigenvalues.

1. The bulge chase of ``_gpu_band_eig`` (band -> tridiagonal ``T = Q2^T B Q2``), keeping every
   reflector (``n^2`` numbers) instead of one per sweep.
2. The eigenpairs of ``T`` by cuSOLVER's divide and conquer (``cusolverDnXstedc``, LAPACK
   ``xstedc``), into a column-major ``Z`` whose leading dimension leaves ``2 b`` zero rows below
   it.
3. ``Z := Q2 Z``: the chase's reflectors gathered into block reflectors of ``b`` sweeps and
   applied by strided-batched GEMMs (``_chase_backtransform``), about ``2 n^3`` flops for all
   eigenvectors, only the wanted ones for a subset.

The band is scaled by a power of two near its largest element first (exact, as in
``_gpu_band_eig.band_eigvals``); the eigenvalues are scaled back, the eigenvectors need nothing.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from . import _chase_backtransform as cbt
from . import _gpu_band_eig as gbe

__all__ = ["band_eigh", "apply_device", "LAST_TIMES"]

#: seconds of the last :func:`band_eigh` call's parts (the stream waited for after each)
LAST_TIMES: dict[str, float] = {}


def band_eigh(
    blas: Any,
    band: np.ndarray,
    subset_by_index: tuple[int, int] | None = None,
    subset_by_value: tuple[float, float] | None = None,
) -> tuple[np.ndarray, Any]:
    """Eigenvalues (ascending, a host array) and eigenvectors (a device ``n x k`` array whose
    transpose is C-ordered: column ``j`` is eigenvector ``j``) of the real symmetric band
    matrix in LAPACK's lower band storage ``band[i - j, j] = B[i, j]`` (a host array of
    ``b + 1 <= MAX_BAND + 1`` rows), on the current CuPy stream with ``blas``'s cuBLAS and
    cuSOLVER handles (:class:`_cublas.CublasKernels`). A subset by index ``(lo, hi)``
    (inclusive) or by value (the eigenvalues in ``(vl, vu]``) back-transforms only its
    eigenvectors. Raises ``numpy.linalg.LinAlgError`` where the divide and conquer fails."""
    import cupy

    LAST_TIMES.clear()
    dtype = np.dtype(band.dtype)
    b, n = band.shape[0] - 1, band.shape[1]
    if b > gbe.MAX_BAND:
        raise ValueError(f"band_eigh: bandwidth {b} exceeds MAX_BAND = {gbe.MAX_BAND}")
    if n == 0:
        return np.zeros(0, dtype), cupy.zeros((0, 0), dtype)
    stream = cupy.cuda.get_current_stream()
    anrm = float(np.abs(band).max())
    if not np.isfinite(anrm):  # LAPACK's drivers return NaN here
        lo, hi = _index_range(np.zeros(n), subset_by_index, None)
        return np.full(hi - lo, np.nan, dtype), cupy.full((hi - lo, n), np.nan, dtype).T
    scale = 2.0 ** -np.frexp(anrm)[1] if anrm > 0 else 1.0
    bw = min(b, n - 1)
    t0 = time.perf_counter()
    refl = None
    if bw >= 2:
        ab = gbe.device_band(band, bw, scale)
        v, tau = gbe.chase(ab, bw, keep=True)
        d = ab[:, 0].copy()
        e = ab[: n - 1, 1].copy()
        del ab
        stream.synchronize()
        t1 = time.perf_counter()
        refl = cbt.block_reflectors(cupy, v, tau, n)
        del v, tau
    else:
        d = cupy.asarray(band[0] * dtype.type(scale))
        e = cupy.asarray(band[1, : n - 1] * dtype.type(scale) if b >= 1 else np.zeros(n - 1, dtype))
        t1 = time.perf_counter()
    pad = 2 * max(bw, 1)
    zc = cupy.zeros((n, n + pad), dtype)  # row j: eigenvector j (column-major Z, ld n + pad)
    info = cupy.zeros(1, np.int32)
    stream.synchronize()
    t2 = time.perf_counter()
    if n == 1:
        zc[0, 0] = 1
        host_ws = None
    else:
        host_ws = blas.stedc(stream, d, e, zc, info)
    w = cupy.asnumpy(d).astype(np.float64) / scale
    ok = int(cupy.asnumpy(info)[0])
    del host_ws
    if ok != 0:
        raise np.linalg.LinAlgError(
            f"eigh: the tridiagonal divide and conquer (cusolverDnXstedc) failed, info = {ok}"
        )
    t3 = time.perf_counter()
    lo, hi = _index_range(w, subset_by_index, subset_by_value)
    z = zc[lo:hi]
    z[:, n:] = 0  # the rows below Z that the blocks of the last tasks reach
    if refl is not None:
        apply_device(refl, z, blas.handle(stream))
    stream.synchronize()
    t4 = time.perf_counter()
    LAST_TIMES.update({"chase": t1 - t0, "block reflectors": t2 - t1, "stedc": t3 - t2})
    LAST_TIMES["chase back-transform"] = t4 - t3
    return w[lo:hi].astype(dtype), z[:, :n].T


def _index_range(
    w: np.ndarray,
    by_index: tuple[int, int] | None,
    by_value: tuple[float, float] | None,
) -> tuple[int, int]:
    """The half-open range of the ascending ``w`` a subset keeps."""
    if by_index is not None:
        return by_index[0], by_index[1] + 1
    if by_value is not None:
        keep = np.flatnonzero((w > by_value[0]) & (w <= by_value[1]))
        return (int(keep[0]), int(keep[-1]) + 1) if keep.size else (0, 0)
    return 0, w.shape[0]


def apply_device(br: cbt.BlockReflectors, zc: Any, handle: int) -> None:
    """``_chase_backtransform.apply_host`` on the GPU: per step, ``Y = W^T Z_blk`` and
    ``Z_blk -= (W T) Y`` as two strided-batched cuBLAS GEMMs over the step's blocks, on the
    stream of the cuBLAS ``handle`` (host pointer mode)."""
    import cupy
    from nvmath.bindings import cublas

    b, kmax = br.b, br.kmax
    rows = 2 * b - 1
    ncols, ldz = (int(x) for x in zc.shape)
    if ncols == 0 or not br.steps:
        return
    dt = np.dtype(zc.dtype)
    fn = {np.dtype(np.float64): cublas.dgemm_strided_batched,
          np.dtype(np.float32): cublas.sgemm_strided_batched}[dt]  # fmt: skip
    item = dt.itemsize
    most = max(c for _, _, c in br.steps)
    y = cupy.empty((most, ncols, b), dt)  # per block: Y column-major (b x ncols)
    one, zero, minus = (np.array(x, dt) for x in (1, 0, -1))
    op_t, op_n = int(cublas.Operation.T), int(cublas.Operation.N)
    block_stride = (kmax + 1) * b * rows  # blocks (G, k) -> (G + 1, k + 1)
    for g_lo, k_lo, count in br.steps:
        first = (g_lo * kmax + k_lo) * b * rows
        w_ptr = br.wt.data.ptr + first * item
        wt_ptr = br.wtt.data.ptr + first * item
        z_ptr = zc.data.ptr + ((g_lo + k_lo) * b + 1) * item
        fn(
            handle, op_t, op_n, b, ncols, rows, one.ctypes.data,
            w_ptr, rows, block_stride, z_ptr, ldz, 2 * b,
            zero.ctypes.data, y.data.ptr, b, b * ncols, count,
        )  # fmt: skip
        fn(
            handle, op_n, op_n, rows, ncols, b, minus.ctypes.data,
            wt_ptr, rows, block_stride, y.data.ptr, b, b * ncols,
            one.ctypes.data, z_ptr, ldz, 2 * b, count,
        )  # fmt: skip
