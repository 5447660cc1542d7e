"""The eigenvalues of a real symmetric band matrix on the GPU: stages 2 and 3 of the two-stage
eigensolver (``ops/lapack/eigh.py``) without eigenvectors, in two CUDA kernels. The chase also
serves the eigenvectors' route (``_gpu_band_eigh``), keeping every reflector there.

Stage 2, band -> tridiagonal by bulge chasing
---------------------------------------------
The Householder form of LAPACK's ``xsytrd_sb2st`` (Haidar, Ltaief and Dongarra, SC11): sweep
``s`` annihilates column ``s`` below its subdiagonal, then chases the bulge it creates down the
band, ``b`` rows per task. With ``R_k = [s + 1 + k b, s + 1 + (k + 1) b)``:

* task ``(s, 0)``: the reflector ``H_0`` of ``A[R_0, s]`` (``A[s + 1, s] = beta``, the rest
  zero), then ``A[R_0, R_0] := H_0 A[R_0, R_0] H_0``;
* task ``(s, k >= 1)``: ``E = A[R_k, R_{k-1}] := E H_{k-1}`` (which fills ``E``), ``H_k`` the
  reflector of ``E``'s first column, ``E[:, 1:] := H_k E[:, 1:]``, then
  ``A[R_k, R_k] := H_k A[R_k, R_k] H_k``. The rest of ``E``'s fill is the next sweep's to
  annihilate, so the lower band holds ``2 b`` diagonals while the chase runs.

Task ``(s, k)`` reads and writes elements of rows ``R_k`` only (``E`` and the lower triangle
of ``A[R_k, R_k]``; task ``(s, 0)`` also column ``s``), so tasks whose row ranges are disjoint
commute. Sweep ``s + 1``'s task ``k'`` has rows ``[s + 2 + k' b, s + 2 + (k' + 1) b)``, which
meet sweep ``s``'s ``R_k`` only for ``k`` in ``{k', k' + 1}``. So at stage ``t`` every sweep
``s`` with ``0 <= k = t - LAG s < K_s`` runs its task ``k`` at once, ``LAG = 2``
(``K_s = ceil((n - 1 - s) / b)`` tasks), and the sequential order's result comes out after
``max_s (LAG s + K_s)`` stages, about ``2 n``. One persistent kernel runs them all: a
cooperative launch, a thread block per task (looping when a stage has more tasks than blocks),
``grid.sync()``
between stages (it orders the stages' global writes; loads go through ``__ldcg``, past the
SM's L1). The reflector of task ``(s, k)`` passes to ``(s, k + 1)`` through row ``s`` of a
``n x b`` global array, or, where every reflector is kept (:func:`chase` with ``keep``),
through its own slot ``s K_0 + k`` of a ``(n - 2) K_0 x b`` one.

Inside a task the block works on ``E`` and then the symmetric ``A[R_k, R_k]``, each copied to
shared memory (``b x (b + 1)``, padded against bank conflicts), in *phases*: device functions
of ``(tid, nthreads, ...)`` in which each thread touches its own elements, separated by
``__syncthreads()``. Every sum is split the same way on every run (``G = nthreads / b``
interleaved partial sums, added in order), so the result is the same bytes on every run and
every process. The host build of the tests (``tests/test_gpu_band_eig.py``) runs the same
source with the threads of a phase one after another, in both orders, which checks the
phases' partitioning without a GPU.

Stage 3, eigenvalues of the tridiagonal matrix by bisection
-----------------------------------------------------------
One thread per wanted eigenvalue ``j``: bisection on Gershgorin's interval with the Sturm
count of ``T - x I`` (LAPACK's ``xlaneg`` recurrence, pivots of magnitude below ``pivmin``
replaced by ``-pivmin``), to LAPACK ``xstebz``'s default tolerance ``eps * ||T||_1``. The
count is monotone in ``x`` and every thread bisects the same interval with the same midpoints,
so the eigenvalues come out in ascending order. In float64 for both real dtypes.

The kernels take the band in LAPACK's column-major lower band storage with ``2 b`` diagonals:
``ab[c * 2 b + (r - c)] = A[r, c]``, i.e. a C-ordered ``(n, 2 b)`` array.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

__all__ = [
    "SOURCE", "MAX_BAND", "THREADS", "band_eigvals", "chase", "device_band", "stage_count",
    "shared_bytes",
]  # fmt: skip

#: the widest band the chase takes (two ``b x (b + 1)`` tiles must not exceed a block's
#: default 48 KiB of shared memory; the tile is reused for ``E`` and then ``A[R_k, R_k]``)
MAX_BAND = 64

#: threads per block of the chase
THREADS = 256

#: stages between the starts of two consecutive sweeps of the chase
LAG = 2

#: threads per block of the bisection
_BISECT_THREADS = 128

SOURCE = r"""
#ifndef BLASMP_HOST_BUILD
#include <cooperative_groups.h>
#define BLASMP_LOAD(p) __ldcg(p)
#else
#define BLASMP_LOAD(p) (*(p))
#endif

