"""The GPU backend's random fill: Philox4x64-10 keyed by (seed, global position) in one CUDA
kernel that writes a process's local matrix in place.

It computes the values that ``blasmp_array._philox`` (NumPy, the CPU backend) computes; the
contract is that module's docstring and ``docs/random.md``. Uniform values are bit-identical to
the CPU's: integer Philox, an exact conversion ``(x >> 11) * 2**-53``, then ``low + (high - low)
* u`` with ``__dmul_rn``/``__dadd_rn`` so that the compiler cannot fuse them into an FMA (NumPy
rounds after each operation). Normal values use CUDA's ``log1p``, ``sincos`` and ``sqrt``
instead of the host's libm: they agree with the CPU's to within a few ulps, not bitwise.

Threads and memory
------------------
Each thread computes one Philox block (four consecutive positions of a seed-tile row) per part
and, where the column block ``nb`` is a multiple of 4, writes all four values: four consecutive
global columns of one block are four consecutive local columns, so a warp writes one contiguous
run of its row. Otherwise each thread writes one element (its block's lane). The global row
and column of a local element come from the layout's index maps (ScaLAPACK's INDXL2G) inside
the kernel: no host loop over tiles and no host array of the local size.

CuPy is imported only by the functions that compile and launch, so the kernel's source and its
launch arguments (:func:`kernel_call`) can be read without a GPU: the tests compile the source
as host C++ and check what it computes against ``blasmp_array._philox`` on every CI run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._philox import SEED_TILE, SQRT1_2, TWO_PI
from ..layout import BlockCyclicLayout

if TYPE_CHECKING:
    import cupy

__all__ = ["SOURCE", "load_kernels", "kernel_call", "philox_fill"]

_THREADS = 256
_MAX_BLOCKS = 1 << 20  # the kernel loops over the rest (grid-stride)

SOURCE = (
    r"""
#define BLASMP_T @T@ULL
#define BLASMP_TWO_PI @TWO_PI@
#define BLASMP_SQRT1_2 @SQRT1_2@

// Philox4x64-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC11;
// Random123's philox4x64 and NumPy's Philox): 10 rounds, the key bumped between rounds.
__device__ __forceinline__ void blasmp_philox(
    unsigned long long c0, unsigned long long c1, unsigned long long c2, unsigned long long c3,
    unsigned long long k0, unsigned long long k1, unsigned long long x[4])
{
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += 0x9E3779B97F4A7C15ULL;
            k1 += 0xBB67AE8584CAA73BULL;
        }
        const unsigned long long lo0 = 0xD2E7470EE14C6C93ULL * c0;
        const unsigned long long hi0 = __umul64hi(0xD2E7470EE14C6C93ULL, c0);
        const unsigned long long lo1 = 0xCA5A826395121157ULL * c2;
        const unsigned long long hi1 = __umul64hi(0xCA5A826395121157ULL, c2);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    x[0] = c0; x[1] = c1; x[2] = c2; x[3] = c3;
}

