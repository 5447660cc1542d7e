"""The random values of blasmp_array.random on one process: NumPy's Philox against the
specification (``tests/random_reference.py``), ``_philox.fill_local`` against the whole-tile
reference, and the GPU kernel's source compiled as host C++ against ``fill_local``."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from blasmp_array import _philox
from blasmp_array.backends import _gpu_random
from blasmp_array.layout import BlockCyclicLayout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from random_reference import (  # noqa: E402
    M64,
    T,
    element,
    key_of,
    philox4x64_10,
    reference_matrix,
    ulp_distance,
)

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
DISTS = [("uniform", 0.0, 1.0), ("uniform", -2.0, 3.5), ("normal", 0.0, 1.0)]


# -- the generator -----------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2**63 + 5, (3, 4)])
def test_numpy_philox_is_philox4x64_10(seed):
    """np.random.Philox(key, counter=c) gives philox4x64_10(c + 1), c + 2, ..., lanes in
    order: the fact the CPU fill relies on, and what the GPU kernel computes."""
    key = key_of(seed)
    rng = np.random.default_rng(7)
    for counter in ([0, 0, 0, 0], [5, 7, 9, 1], [int(x) for x in rng.integers(0, 2**40, 4)]):
        bitgen = np.random.Philox(key=np.array(key, np.uint64), counter=counter)
        raw = [int(x) for x in bitgen.random_raw(8)]
        c = list(counter)
        expected = philox4x64_10((c[0] + 1, c[1], c[2], c[3]), key)
        expected += philox4x64_10((c[0] + 2, c[1], c[2], c[3]), key)
        assert raw == expected


#: Random123's known-answer vectors of philox4x64-10 (its kat_vectors file): counter, key,
#: output
_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x16554D9ECA36314C, 0xDB20FE9D672D0FDC, 0xD7E772CEE186176B,
                            0x7E68B68AEC7BA23B)),
    ((M64, M64, M64, M64), (M64, M64), (0x87B092C3013FE90B, 0x438C3C67BE8D0224,
                                        0x9CC7D7C69CD777B6, 0xA09CAEBF594F0BA0)),
    ((0x243F6A8885A308D3, 0x13198A2E03707344, 0xA4093822299F31D0, 0x082EFA98EC4E6C89),
     (0x452821E638D01377, 0xBE5466CF34E90C6C),
     (0xA528F45403E61D95, 0x38C72DBD566E9788, 0xA5A1610E72FD18B5, 0x57BD43B5E52B7FE6)),
]  # fmt: skip


@pytest.mark.parametrize("counter, key, expected", _KAT)
def test_known_answers(counter, key, expected):
    assert philox4x64_10(counter, key) == list(expected)


def test_random_is_53_bits_times_2_pow_minus_53():
    key = key_of(11)
    bitgen = np.random.Philox(key=np.array(key, np.uint64), counter=[3, 1, 2, 0])
    u = np.random.Generator(bitgen).random(8)
    raw = philox4x64_10((4, 1, 2, 0), key) + philox4x64_10((5, 1, 2, 0), key)
    assert np.array_equal(u, np.array([(x >> 11) * 2.0**-53 for x in raw]))


def test_key_is_the_seed_sequence_state():
    assert _philox.philox_key(5) == key_of(5)
    assert _philox.philox_key([5, 6]) == key_of((5, 6))
    assert _philox.philox_key(5) != _philox.philox_key(6)


def test_constants():
    assert _philox.SEED_TILE == T
    assert _philox.TWO_PI == np.float64(2 * np.pi)
    assert _philox.SQRT1_2 == np.sqrt(np.float64(0.5))


# -- fill_local ------------------------------------------------------------------------------
def _fill(shape_rows, shape_cols, key, dist, low, high, dtype):
    out = np.full((len(shape_rows), len(shape_cols)), np.nan, dtype)
    _philox.fill_local(out, shape_rows, shape_cols, key, dist, low, high)
    return out


@pytest.mark.parametrize("dist, low, high", DISTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_fill_local_matches_the_reference(dist, low, high, dtype):
    """Whole matrices and random row/column subsets (gaps of every size, ragged tiles)."""
    shape = (2 * T + 37, T + 5)
    ref = reference_matrix(shape, 42, dist, dtype, low, high)
    key = key_of(42)
    rng = np.random.default_rng(0)
    subsets = [(np.arange(shape[0]), np.arange(shape[1]))]
    for _ in range(3):
        rows = np.sort(rng.choice(shape[0], int(rng.integers(1, shape[0])), replace=False))
        cols = np.sort(rng.choice(shape[1], int(rng.integers(1, shape[1])), replace=False))
        subsets.append((rows, cols))
    subsets.append((np.arange(0, shape[0], 7), np.arange(3, shape[1], 5)))
    for rows, cols in subsets:
        out = _fill(rows, cols, key, dist, low, high, dtype)
        np.testing.assert_array_equal(out, ref[np.ix_(rows, cols)])


@pytest.mark.parametrize("dist, low, high", DISTS)
def test_elements_follow_the_stated_construction(dist, low, high):
    """Single elements from the integer Philox and the stated lane/transform rules."""
    shape = (T + 300, 2 * T + 9)
    key = key_of(3)
    rng = np.random.default_rng(1)
    rows = np.sort(rng.choice(shape[0], 12, replace=False))
    cols = np.sort(rng.choice(shape[1], 12, replace=False))
    for dtype, cplx in ((np.float64, False), (np.complex128, True)):
        out = _fill(rows, cols, key, dist, low, high, dtype)
        for a, i in enumerate(rows):
            for b, j in enumerate(cols):
                re = element(int(i), int(j), key, dist, 0, low, high, cplx)
                assert out[a, b].real == re
                if cplx:
                    assert out[a, b].imag == element(int(i), int(j), key, dist, 1, low, high, cplx)


def test_leading_submatrix_is_the_smaller_matrix():
    big = reference_matrix((T + 40, 2 * T + 3), 9, "normal", np.float64)
    key = key_of(9)
    small = _fill(np.arange(T + 1), np.arange(T - 3), key, "normal", 0.0, 1.0, np.float64)
    np.testing.assert_array_equal(small, big[: T + 1, : T - 3])


def test_single_precision_is_the_rounded_double():
    key = key_of(4)
    rows, cols = np.arange(0, 300, 2), np.arange(1, 280)
    for dist, low, high in DISTS:
        d = _fill(rows, cols, key, dist, low, high, np.complex128)
        s = _fill(rows, cols, key, dist, low, high, np.complex64)
        np.testing.assert_array_equal(s, d.astype(np.complex64))


def test_fill_local_checks_its_arguments():
    out = np.empty((2, 3))
    with pytest.raises(ValueError, match="shape"):
        _philox.fill_local(out, np.arange(3), np.arange(3), (1, 2), "normal")
    with pytest.raises(ValueError, match="dist"):
        _philox.fill_local(out, np.arange(2), np.arange(3), (1, 2), "gamma")
    _philox.fill_local(np.empty((0, 3)), np.arange(0), np.arange(3), (1, 2), "normal")


# -- the GPU kernel, compiled as host C++ ----------------------------------------------------
_SHIM = r"""
#include <cmath>
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
struct blasmp_dim3 { long long x; };
static blasmp_dim3 blockIdx, blockDim, gridDim, threadIdx;
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b)
{ return (unsigned long long)(((unsigned __int128)a * b) >> 64); }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
using std::log1p; using std::sqrt;
"""

_LAUNCH = r"""
template <typename OutT, int NC, int NORMAL, int VEC>
static void launch(void* out, const long long* a, unsigned long long k0, unsigned long long k1,
                   double low, double scale, long long blocks, long long threads)
{
    gridDim.x = blocks; blockDim.x = threads;
    for (long long b = 0; b < blocks; ++b)
        for (long long t = 0; t < threads; ++t) {
            blockIdx.x = b; threadIdx.x = t;
            blasmp_philox_fill<OutT, NC, NORMAL, VEC>((OutT*)out, a[0], a[1], a[2], a[3], a[4],
                a[5], a[6], a[7], a[8], k0, k1, low, scale);
        }
}
"""


def _host_kernels(tmp_path_factory):
    """The kernel's CUDA source as a host library (CUDA built-ins replaced by their IEEE
    meanings; glibc's sincos for CUDA's), one entry point per template instance."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler to build the GPU kernel's source for the host")
    entries = []
    for i, name in enumerate(_gpu_random._NAMES):
        args = name[name.index("<") + 1 : -1]
        entries.append(
            f'extern "C" void blasmp_entry_{i}(void* o, const long long* a, unsigned long long k0,'
            f" unsigned long long k1, double l, double s, long long b, long long t)"
            f" {{ launch<{args}>(o, a, k0, k1, l, s, b, t); }}"
        )
    src = _SHIM + _gpu_random.SOURCE + _LAUNCH + "\n".join(entries) + "\n"
    d = tmp_path_factory.mktemp("gpu_random_host")
    (d / "kernel.cpp").write_text(src)
    lib = d / "kernel.so"
    # -ffp-contract=off: no FMA contraction, as __dmul_rn/__dadd_rn forbid on the GPU
    cmd = [cxx, "-O1", "-ffp-contract=off", "-shared", "-fPIC", "-w", "-o", str(lib)]
    subprocess.run([*cmd, str(d / "kernel.cpp")], check=True, capture_output=True)
    so = ctypes.CDLL(str(lib))
    fns = {}
    for i, name in enumerate(_gpu_random._NAMES):
        fn = getattr(so, f"blasmp_entry_{i}")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        fn.argtypes += [ctypes.c_ulonglong] * 2 + [ctypes.c_double] * 2 + [ctypes.c_longlong] * 2
        fns[name] = fn
    return fns