// A[r, c] (r >= c) of the band: column-major lower storage, lda = 2 b
#define BLASMP_AB(r, c) ab[(long long)(c) * lda + ((r) - (c))]

template <typename T> __device__ __forceinline__ T blasmp_abs(T x) { return x < 0 ? -x : x; }

// ---- phases: each thread touches its own elements; barriers between phases ----------------

// loads in flight per thread: a batch of global loads is issued before any is used (one L2
// latency per batch, not per element)
#define BLASMP_BATCH 8

// tile[i][j] = A[r0 + i, c0 + j] (i < m, j < p), E of a task (every element lies in the band)
template <typename T>
__device__ void ph_load_block(int tid, int nt, const T* ab, long long lda, long long r0,
                              long long c0, int m, int p, T* tile, int ld)
{
    const int total = m * p;
    for (int base = tid; base < total; base += nt * BLASMP_BATCH) {
        T r[BLASMP_BATCH];
#pragma unroll
        for (int u = 0; u < BLASMP_BATCH; ++u) {
            int idx = base + u * nt;
            if (idx < total) r[u] = BLASMP_LOAD(&BLASMP_AB(r0 + idx % m, c0 + idx / m));
        }
#pragma unroll
        for (int u = 0; u < BLASMP_BATCH; ++u) {
            int idx = base + u * nt;
            if (idx < total) tile[(idx % m) * ld + idx / m] = r[u];
        }
    }
}

template <typename T>
__device__ void ph_store_block(int tid, int nt, T* ab, long long lda, long long r0,
                               long long c0, int m, int p, const T* tile, int ld)
{
    for (int idx = tid; idx < m * p; idx += nt) {
        int i = idx % m, j = idx / m;
        BLASMP_AB(r0 + i, c0 + j) = tile[i * ld + j];
    }
}

// tile = A[r0:r0+m, r0:r0+m], both triangles from the lower one
template <typename T>
__device__ void ph_load_sym(int tid, int nt, const T* ab, long long lda, long long r0, int m,
                            T* tile, int ld)
{
    const int total = m * m;
    for (int base = tid; base < total; base += nt * BLASMP_BATCH) {
        T r[BLASMP_BATCH];
#pragma unroll
        for (int u = 0; u < BLASMP_BATCH; ++u) {
            int idx = base + u * nt;
            if (idx < total) {
                int i = idx % m, j = idx / m;
                int hi = i > j ? i : j, lo = i > j ? j : i;
                r[u] = BLASMP_LOAD(&BLASMP_AB(r0 + hi, r0 + lo));
            }
        }
#pragma unroll
        for (int u = 0; u < BLASMP_BATCH; ++u) {
            int idx = base + u * nt;
            if (idx < total) tile[(idx % m) * ld + idx / m] = r[u];
        }
    }
}

