"""The GPU band eigenvalue kernels (``blasmp_array.backends._gpu_band_eig``), their CUDA source
compiled as host C++: the bulge chase run in the order the cooperative kernel runs it (stage by
stage, the tasks of a stage in either order, the threads of a block phase by phase in either
order) gives the sequential order's bytes and an exactly tridiagonal matrix with the band's
eigenvalues; the bisection finds LAPACK's eigenvalues within the testers' bound."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from blasmp_array.backends import _gpu_band_eig as gbe

_SHIM = r"""
#include <cmath>
#include <cstdlib>
#include <vector>
#define BLASMP_HOST_BUILD
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
using std::sqrt;
struct blasmp_dim3 { long long x; };
static blasmp_dim3 blockIdx, blockDim, gridDim, threadIdx;
static int blasmp_host_nt = 1;
static int blasmp_host_reverse = 0;
#define BLASMP_NT blasmp_host_nt
#define BLASMP_PHASE(call) do { \
    for (int blasmp_i = 0; blasmp_i < blasmp_host_nt; ++blasmp_i) { \
        const int tid = blasmp_host_reverse ? blasmp_host_nt - 1 - blasmp_i : blasmp_i; call; \
    } } while (0)
"""

_DRIVER = r"""
// order 0: the sequential order (sweep by sweep); 1: stage by stage, a stage's tasks by
// descending sweep (the kernel's); 2: stage by stage, ascending sweep
template <typename T>
static void host_chase(T* ab, T* V, T* tau, long long n, int b, int nt, int order,
                       int reverse_threads, long long vs, long long vk)
{
    blasmp_host_nt = nt;
    blasmp_host_reverse = reverse_threads;
    int G = nt / b > 0 ? nt / b : 1;
    std::vector<T> smem(b * (b + 1) + 3 * b + G * b + 16);
    long long sweeps = n - 2;
    if (order == 0) {
        for (long long s = 0; s < sweeps; ++s)
            for (long long k = 0; k < blasmp_sweep_tasks(n, b, s); ++k)
                blasmp_chase_task<T>(ab, V, tau, n, b, s, k, vs, vk, smem.data());
        return;
    }
    long long stages = 0;
    for (long long s = 0; s < sweeps; ++s) {
        long long last = BLASMP_LAG * s + blasmp_sweep_tasks(n, b, s);
        if (last > stages) stages = last;
    }
    for (long long t = 0; t < stages; ++t) {
        long long s_hi = t / BLASMP_LAG < sweeps - 1 ? t / BLASMP_LAG : sweeps - 1;
        std::vector<long long> ss;
        for (long long i = 0;; ++i) {
            long long s = s_hi - i;
            if (s < 0 || t - BLASMP_LAG * s >= blasmp_sweep_tasks(n, b, s)) break;
            ss.push_back(s);
        }
        for (size_t q = 0; q < ss.size(); ++q) {
            long long s = order == 1 ? ss[q] : ss[ss.size() - 1 - q];
            blasmp_chase_task<T>(ab, V, tau, n, b, s, t - BLASMP_LAG * s, vs, vk, smem.data());
        }
    }
}