// NumPy's next_double: 53 random bits, exact
__device__ __forceinline__ double blasmp_u01(unsigned long long x)
{
    return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

// the values of lanes (base, base + 1) of the block x
template <int NC, int NORMAL>
__device__ __forceinline__ void blasmp_pair(
    const unsigned long long x[4], int base, double low, double scale, double v[2])
{
    const double ua = blasmp_u01(x[base]);
    const double ub = blasmp_u01(x[base + 1]);
    if (NORMAL) {
        const double r = sqrt(-2.0 * log1p(-ua));
        double s, c;
        sincos(BLASMP_TWO_PI * ub, &s, &c);
        v[0] = r * c;
        v[1] = r * s;
        if (NC == 2) {
            v[0] = __dmul_rn(v[0], BLASMP_SQRT1_2);
            v[1] = __dmul_rn(v[1], BLASMP_SQRT1_2);
        }
    } else {
        v[0] = __dadd_rn(__dmul_rn(ua, scale), low);
        v[1] = __dadd_rn(__dmul_rn(ub, scale), low);
    }
}

// out: the C-ordered local matrix (nl columns; NC reals per element), rows row0 .. row0+nrows-1
// filled. VEC = 4 (nb % 4 == 0): one thread per four local columns; VEC = 1: one per element.
template <typename OutT, int NC, int NORMAL, int VEC>
__global__ void blasmp_philox_fill(
    OutT* __restrict__ out, long long row0, long long nrows, long long nl,
    long long mb, long long nb, long long pr, long long pc, long long dr, long long dc,
    unsigned long long k0, unsigned long long k1, double low, double scale)
{
    const long long groups = (nl + VEC - 1) / VEC;
    const long long total = nrows * groups;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += stride) {
        const long long il = row0 + t / groups;
        const long long jl = (t % groups) * VEC;
        // global indices (ScaLAPACK's INDXL2G; dr, dc: this process's distance from the source)
        const long long gi = pr * mb * (il / mb) + il % mb + dr * mb;
        const long long gj = pc * nb * (jl / nb) + jl % nb + dc * nb;
        const unsigned long long ti = (unsigned long long)gi / BLASMP_T;
        const unsigned long long tj = (unsigned long long)gj / BLASMP_T;
        const unsigned long long p =
            ((unsigned long long)gi % BLASMP_T) * BLASMP_T + (unsigned long long)gj % BLASMP_T;
        OutT* dst = out + (il * nl + jl) * NC;
#pragma unroll
        for (int part = 0; part < NC; ++part) {
            unsigned long long x[4];
            blasmp_philox(p / 4 + 1, ti, tj, (unsigned long long)part, k0, k1, x);
            if (VEC == 4) {
                double v[4];
                blasmp_pair<NC, NORMAL>(x, 0, low, scale, v);
                blasmp_pair<NC, NORMAL>(x, 2, low, scale, v + 2);
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    if (jl + k < nl) dst[k * NC + part] = (OutT)v[k];
                }
            } else {
                const int lane = (int)(p % 4);
                double v[2];
                blasmp_pair<NC, NORMAL>(x, lane & 2, low, scale, v);
                dst[part] = (OutT)v[lane & 1];
            }
        }
    }
}
""".replace("@T@", str(SEED_TILE))
    .replace("@TWO_PI@", repr(TWO_PI))
    .replace("@SQRT1_2@", repr(SQRT1_2))
)

_OUT_TYPES = {
    np.dtype(np.float32): ("float", 1),
    np.dtype(np.float64): ("double", 1),
    np.dtype(np.complex64): ("float", 2),
    np.dtype(np.complex128): ("double", 2),
}


def kernel_name(ctype: str, nc: int, normal: bool, vec: int) -> str:
    """The template instance ``blasmp_philox_fill<ctype, nc, normal, vec>``."""
    return f"blasmp_philox_fill<{ctype}, {nc}, {int(normal)}, {vec}>"


_NAMES = tuple(
    kernel_name(ctype, nc, normal, vec)
    for ctype, nc in _OUT_TYPES.values()
    for normal in (False, True)
    for vec in (1, 4)
)

_kernels: dict[str, Any] | None = None


def load_kernels() -> dict[str, Any]:
    """Compile (NVRTC, cached on disk by CuPy) and load every variant of the fill kernel, once
    per process: one module, so one ``cuModuleLoadData``."""
    global _kernels
    if _kernels is None:
        import cupy

        module = cupy.RawModule(code=SOURCE, name_expressions=_NAMES)
        _kernels = {name: module.get_function(name) for name in _NAMES}
    return _kernels


def kernel_call(
    shape: tuple[int, int],
    dtype: Any,
    layout: BlockCyclicLayout,
    coords: tuple[int, int],
    key: tuple[int, int],
    dist: str,
    low: float,
    high: float,
    local_rows: tuple[int, int] | None,
) -> tuple[str, int, tuple[Any, ...]] | None:
    """What :func:`philox_fill` launches for a C-ordered local matrix of ``shape`` and
    ``dtype``: the kernel's name, its number of threads, and its arguments after the output
    pointer (NumPy scalars of the kernel's C types); None when there is nothing to fill."""
    dtype = np.dtype(dtype)
    if dtype not in _OUT_TYPES:
        raise TypeError(f"random_fill needs float32/64 or complex64/128, got {dtype}")
    if tuple(shape) != layout.local_shape(*coords):
        raise ValueError(
            f"random_fill: out has shape {tuple(shape)}, process {coords} of the layout holds "
            f"{layout.local_shape(*coords)}"
        )
    r0, r1 = (0, shape[0]) if local_rows is None else local_rows
    nl = shape[1]
    mb, nb = layout.block
    vec = 4 if nb % 4 == 0 else 1
    total = (r1 - r0) * (-(-nl // vec))
    if total <= 0:
        return None
    ctype, nc = _OUT_TYPES[dtype]
    pr, pc = layout.grid_shape
    dr = (coords[0] - layout.src[0]) % pr  # distance from the source process (INDXL2G)
    dc = (coords[1] - layout.src[1]) % pc
    i64, u64, f64 = np.int64, np.uint64, np.float64
    args = (
        i64(r0),
        i64(r1 - r0),
        i64(nl),
        i64(mb),
        i64(nb),
        i64(pr),
        i64(pc),
        i64(dr),
        i64(dc),
        u64(key[0]),
        u64(key[1]),
        f64(low),
        f64(high - low),
    )
    return kernel_name(ctype, nc, dist == "normal", vec), total, args


def philox_fill(
    out: cupy.ndarray,
    layout: BlockCyclicLayout,
    coords: tuple[int, int],
    key: tuple[int, int],
    dist: str,
    low: float,
    high: float,
    local_rows: tuple[int, int] | None,
) -> None:
    """Enqueue the fill of ``out`` (local rows ``local_rows``, default all) on the current CuPy
    stream (see :meth:`GPUBackend.random_fill`)."""
    if not out.flags.c_contiguous:
        raise ValueError("random_fill needs a C-ordered local matrix")
    call = kernel_call(out.shape, out.dtype, layout, coords, key, dist, low, high, local_rows)
    if call is None:
        return
    name, total, args = call
    kernel = load_kernels()[name]
    flat = out.view(out.real.dtype)  # complex: (re, im) pairs of reals
    blocks = min(-(-total // _THREADS), _MAX_BLOCKS)
    kernel((blocks,), (_THREADS,), (flat, *args))