// the reflector of the previous task (length b) and its tau, from slot `slot` of V (row
// slot of the slots x b array V, entry slot of tau)
template <typename T>
__device__ void ph_load_reflector(int tid, int nt, const T* V, const T* tau, long long slot,
                                  int b, T* v, T* sc)
{
    for (int i = tid; i < b; i += nt) v[i] = BLASMP_LOAD(&V[slot * b + i]);
    if (tid == 0) sc[3] = BLASMP_LOAD(&tau[slot]);
}

template <typename T>
__device__ void ph_store_reflector(int tid, int nt, T* V, T* tau, long long slot, int b, int m,
                                   const T* v, const T* sc)
{
    for (int i = tid; i < b; i += nt) V[slot * b + i] = i < m ? v[i] : T(0);
    if (tid == 0) tau[slot] = sc[0];
}

// part[g * b + i] = sum over j = g, g + G, ... < p of tile[i][j] * x[j]   (i < m)
template <typename T>
__device__ void ph_rows_dot(int tid, int nt, const T* tile, int ld, int m, int p, const T* x,
                            T* part, int b, int G)
{
    for (int idx = tid; idx < m * G; idx += nt) {
        int i = idx % m, g = idx / m;
        T acc = 0;
        for (int j = g; j < p; j += G) acc += tile[i * ld + j] * x[j];
        part[g * b + i] = acc;
    }
}

// part[g * b + j] = sum over i = g, g + G, ... < m of x[i] * tile[i][j]   (j0 <= j < p)
template <typename T>
__device__ void ph_cols_dot(int tid, int nt, const T* tile, int ld, int m, int j0, int p,
                            const T* x, T* part, int b, int G)
{
    int w = p - j0;
    for (int idx = tid; idx < w * G; idx += nt) {
        int j = j0 + idx % w, g = idx / w;
        T acc = 0;
        for (int i = g; i < m; i += G) acc += x[i] * tile[i * ld + j];
        part[g * b + j] = acc;
    }
}

// y[i] = scale * sum_g part[g * b + i]   (i0 <= i < m), scale = sc[si]
template <typename T>
__device__ void ph_sum_parts(int tid, int nt, const T* part, int b, int G, int i0, int m,
                             const T* sc, int si, T* y)
{
    for (int i = i0 + tid; i < m; i += nt) {
        T acc = 0;
        for (int g = 0; g < G; ++g) acc += part[g * b + i];
        y[i] = sc[si] * acc;
    }
}

// tile[i][j] -= y[i] * x[j]   (i < m, j0 <= j < p): a rank-1 update
template <typename T>
__device__ void ph_rank1(int tid, int nt, T* tile, int ld, int m, int j0, int p, const T* y,
                         const T* x)
{
    int w = p - j0;
    for (int idx = tid; idx < m * w; idx += nt) {
        int i = idx % m, j = j0 + idx / m;
        tile[i * ld + j] -= y[i] * x[j];
    }
}

// BLASMP_NSUM interleaved partial sums of a short dot product, in sc[8 + g], for one thread to
// add in order (a chain of m / BLASMP_NSUM + BLASMP_NSUM additions, not m)
#define BLASMP_NSUM 8

// sc[8 + g] = sum over i = i0 + g, i0 + g + NSUM, ... < m of x[i * incx] * y[i * incy]
template <typename T>
__device__ void ph_partial_dot(int tid, int nt, int i0, int m, const T* x, int incx,
                               const T* y, int incy, T* sc)
{
    for (int g = tid; g < BLASMP_NSUM; g += nt) {
        T acc = 0;
        for (int i = i0 + g; i < m; i += BLASMP_NSUM) acc += x[i * incx] * y[i * incy];
        sc[8 + g] = acc;
    }
}

