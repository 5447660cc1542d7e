"""The GPU backend's leaf of the modified LU of Householder reconstruction (LAPACK
``xLAORHR_COL_GETRFNP2``): one CUDA kernel, one thread block, on a C-ordered ``h x w`` panel.

Column ``j`` in order: the sign ``d_j = -sign(Re a[j, j])`` (``+1`` from ``-0`` on, as
Fortran's ``SIGN``), the pivot ``u = a[j, j] - d_j`` (``|u| >= 1`` for the top of an
orthonormal matrix: no pivoting needed), the column below divided by ``u``, and the rank-1
update of the columns right of ``j``. Row ``j`` is final at column ``j`` (only rows below it
change).

``modified_lu_regs`` (the leaf used, for a leaf of at most 32 columns and
:data:`MAX_REG_ROWS` rows): a block of ``32 x LANES`` threads, thread ``(c, y)`` holding column
``c`` of rows ``y, y + LANES, ...`` in registers for the whole leaf. Per column: the owner of
row ``j`` puts it in shared memory, a barrier; the threads of column ``j`` divide their rows
and share the multipliers, a barrier; every thread updates its rows, a barrier. The leaf is
read and written once. ``modified_lu_rows`` (taller leaves, or :data:`REGISTER_LEAF` off): one
thread per row, reading and writing global memory at every column, a chain of dependent loads
per thread. One H100, n = 16384, panels of 512: ``np.linalg.qr(A, mode='r')`` took 0.246 s
with the register leaf and 0.308 s with the row leaf (docs/qr.md, "The panel by CholeskyQR2
and Householder reconstruction").

CuPy is imported by the functions that compile and launch only.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["SOURCES", "modified_lu", "REGISTER_LEAF", "MAX_REG_ROWS"]

_THREADS = 256

_HEADER = r"""
#include <cupy/complex.cuh>

__device__ inline double real_part(double x) { return x; }
__device__ inline float real_part(float x) { return x; }
__device__ inline double real_part(complex<double> x) { return x.real(); }
__device__ inline float real_part(complex<float> x) { return x.real(); }
"""

_ROWS_SOURCE = r"""
template <typename T>
__global__ void modified_lu_rows(T* a, long long ld, int h, int w, T* d) {
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

_REGS_SOURCE = r"""
#define LANES 16

template <typename T, int R>
__global__ void __launch_bounds__(32 * LANES)
modified_lu_regs(T* a, long long ld, int h, int w, T* d) {
    __shared__ __align__(16) unsigned char smem[(32 + LANES * R) * sizeof(T)];
    T* prow = reinterpret_cast<T*>(smem);  // row j
    T* lcol = prow + 32;                   // the multipliers of column j, by row
    const int c = threadIdx.x, y = threadIdx.y;
    T v[R];
#pragma unroll
    for (int k = 0; k < R; ++k) {
        const int i = y + LANES * k;
        v[k] = (i < h && c < w) ? a[i * ld + c] : T(0);
    }
    for (int j = 0; j < w; ++j) {
#pragma unroll
        for (int k = 0; k < R; ++k)
            if (y + LANES * k == j) prow[c] = v[k];
        __syncthreads();
        const T ajj = prow[j];
        const T s = real_part(ajj) >= 0 ? T(-1) : T(1);
        const T u = ajj - s;
        if (c == j) {
#pragma unroll
            for (int k = 0; k < R; ++k) {
                const int i = y + LANES * k;
                if (i > j && i < h) {
                    v[k] = v[k] / u;
                    lcol[i] = v[k];
                } else if (i == j) {
                    v[k] = u;
                    d[j] = s;
                }
            }
        }
        __syncthreads();
        if (c > j && c < w) {
            const T p = prow[c];
#pragma unroll
            for (int k = 0; k < R; ++k) {
                const int i = y + LANES * k;
                if (i > j && i < h) v[k] -= lcol[i] * p;
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int k = 0; k < R; ++k) {
        const int i = y + LANES * k;
        if (i < h && c < w) a[i * ld + c] = v[k];
    }
}
"""

_TYPES = {
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
    np.dtype(np.complex64): "complex<float>",
    np.dtype(np.complex128): "complex<double>",
}
#: whether leaves that fit use ``modified_lu_regs`` (see the module docstring);
#: ``$BLASMP_ORHR_LEAF=rows`` clears it
REGISTER_LEAF = os.environ.get("BLASMP_ORHR_LEAF", "") != "rows"

#: row lanes of ``modified_lu_regs`` (its ``LANES``), and its registers per thread
_LANES = 16
_REGS = (1, 2, 4, 8, 16, 32, 64)
#: the tallest leaf kept in registers (64 rows per thread of 16 lanes)
MAX_REG_ROWS = _LANES * _REGS[-1]
#: each kernel's source (one module each: a kernel compiles only where it is used) and its
#: variants
SOURCES = {"rows": _HEADER + _ROWS_SOURCE, "regs": _HEADER + _REGS_SOURCE}
_NAMES = {
    "rows": tuple(f"modified_lu_rows<{t}>" for t in _TYPES.values()),
    "regs": tuple(f"modified_lu_regs<{t}, {r}>" for t in _TYPES.values() for r in _REGS),
}

_kernels: dict[str, dict[str, Any]] = {}


def _load(kind: str) -> dict[str, Any]:
    """The variants of one kernel (``'rows'`` or ``'regs'``). Both kernels are compiled
    (NVRTC, cached on disk by CuPy) and loaded at the first call of the process -- the warm-up
    of ``ops.lapack._cholqr_panel`` -- so that neither is loaded inside a pipeline."""
    if not _kernels:
        import cupy

        for k in SOURCES:
            module = cupy.RawModule(code=SOURCES[k], name_expressions=_NAMES[k])
            _kernels[k] = {name: module.get_function(name) for name in _NAMES[k]}
    return _kernels[kind]


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
    ctype = _TYPES[np.dtype(a.dtype)]
    ld = a.strides[0] // item if h > 1 else w
    args = (a, np.int64(ld), np.int32(h), np.int32(w), d)
    if REGISTER_LEAF and w <= 32 and h <= MAX_REG_ROWS:
        r = next(r for r in _REGS if _LANES * r >= h)
        _load("regs")[f"modified_lu_regs<{ctype}, {r}>"]((1,), (32, _LANES), args)
    else:
        _load("rows")[f"modified_lu_rows<{ctype}>"]((1,), (_THREADS,), args)
