"""The GPU backend's leaf of the modified LU of Householder reconstruction (LAPACK
``xLAORHR_COL_GETRFNP2``): one CUDA kernel, one thread block, on a C-ordered ``h x w`` panel.

Column ``j`` (in order, ``__syncthreads`` between columns): every thread reads ``a[j, j]``, the
sign ``d_j = -sign(Re a[j, j])`` (``+1`` from ``-0`` on, as Fortran's ``SIGN``), then thread 0
writes ``u = a[j, j] - d_j`` (``|u| >= 1``: no pivoting needed) and ``d_j``; each thread takes
rows ``i > j`` (a stride of the block's size): ``l = a[i, j] / u``, then the rank-1 update of
its row right of ``j``. Row ``j`` is final at column ``j`` (only rows below it change), so the
update reads it without a further barrier. A panel is at most the QR panel's width tall
(512 rows), so one block of 256 threads is enough; the blocked driver around it is
``ops.lapack._cholqr_panel``.

CuPy is imported by the functions that compile and launch only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["SOURCE", "modified_lu"]

_THREADS = 256

SOURCE = r"""
#include <cupy/complex.cuh>

__device__ inline double real_part(double x) { return x; }
__device__ inline float real_part(float x) { return x; }
__device__ inline double real_part(complex<double> x) { return x.real(); }
__device__ inline float real_part(complex<float> x) { return x.real(); }

template <typename T>
__global__ void modified_lu(T* a, long long ld, int h, int w, T* d) {
    for (int j = 0; j < w; ++j) {
        __syncthreads();
        const T ajj = a[j * ld + j];
        const T s = real_part(ajj) >= 0 ? T(-1) : T(1);
        const T u = ajj - s;
        __syncthreads();
        if (threadIdx.x == 0) {
            a[j * ld + j] = u;
            d[j] = s;
        }
        const T* top = a + j * ld;
        for (int i = j + 1 + threadIdx.x; i < h; i += blockDim.x) {
            T* row = a + i * ld;
            const T l = row[j] / u;
            row[j] = l;
            for (int c = j + 1; c < w; ++c) row[c] -= l * top[c];
        }
    }
}
"""

_TYPES = {
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
    np.dtype(np.complex64): "complex<float>",
    np.dtype(np.complex128): "complex<double>",
}
_NAMES = tuple(f"modified_lu<{t}>" for t in _TYPES.values())

_kernels: dict[str, Any] | None = None


def _load() -> dict[str, Any]:
    """Compile (NVRTC, cached on disk by CuPy) and load the four variants once per process."""
    global _kernels
    if _kernels is None:
        import cupy

        module = cupy.RawModule(code=SOURCE, name_expressions=_NAMES)
        _kernels = {name: module.get_function(name) for name in _NAMES}
    return _kernels


def modified_lu(a: Any, d: Any) -> None:
    """Enqueue the leaf on the current CuPy stream (see the module docstring): ``a`` a 2-D
    CuPy array with unit column stride and ``h >= w``, ``d`` a contiguous vector of ``w``
    elements of ``a``'s dtype."""
    h, w = a.shape
    item = a.itemsize
    if h < w or (w > 1 and a.strides[1] != item) or a.strides[0] % item:
        raise ValueError(f"modified_lu needs an h x w panel, h >= w, rows contiguous: {a.shape}")
    if w == 0:
        return
    kernel = _load()[f"modified_lu<{_TYPES[np.dtype(a.dtype)]}>"]
    ld = a.strides[0] // item if h > 1 else w
    kernel((1,), (_THREADS,), (a, np.int64(ld), np.int32(h), np.int32(w), d))