// the reflector (LAPACK xlarfg) of the column tile[0:m][0], from ph_partial_dot's sum of
// squares of tile[1:m][0]: sc[0] = tau, sc[1] = the scale of v, sc[2] = beta;
// tile[0][0] := beta. One thread.
template <typename T>
__device__ void ph_reflector(int tid, T* tile, int ld, int m, T* sc)
{
    if (tid != 0) return;
    T alpha = tile[0], ss = 0;
    for (int g = 0; g < BLASMP_NSUM; ++g) ss += sc[8 + g];
    if (ss == T(0)) {
        sc[0] = 0; sc[1] = 0; sc[2] = alpha;
        return;
    }
    T beta = sqrt(alpha * alpha + ss);
    if (alpha > 0) beta = -beta;
    sc[0] = (beta - alpha) / beta;
    sc[1] = T(1) / (alpha - beta);
    sc[2] = beta;
    tile[0] = beta;
}

// v = (1, tile[1:m][0] * scale); tile[1:m][0] := 0
template <typename T>
__device__ void ph_vector(int tid, int nt, T* tile, int ld, int m, const T* sc, T* v)
{
    for (int i = tid; i < m; i += nt) {
        if (i == 0) {
            v[0] = 1;
        } else {
            v[i] = tile[i * ld] * sc[1];
            tile[i * ld] = 0;
        }
    }
}

// A[r0 + i, r0 + j] := tile[i][j] - v[i] u[j] - u[i] v[j] for i >= j, stored into the band,
// with u = w + alpha v and alpha = -tau / 2 (w . v) from ph_partial_dot's partial sums (every
// thread adds them in the same order: the same alpha everywhere)
template <typename T>
__device__ void ph_sym_rank2_store(int tid, int nt, T* ab, long long lda, long long r0, int m,
                                   const T* tile, int ld, const T* v, const T* w, const T* sc)
{
    T acc = 0;
    for (int g = 0; g < BLASMP_NSUM; ++g) acc += sc[8 + g];
    const T alpha = T(-0.5) * sc[0] * acc;
    for (int idx = tid; idx < m * m; idx += nt) {
        int i = idx % m, j = idx / m;
        if (i >= j) {
            T ui = w[i] + alpha * v[i], uj = w[j] + alpha * v[j];
            BLASMP_AB(r0 + i, r0 + j) = tile[i * ld + j] - v[i] * uj - ui * v[j];
        }
    }
}

// ---- one task, as a sequence of phases --------------------------------------------------------
// BLASMP_PHASE(call) runs `call` on every thread of the block, then a barrier. The device build
// runs it as-is; the host build loops over the threads (see tests/test_gpu_band_eig.py).
#ifndef BLASMP_HOST_BUILD
#define BLASMP_PHASE(call) do { { const int tid = threadIdx.x; call; } __syncthreads(); } while (0)
#define BLASMP_NT ((int)blockDim.x)
#endif