extern "C" void chase_d(double* ab, double* V, double* tau, long long n, int b, int nt,
                        int order, int rev, long long vs, long long vk)
{ host_chase<double>(ab, V, tau, n, b, nt, order, rev, vs, vk); }
extern "C" void chase_f(float* ab, float* V, float* tau, long long n, int b, int nt,
                        int order, int rev, long long vs, long long vk)
{ host_chase<float>(ab, V, tau, n, b, nt, order, rev, vs, vk); }
extern "C" void bisect(const double* d, const double* e2, long long n, double pivmin,
                       double gl, double gu, double abstol, long long first, long long count,
                       double* w)
{
    blockDim.x = 1; threadIdx.x = 0;
    for (long long j = 0; j < count; ++j) {
        blockIdx.x = j;
        blasmp_tridiag_bisect(d, e2, n, pivmin, gl, gu, abstol, first, count, w);
    }
}
extern "C" void count(const double* d, const double* e2, long long n, double pivmin,
                      const double* xs, long long k, long long* out)
{
    blockDim.x = 1; threadIdx.x = 0;
    for (long long j = 0; j < k; ++j) {
        blockIdx.x = j;
        blasmp_tridiag_count(d, e2, n, pivmin, xs, k, out);
    }
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler to build the GPU kernels' source for the host")
    d = tmp_path_factory.mktemp("gpu_band_eig_host")
    (d / "k.cpp").write_text(_SHIM + gbe.SOURCE + _DRIVER)
    so = d / "k.so"
    cmd = [cxx, "-O2", "-ffp-contract=off", "-shared", "-fPIC", "-w", "-o", str(so)]
    cmd.append(str(d / "k.cpp"))
    subprocess.run(cmd, check=True, capture_output=True)
    lib = ctypes.CDLL(str(so))
    p, i64, i32, f64 = ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int, ctypes.c_double
    for name in ("chase_d", "chase_f"):
        getattr(lib, name).argtypes = [p, p, p, i64, i32, i32, i32, i32, i64, i64]
    lib.bisect.argtypes = [p, p, i64, f64, f64, f64, f64, i64, i64, p]
    lib.count.argtypes = [p, p, i64, f64, p, i64, p]
    return lib


def _random_band(n, b, dtype, rng, spectrum=None):
    """A symmetric band matrix (dense) of bandwidth b; with ``spectrum``, a band matrix with
    roughly that spread (a graded diagonal plus a small band)."""
    a = rng.standard_normal((n, n))
    a = np.tril(a) - np.tril(a, -b - 1)
    if spectrum is not None:
        a = a * 1e-3 + np.diag(spectrum)
    a = np.tril(a)
    a = a + np.tril(a, -1).T
    return a.astype(dtype)


def _to_kernel_band(a, b):
    """The kernels' storage: ``ab[c, r - c] = A[r, c]``, ``2 b`` diagonals."""
    n = a.shape[0]
    ab = np.zeros((n, 2 * b), a.dtype)
    for dgl in range(min(b + 1, n)):
        ab[: n - dgl, dgl] = np.diagonal(a, -dgl)
    return ab


def _chase(lib, a, b, nt, order, rev, keep=False):
    """The band after the chase; with ``keep`` also every reflector, as
    :func:`_gpu_band_eig.chase` keeps them: ``(ab, v (sweeps, K_0, b), tau (sweeps, K_0))``."""
    n = a.shape[0]
    ab = _to_kernel_band(a, b)
    kmax = gbe.reflector_slots(n, b)
    slots = (n - 2) * kmax if keep else n
    # kept slots the chase does not reach must stay zero (the identity); one slot per sweep
    # is poisoned, since each is written before it is read
    fill = 0 if keep else np.nan
    v = np.full((slots, b), fill, a.dtype)
    tau = np.full(slots, fill, a.dtype)
    fn = lib.chase_d if a.dtype == np.float64 else lib.chase_f
    vs, vk = (kmax, 1) if keep else (1, 0)
    fn(ab.ctypes.data, v.ctypes.data, tau.ctypes.data, n, b, nt, order, rev, vs, vk)
    if keep:
        return ab, v.reshape(n - 2, kmax, b), tau.reshape(n - 2, kmax)
    return ab


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "n,b,nt", [(3, 2, 1), (10, 2, 4), (17, 3, 7), (40, 8, 32), (61, 16, 256), (97, 5, 12),
               (130, 64, 256), (64, 63, 64)],
)  # fmt: skip
def test_chase_is_the_sequential_order_and_tridiagonal(lib, dtype, n, b, nt):
    """The kernel's stage order, with a stage's tasks and a phase's threads in either order,
    gives the sequential order's bytes (so the tasks of a stage touch disjoint elements and a
    phase's threads disjoint ones); the result is exactly tridiagonal with the band's
    eigenvalues."""
    rng = np.random.default_rng(n * 100 + b)
    a = _random_band(n, b, dtype, rng)
    ref = _chase(lib, a, b, nt, 0, 0)
    for order, rev in ((1, 0), (2, 1), (1, 1)):
        got = _chase(lib, a, b, nt, order, rev)
        np.testing.assert_array_equal(got, ref)
    assert np.all(ref[:, 2:] == 0), "entries beyond the first subdiagonal remain"
    d, e = ref[:, 0].astype(np.float64), ref[: n - 1, 1].astype(np.float64)
    t = np.diag(d) + np.diag(e, -1) + np.diag(e, 1)
    want = np.linalg.eigvalsh(a.astype(np.float64))
    eps = np.finfo(dtype).eps
    bound = 60 * n * eps * np.abs(a).sum(axis=0).max()
    assert np.abs(np.linalg.eigvalsh(t) - want).max() <= bound