@pytest.fixture(scope="module")
def host_kernels(tmp_path_factory):
    return _host_kernels(tmp_path_factory)


def _emulate(fns, out, layout, coords, key, dist, low, high, local_rows=None, blocks=None):
    """What ``_gpu_random.philox_fill`` launches, run on the host (``blocks`` caps the grid so
    that the grid-stride loop is exercised)."""
    call = _gpu_random.kernel_call(
        out.shape, out.dtype, layout, coords, key, dist, low, high, local_rows
    )
    if call is None:
        return
    name, total, args = call
    threads = 32
    nblocks = min(-(-total // threads), blocks or _gpu_random._MAX_BLOCKS)
    a = np.array([int(x) for x in args[:9]], np.int64)
    fns[name](
        out.ctypes.data, a.ctypes.data, int(args[9]), int(args[10]), float(args[11]),
        float(args[12]), nblocks, threads,
    )  # fmt: skip


@pytest.mark.parametrize("block", [(1, 1), (3, 7), (4, 8), (7, 12), (100, 300), (64, 64)])
@pytest.mark.parametrize("grid", [(1, 1), (2, 3), (3, 1), (1, 4)], ids=lambda g: f"{g[0]}x{g[1]}")
def test_gpu_kernel_source_computes_the_cpu_values(host_kernels, block, grid):
    """Every variant of the CUDA kernel (vectorised and per element, every dtype and
    distribution), run on the host over every process of a grid: uniform values bit for bit
    equal to ``fill_local``'s; normal values within 4 ulps (the host build uses glibc's
    ``log1p`` where NumPy has its own)."""
    shape = (T + 45, 2 * T + 3)
    layout = BlockCyclicLayout(shape, block, grid)
    key = key_of(2024)
    rng = np.random.default_rng(sum(block) + 10 * sum(grid))
    worst = 0.0
    for coords in np.ndindex(*grid):
        rows, cols = layout.local_rows(coords[0]), layout.local_cols(coords[1])
        for dtype in DTYPES:
            for dist, low, high in DISTS:
                cpu = np.full(layout.local_shape(*coords), np.nan, dtype)
                _philox.fill_local(cpu, rows, cols, key, dist, low, high)
                gpu = np.full_like(cpu, np.nan)
                blocks = int(rng.integers(1, 4))
                _emulate(host_kernels, gpu, layout, coords, key, dist, low, high, blocks=blocks)
                if dist == "uniform":
                    np.testing.assert_array_equal(gpu, cpu)
                else:
                    assert not np.isnan(gpu.view(gpu.real.dtype)).any()
                    if cpu.size:
                        worst = max(worst, float(ulp_distance(gpu, cpu).max()))
                # the same values filled in two row ranges (progress=True's chunks)
                half = cpu.shape[0] // 2
                parts = np.full_like(cpu, np.nan)
                for r in ((0, half), (half, cpu.shape[0])):
                    _emulate(host_kernels, parts, layout, coords, key, dist, low, high, r)
                np.testing.assert_array_equal(parts, gpu)
    assert worst <= 4, worst


def test_kernel_call_checks_the_local_shape():
    layout = BlockCyclicLayout((10, 10), (3, 3), (2, 2))
    with pytest.raises(ValueError, match="holds"):
        _gpu_random.kernel_call((4, 4), np.float64, layout, (0, 0), (1, 2), "normal", 0, 1, None)
    with pytest.raises(TypeError, match="float32"):
        _gpu_random.kernel_call((6, 6), np.int32, layout, (0, 0), (1, 2), "normal", 0, 1, None)
    assert (
        _gpu_random.kernel_call((0, 6), np.float64, BlockCyclicLayout((0, 10), (3, 3), (2, 2)),
                                (0, 0), (1, 2), "normal", 0, 1, None)
        is None
    )  # fmt: skip