// shared memory: tile[b * (b + 1)] | v[b] | w[b] | vp[b] | part[G * b] | sc[16]
// the reflector of task (s, k) is stored in slot s * vs + k * vk of (V, tau): vs = 1, vk = 0
// keeps one slot per sweep (each task reads its predecessor's, then overwrites it);
// vs = K_0, vk = 1 keeps every reflector (for the eigenvectors' back-transformation)
template <typename T>
__device__ void blasmp_chase_task(T* ab, T* V, T* tau, long long n, int b, long long s,
                                  long long k, long long vs, long long vk, T* smem)
{
    const int nt = BLASMP_NT;
    const long long lda = 2 * (long long)b;
    const int ld = b + 1;
    const int G = nt / b > 0 ? nt / b : 1;
    T* tile = smem;
    T* v = tile + b * ld;
    T* w = v + b;
    T* vp = w + b;
    T* part = vp + b;
    T* sc = part + G * b;
    long long r0 = s + 1 + k * b;
    int m = (int)((n - r0) < b ? (n - r0) : b);
    if (k == 0) {
        // the column s below its diagonal: tile[i][0] = A[s + 1 + i, s]
        BLASMP_PHASE(ph_load_block(tid, nt, ab, lda, r0, s, m, 1, tile, ld));
        BLASMP_PHASE(ph_partial_dot(tid, nt, 1, m, tile, ld, tile, ld, sc));
        BLASMP_PHASE(ph_reflector(tid, tile, ld, m, sc));
        BLASMP_PHASE(ph_vector(tid, nt, tile, ld, m, sc, v));
        BLASMP_PHASE((ph_store_block(tid, nt, ab, lda, r0, s, m, 1, tile, ld),
                      ph_store_reflector(tid, nt, V, tau, s * vs, b, m, v, sc)));
    } else {
        // E = A[R_k, R_{k-1}] (m x b) := E H_{k-1}
        long long c0 = r0 - b;
        BLASMP_PHASE((ph_load_block(tid, nt, ab, lda, r0, c0, m, b, tile, ld),
                      ph_load_reflector(tid, nt, V, tau, s * vs + (k - 1) * vk, b, vp, sc)));
        BLASMP_PHASE(ph_rows_dot(tid, nt, tile, ld, m, b, vp, part, b, G));
        BLASMP_PHASE(ph_sum_parts(tid, nt, part, b, G, 0, m, sc, 3, w));  // w = tau' E v'
        BLASMP_PHASE(ph_rank1(tid, nt, tile, ld, m, 0, b, w, vp));
        // H_k from E's first column, applied to the rest of E from the left
        BLASMP_PHASE(ph_partial_dot(tid, nt, 1, m, tile, ld, tile, ld, sc));
        BLASMP_PHASE(ph_reflector(tid, tile, ld, m, sc));
        BLASMP_PHASE(ph_vector(tid, nt, tile, ld, m, sc, v));
        BLASMP_PHASE(ph_cols_dot(tid, nt, tile, ld, m, 1, b, v, part, b, G));
        BLASMP_PHASE(ph_sum_parts(tid, nt, part, b, G, 1, b, sc, 0, w));  // w = tau v^T E
        BLASMP_PHASE(ph_rank1(tid, nt, tile, ld, m, 1, b, v, w));
        BLASMP_PHASE((ph_store_block(tid, nt, ab, lda, r0, c0, m, b, tile, ld),
                      ph_store_reflector(tid, nt, V, tau, s * vs + k * vk, b, m, v, sc)));
    }
    // A[R_k, R_k] := H_k A[R_k, R_k] H_k  (LAPACK xsytd2: w = tau A v, w -= tau/2 (w.v) v,
    // A -= v w^T + w v^T)
    BLASMP_PHASE(ph_load_sym(tid, nt, ab, lda, r0, m, tile, ld));
    BLASMP_PHASE(ph_rows_dot(tid, nt, tile, ld, m, m, v, part, b, G));
    BLASMP_PHASE(ph_sum_parts(tid, nt, part, b, G, 0, m, sc, 0, w));
    BLASMP_PHASE(ph_partial_dot(tid, nt, 0, m, w, 1, v, 1, sc));
    BLASMP_PHASE(ph_sym_rank2_store(tid, nt, ab, lda, r0, m, tile, ld, v, w, sc));
}

// stages between the starts of two consecutive sweeps (module docstring)
#define BLASMP_LAG @LAG@

// the tasks of sweep s: k = 0 .. ceil((n - 1 - s) / b) - 1
__device__ __forceinline__ long long blasmp_sweep_tasks(long long n, int b, long long s)
{
    return (n - 1 - s + b - 1) / b;
}

#ifndef BLASMP_HOST_BUILD
// every stage of the chase in one cooperative launch (module docstring)
template <typename T>
__global__ void blasmp_band_chase(T* ab, T* V, T* tau, long long n, int b, long long sweeps,
                                  long long stages, long long vs, long long vk)
{
    extern __shared__ unsigned char blasmp_raw[];
    T* smem = reinterpret_cast<T*>(blasmp_raw);
    cooperative_groups::grid_group grid = cooperative_groups::this_grid();
    for (long long t = 0; t < stages; ++t) {
        long long s_hi = t / BLASMP_LAG < sweeps - 1 ? t / BLASMP_LAG : sweeps - 1;
        for (long long i = blockIdx.x;; i += gridDim.x) {
            long long s = s_hi - i;
            if (s < 0) break;
            long long k = t - BLASMP_LAG * s;
            if (k >= blasmp_sweep_tasks(n, b, s)) break;  // and for every smaller s
            blasmp_chase_task<T>(ab, V, tau, n, b, s, k, vs, vk, smem);
        }
        grid.sync();
    }
}
#endif