def _reflector_product(v, tau, n):
    """``Q2 = prod H(s, k)`` in the chase's sequential order, formed densely in float64."""
    q = np.eye(n)
    sweeps, kmax, b = v.shape
    for s in range(sweeps):
        for k in range(kmax):
            r0 = s + 1 + k * b
            m = min(b, n - r0)
            if m <= 0:
                continue
            x = v[s, k, :m].astype(np.float64)
            q[:, r0 : r0 + m] -= np.outer(q[:, r0 : r0 + m] @ x, tau[s, k] * x)
    return q


def _tridiagonal(ab):
    n = ab.shape[0]
    d, e = ab[:, 0].astype(np.float64), ab[: n - 1, 1].astype(np.float64)
    return np.diag(d) + np.diag(e, -1) + np.diag(e, 1)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "n,b,nt", [(3, 2, 1), (17, 3, 7), (40, 8, 32), (97, 5, 12), (130, 16, 256)]
)
def test_kept_reflectors_reduce_the_band(lib, dtype, n, b, nt):
    """Keeping every reflector changes no byte of the chase's result, in any of its orders, and
    the kept reflectors are the chase's transformation: ``Q2^T B Q2 = T`` and ``Q2``
    orthogonal within the testers' bounds (LAPACK xSYT21: ``||B - Q2 T Q2^T||_1 /
    (||B||_1 n eps)`` and ``||I - Q2^T Q2||_1 / (n eps)`` below 60)."""
    rng = np.random.default_rng(n + 31 * b)
    a = _random_band(n, b, dtype, rng)
    ref = _chase(lib, a, b, nt, 0, 0)
    for order, rev in ((0, 0), (1, 1), (2, 0)):
        ab, v, tau = _chase(lib, a, b, nt, order, rev, keep=True)
        np.testing.assert_array_equal(ab, ref)
    q = _reflector_product(v, tau, n)
    eps = np.finfo(dtype).eps
    a64 = a.astype(np.float64)
    anorm = np.abs(a64).sum(axis=0).max()
    t = _tridiagonal(ab)
    assert np.abs(a64 - q @ t @ q.T).sum(axis=0).max() / (anorm * n * eps) < 60
    assert np.abs(np.eye(n) - q.T @ q).sum(axis=0).max() / (n * eps) < 60


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n,b", [(3, 2), (17, 3), (40, 8), (97, 5), (130, 16), (200, 64)])
def test_block_reflectors_give_the_bands_eigenvectors(lib, dtype, n, b):
    """The block reflectors applied in the step schedule (``_chase_backtransform``) are the
    reflectors' product: ``Q2 I`` equals the product formed reflector by reflector, and ``Q2 Z``
    of the tridiagonal's eigenvectors ``Z`` are the band's eigenvectors (LAPACK xSYT21's
    residual and orthogonality ratios below 60); the padding rows stay zero."""
    from scipy.linalg import eigh_tridiagonal

    from blasmp_array.backends import _chase_backtransform as cbt

    rng = np.random.default_rng(n * 7 + b)
    a = _random_band(n, b, dtype, rng)
    ab, v, tau = _chase(lib, a, b, 64, 1, 0, keep=True)
    br = cbt.block_reflectors(np, v, tau, n)
    eps = np.finfo(dtype).eps
    ldz = n + 2 * b + 3
    zc = np.zeros((n, ldz), dtype)
    zc[:, :n] = np.eye(n, dtype=dtype)
    cbt.apply_host(br, zc)
    assert np.all(zc[:, n:] == 0)
    q = _reflector_product(v, tau, n)
    assert np.abs(zc[:, :n].T - q).sum(axis=0).max() / (n * eps) < 60
    d, e = ab[:, 0].astype(np.float64), ab[: n - 1, 1].astype(np.float64)
    w, z = eigh_tridiagonal(d, e)
    zc = np.zeros((n, ldz), dtype)
    zc[:, :n] = z.T.astype(dtype)
    cbt.apply_host(br, zc)
    x = zc[:, :n].T.astype(np.float64)
    a64 = a.astype(np.float64)
    anorm = np.abs(a64).sum(axis=0).max()
    assert np.abs(a64 @ x - x * w[None, :]).sum(axis=0).max() / (anorm * n * eps) < 60
    assert np.abs(np.eye(n) - x.T @ x).sum(axis=0).max() / (n * eps) < 60