// the number of eigenvalues of the tridiagonal (d, e2 = e^2) below x (LAPACK xlaneg's
// recurrence without its blocking; pivots below pivmin in magnitude become -pivmin)
__device__ __forceinline__ long long blasmp_sturm(const double* d, const double* e2, long long n,
                                                  double x, double pivmin)
{
    long long count = 0;
    double q = d[0] - x;
    if (blasmp_abs(q) < pivmin) q = -pivmin;
    if (q < 0) ++count;
    for (long long i = 1; i < n; ++i) {
        q = d[i] - x - e2[i - 1] / q;
        if (blasmp_abs(q) < pivmin) q = -pivmin;
        if (q < 0) ++count;
    }
    return count;
}

// w[j] = eigenvalue first + j (ascending, 0-based) of the tridiagonal, j < count
__global__ void blasmp_tridiag_bisect(const double* d, const double* e2, long long n,
                                      double pivmin, double gl, double gu, double abstol,
                                      long long first, long long count, double* w)
{
    long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= count) return;
    long long want = first + j + 1;  // the smallest x with want eigenvalues below it
    double lo = gl, hi = gu;
    for (int it = 0; it < 200; ++it) {
        double mid = lo + 0.5 * (hi - lo);
        double big = blasmp_abs(lo) > blasmp_abs(hi) ? blasmp_abs(lo) : blasmp_abs(hi);
        double tol = abstol > 2.220446049250313e-16 * big ? abstol : 2.220446049250313e-16 * big;
        if (!(hi - lo > tol) || mid <= lo || mid >= hi) break;
        if (blasmp_sturm(d, e2, n, mid, pivmin) >= want) hi = mid; else lo = mid;
    }
    w[j] = lo + 0.5 * (hi - lo);
}

// out[i] = the number of eigenvalues below xs[i]
__global__ void blasmp_tridiag_count(const double* d, const double* e2, long long n,
                                     double pivmin, const double* xs, long long k,
                                     long long* out)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < k) out[i] = blasmp_sturm(d, e2, n, xs[i], pivmin);
}
"""

SOURCE = SOURCE.replace("@LAG@", str(LAG))

_CHASE = {np.dtype(np.float64): "blasmp_band_chase<double>",
          np.dtype(np.float32): "blasmp_band_chase<float>"}  # fmt: skip
_NAMES = (*_CHASE.values(), "blasmp_tridiag_bisect", "blasmp_tridiag_count")

_module: Any = None

#: seconds of the last :func:`band_eigvals` call's chase and bisection (the stream waited for
#: around each)
LAST_TIMES: dict[str, float] = {}


def _kernels() -> dict[str, Any]:
    """Compile (NVRTC, cached on disk by CuPy) and load the kernels once per process."""
    global _module
    if _module is None:
        import cupy

        _module = cupy.RawModule(
            code=SOURCE, name_expressions=_NAMES, enable_cooperative_groups=True
        )
    return {name: _module.get_function(name) for name in _NAMES}


def stage_count(n: int, b: int) -> int:
    """The chase's stages: ``max_s (LAG s + K_s)`` over the sweeps ``s = 0 .. n - 3``."""
    if n < 3 or b < 2:
        return 0
    s = np.arange(n - 2)
    return int((LAG * s + stage_tasks(n, b, s)).max())