def test_block_schedule_orders_overlapping_blocks():
    """Every block of the schedule appears once; two blocks of one step touch disjoint rows;
    and any two overlapping blocks run in the order of ``Q2 Z`` (groups from the last, tasks
    ascending within a group)."""
    from blasmp_array.backends import _chase_backtransform as cbt

    for n, b in ((50, 4), (130, 16), (7, 2), (300, 64)):
        sweeps = n - 2
        kmax = gbe.reflector_slots(n, b)
        groups = -(-sweeps // b)
        steps = cbt.schedule(n, b, groups, kmax)
        when = {}
        for t, (g_lo, k_lo, count) in enumerate(steps):
            rows = [((g_lo + i + k_lo + i) * b + 1) for i in range(count)]
            assert all(r2 - r1 >= 2 * b - 1 for r1, r2 in zip(rows, rows[1:], strict=False))
            for i in range(count):
                assert (g_lo + i, k_lo + i) not in when
                when[(g_lo + i, k_lo + i)] = t
        want = {(g, k) for g in range(groups) for k in range(-(-(n - 1 - g * b) // b))}
        assert set(when) == want
        order = sorted(want, key=lambda gk: (-gk[0], gk[1]))  # the order of Q2 Z
        for i, (g1, k1) in enumerate(order):
            for g2, k2 in order[i + 1 :]:
                if abs((g1 + k1) - (g2 + k2)) <= 1:
                    assert when[(g1, k1)] < when[(g2, k2)]


def _bisect(lib, d, e, first, count):
    gl, gu, pivmin, abstol = gbe.tridiagonal_inputs(d, e)
    e2 = np.ascontiguousarray(e * e)
    w = np.full(count, np.nan)
    lib.bisect(d.ctypes.data, e2.ctypes.data, d.shape[0], pivmin, gl, gu, abstol, first, count,
               w.ctypes.data)  # fmt: skip
    return w


@pytest.mark.parametrize(
    "kind", ["random", "graded", "cluster", "equal", "zero", "one", "wilkinson"]
)
def test_bisection_finds_lapacks_eigenvalues(lib, kind):
    """Every eigenvalue within LAPACK's tester bound ``60 n eps ||T||_1`` of
    ``numpy.linalg.eigvalsh``'s, ascending, including graded, clustered and repeated spectra."""
    rng = np.random.default_rng(7)
    n = 1 if kind == "one" else 150
    d = rng.standard_normal(n)
    e = rng.standard_normal(n - 1)
    if kind == "graded":
        d = 10.0 ** -np.linspace(0, 12, n) * np.where(np.arange(n) % 2, -1, 1)
        e = e * 1e-14
    elif kind == "cluster":
        d = 1 + 1e-14 * rng.standard_normal(n)
        e = e * 1e-15
    elif kind == "equal":
        d = np.repeat([1.0, 2.0, 3.0], n // 3)
        e = np.zeros(n - 1)
    elif kind == "zero":
        d, e = np.zeros(n), np.zeros(n - 1)
    elif kind == "wilkinson":
        d = np.abs(np.arange(n) - (n - 1) / 2)
        e = np.ones(n - 1)
    t = np.diag(d) + np.diag(e, -1) + np.diag(e, 1)
    want = np.linalg.eigvalsh(t)
    got = _bisect(lib, d, e, 0, n)
    assert np.all(np.diff(got) >= 0)
    # the testers' bound, plus bisection's floor of a few pivmin (a zero matrix)
    tnorm = np.abs(t).sum(axis=0).max()
    bound = 60 * n * np.finfo(np.float64).eps * tnorm + 4 * np.finfo(np.float64).tiny
    assert np.abs(got - want).max() <= bound
    if n > 10:  # a subset by index is the same numbers
        np.testing.assert_array_equal(_bisect(lib, d, e, 5, 7), got[5:12])


def test_sturm_count(lib):
    """The count of eigenvalues below x, at points between the eigenvalues."""
    rng = np.random.default_rng(3)
    n = 60
    d, e = rng.standard_normal(n), rng.standard_normal(n - 1)
    w = np.linalg.eigvalsh(np.diag(d) + np.diag(e, -1) + np.diag(e, 1))
    xs = np.concatenate([[w[0] - 1], (w[:-1] + w[1:]) / 2, [w[-1] + 1]])
    gl, gu, pivmin, abstol = gbe.tridiagonal_inputs(d, e)
    e2 = e * e
    out = np.full(xs.shape[0], -1, np.int64)
    lib.count(d.ctypes.data, e2.ctypes.data, n, pivmin, xs.ctypes.data, xs.shape[0],
              out.ctypes.data)  # fmt: skip
    np.testing.assert_array_equal(out, np.arange(n + 1))


def test_stage_count_and_shared_memory():
    """The stage count is the last task's stage plus one; the widest band's shared memory fits
    a block's default 48 KiB in double precision."""
    for n, b in ((3, 2), (100, 7), (1000, 64)):
        last = max(gbe.LAG * s + gbe.stage_tasks(n, b, s) for s in range(n - 2))
        assert gbe.stage_count(n, b) == last
    assert gbe.stage_count(2, 2) == 0
    assert gbe.shared_bytes(gbe.MAX_BAND, 8) <= 48 * 1024


def _cupy():
    """CuPy with a GPU, else the test is skipped (these run on the GPU node)."""
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no GPU")
    except Exception:  # noqa: BLE001 - CuPy without a driver
        pytest.skip("no GPU")
    return cupy


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n,b", [(97, 5), (200, 64), (700, 64)])
def test_chase_back_transform_on_the_device(lib, dtype, n, b):
    """On the GPU: the chase kernel's kept reflectors reduce the band (``Q2^T B Q2 = T`` within
    LAPACK's tester bound); the block reflectors formed by CuPy and applied by the
    strided-batched GEMMs (``_gpu_band_eigh.apply_device``) give the host form's ``Q2 Z``
    within ``60 n eps ||Z||_1``, and leave the padding rows zero."""
    cupy = _cupy()
    from blasmp_array.backends import _chase_backtransform as cbt
    from blasmp_array.backends import _gpu_band_eigh as gbh
    from blasmp_array.backends._cublas import CublasKernels

    rng = np.random.default_rng(n + b)
    a = _random_band(n, b, dtype, rng)
    eps = np.finfo(dtype).eps
    a64 = a.astype(np.float64)
    anorm = np.abs(a64).sum(axis=0).max()
    band = np.zeros((b + 1, n), dtype)
    for d in range(b + 1):
        band[d, : n - d] = np.diagonal(a, -d)
    ab = gbe.device_band(band, b, 1.0)
    v, tau = gbe.chase(ab, b, keep=True)
    vh, th, abh = cupy.asnumpy(v), cupy.asnumpy(tau), cupy.asnumpy(ab)
    q = _reflector_product(vh, th, n)
    assert np.abs(a64 - q @ _tridiagonal(abh) @ q.T).sum(axis=0).max() / (anorm * n * eps) < 60
    host = cbt.block_reflectors(np, vh, th, n)
    dev = cbt.block_reflectors(cupy, v, tau, n)
    zc = np.zeros((n // 2 + 1, n + 2 * b), dtype)
    zc[:, :n] = rng.standard_normal((n // 2 + 1, n))
    want = zc.copy()
    cbt.apply_host(host, want)
    kern = CublasKernels()
    stream = cupy.cuda.get_current_stream()
    got = cupy.asarray(zc)
    gbh.apply_device(dev, got, kern.handle(stream))
    got = cupy.asnumpy(got)
    kern.destroy()
    assert np.all(got[:, n:] == 0)
    znorm = np.abs(zc).sum(axis=1).max()
    assert np.abs(got - want).sum(axis=1).max() / (n * eps * znorm) < 60


def test_stedc_on_the_device():
    """cuSOLVER's ``Xstedc`` where the loaded cuSOLVER has it (else skipped): LAPACK's
    eigenvalues within ``60 n eps ||T||_1``, orthogonal eigenvectors with a small residual."""
    cupy = _cupy()
    from scipy.linalg import eigvalsh_tridiagonal

    from blasmp_array.backends._cublas import CublasKernels

    kern = CublasKernels()
    stream = cupy.cuda.get_current_stream()
    if not kern.has_stedc(stream):
        kern.destroy()
        pytest.skip("the loaded cuSOLVER has no cusolverDnXstedc")
    n = 300
    rng = np.random.default_rng(3)
    d0, e0 = rng.standard_normal(n), rng.standard_normal(n - 1)
    d, e = cupy.asarray(d0), cupy.asarray(e0)
    z = cupy.zeros((n, n + 5))
    info = cupy.zeros(1, np.int32)
    kern.stedc(stream, d, e, z, info)
    stream.synchronize()
    kern.destroy()
    assert int(info[0]) == 0
    w, x = cupy.asnumpy(d), cupy.asnumpy(z)[:, :n].T
    t = np.diag(d0) + np.diag(e0, -1) + np.diag(e0, 1)
    eps = np.finfo(np.float64).eps
    tn = np.abs(t).sum(axis=0).max()
    assert np.abs(w - eigvalsh_tridiagonal(d0, e0)).max() / (n * eps * tn) < 60
    assert np.abs(t @ x - x * w[None, :]).sum(axis=0).max() / (tn * n * eps) < 60
    assert np.abs(np.eye(n) - x.T @ x).sum(axis=0).max() / (n * eps) < 60