def stage_tasks(n: int, b: int, s: Any) -> Any:
    """``K_s``, the tasks of sweep ``s`` (an int or an array of them):
    ``ceil((n - 1 - s) / b)``."""
    return -(-(n - 1 - s) // b)


def shared_bytes(b: int, itemsize: int, threads: int = THREADS) -> int:
    """The chase's shared memory per block: the tile, three vectors, the partial sums and
    sixteen scalars."""
    g = max(1, threads // b)
    return (b * (b + 1) + 3 * b + g * b + 16) * itemsize


def tridiagonal_inputs(d: np.ndarray, e: np.ndarray) -> tuple[float, float, float, float]:
    """Gershgorin's interval ``(gl, gu)`` widened as LAPACK ``xstebz`` widens it, ``pivmin``
    and the bisection's absolute tolerance ``eps ||T||_1`` of the tridiagonal ``(d, e)``."""
    n = d.shape[0]
    ae = np.abs(e)
    rad = np.zeros(n)
    rad[:-1] += ae
    rad[1:] += ae
    gl, gu = float((d - rad).min()), float((d + rad).max())
    eps = np.finfo(np.float64).eps
    safmin = np.finfo(np.float64).tiny
    tnorm = max(abs(gl), abs(gu))
    pivmin = safmin * max(1.0, float((ae * ae).max()) if ae.size else 1.0)
    gl -= 2.1 * tnorm * eps * n + 4.2 * pivmin
    gu += 2.1 * tnorm * eps * n + 4.2 * pivmin
    return gl, gu, pivmin, eps * tnorm


def band_eigvals(
    band: np.ndarray,
    subset_by_index: tuple[int, int] | None = None,
    subset_by_value: tuple[float, float] | None = None,
) -> np.ndarray:
    """Eigenvalues (ascending) of the real symmetric band matrix in LAPACK's lower band storage
    ``band[i - j, j] = B[i, j]`` (a host array of ``b + 1 <= MAX_BAND + 1`` rows, float32 or
    float64), computed on the current GPU: the chase to tridiagonal form and bisection
    (module docstring). The matrix is scaled by a power of two near its largest element first
    (exact), as LAPACK's drivers scale. A subset by index ``(lo, hi)`` (inclusive) or by value
    (the eigenvalues in ``(vl, vu]``). Returns a host float array of the band's dtype."""
    import cupy

    LAST_TIMES.clear()
    dtype = np.dtype(band.dtype)
    if dtype not in _CHASE:
        raise TypeError(f"band_eigvals: real float32/float64 band needed, got {dtype}")
    b, n = band.shape[0] - 1, band.shape[1]
    if b > MAX_BAND:
        raise ValueError(f"band_eigvals: bandwidth {b} exceeds MAX_BAND = {MAX_BAND}")
    if n == 0:
        return np.zeros(0, dtype)
    anrm = float(np.abs(band).max())
    if not np.isfinite(anrm):
        k = _subset_size(n, subset_by_index)
        return np.full(k if subset_by_value is None else 0, np.nan, dtype)
    if anrm == 0:
        return np.zeros(
            _subset_size(n, subset_by_index)
            if subset_by_value is None
            else (n if subset_by_value[0] < 0 <= subset_by_value[1] else 0),
            dtype,
        )
    scale = 2.0 ** -np.frexp(anrm)[1]
    bw = min(b, n - 1)
    kern = _kernels()
    stream = cupy.cuda.get_current_stream()
    t0 = time.perf_counter()
    if bw >= 2:
        ab = device_band(band, bw, scale)
        chase(ab, bw, keep=False)
        d = ab[:, 0].astype(np.float64)
        e = ab[: n - 1, 1].astype(np.float64)
    else:
        d = cupy.asarray(band[0] * dtype.type(scale), np.float64)
        e = cupy.asarray(band[1, : n - 1] * dtype.type(scale) if b >= 1 else np.zeros(n - 1))
        e = e.astype(np.float64)
    dh, eh = cupy.asnumpy(d), cupy.asnumpy(e)
    t1 = time.perf_counter()
    gl, gu, pivmin, abstol = tridiagonal_inputs(dh, eh)
    e2 = e * e
    if subset_by_value is not None:
        xs = cupy.asarray(np.array(subset_by_value, np.float64) * scale)
        counts = cupy.empty(2, np.int64)
        kern["blasmp_tridiag_count"](
            (1,), (2,), (d, e2, np.int64(n), np.float64(pivmin), xs, np.int64(2), counts)
        )
        c = cupy.asnumpy(counts)
        first, count = int(c[0]), int(c[1] - c[0])
    elif subset_by_index is not None:
        first, count = subset_by_index[0], subset_by_index[1] - subset_by_index[0] + 1
    else:
        first, count = 0, n
    w = cupy.empty(max(count, 0), np.float64)
    if count > 0:
        kern["blasmp_tridiag_bisect"](
            (-(-count // _BISECT_THREADS),), (_BISECT_THREADS,),
            (d, e2, np.int64(n), np.float64(pivmin), np.float64(gl), np.float64(gu),
             np.float64(abstol), np.int64(first), np.int64(count), w),
        )  # fmt: skip
    out = (cupy.asnumpy(w) / scale).astype(dtype)
    stream.synchronize()
    LAST_TIMES.update({"chase": t1 - t0, "bisection": time.perf_counter() - t1})
    return out


def device_band(band: np.ndarray, bw: int, scale: float) -> Any:
    """The chase's working band on the device: ``scale`` times the host band's ``bw + 1``
    diagonals in the kernels' storage (a C-ordered ``(n, 2 bw)`` array, zeros beyond)."""
    import cupy

    dtype, n = np.dtype(band.dtype), band.shape[1]
    ab = cupy.zeros((n, 2 * bw), dtype)
    ab[:, : bw + 1] = cupy.asarray(np.ascontiguousarray(band[: bw + 1].T) * dtype.type(scale))
    return ab


def reflector_slots(n: int, bw: int) -> int:
    """``K_0 = ceil((n - 1) / bw)``: the slots per sweep when the chase keeps every reflector."""
    return int(stage_tasks(n, bw, 0))


def chase(ab: Any, bw: int, keep: bool) -> tuple[Any, Any]:
    """Run the chase on the device band ``ab`` (:func:`device_band`; overwritten by the
    tridiagonal matrix in its first two columns) on the current stream. Returns the reflectors
    ``(V, tau)``: with ``keep``, every one, ``V`` of shape ``(n - 2, K_0, bw)`` and ``tau`` of
    ``(n - 2, K_0)`` (``V[s, k]``: task ``k`` of sweep ``s``, acting on rows
    ``s + 1 + k bw ..``, its first entry 1; zeros where sweep ``s`` has fewer tasks);
    otherwise one slot per sweep, overwritten."""
    import cupy

    n, dtype = ab.shape[0], np.dtype(ab.dtype)
    kmax = reflector_slots(n, bw)
    sweeps, stages = n - 2, stage_count(n, bw)
    slots = sweeps * kmax if keep else n
    v = cupy.zeros((slots, bw), dtype)
    tau = cupy.zeros(slots, dtype)
    per_stage = -(-stage_tasks(n, bw, 0) // LAG) + 1  # the most tasks at one stage
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    blocks = max(1, min(per_stage, sms))
    vs, vk = (kmax, 1) if keep else (1, 0)
    _kernels()[_CHASE[dtype]](
        (blocks,), (THREADS,),
        (ab, v, tau, np.int64(n), np.int32(bw), np.int64(sweeps), np.int64(stages),
         np.int64(vs), np.int64(vk)),
        shared_mem=shared_bytes(bw, dtype.itemsize),
    )  # fmt: skip
    if keep:
        return v.reshape(sweeps, kmax, bw), tau.reshape(sweeps, kmax)
    return v, tau


def _subset_size(n: int, by_index: tuple[int, int] | None) -> int:
    return n if by_index is None else by_index[1] - by_index[0] + 1
