"""The specification of blasmp_array.random's values, written independently of the library.

* :func:`philox4x64_10`: Philox4x64-10 on Python ints (Salmon et al., SC11; Random123's
  ``philox4x64``), the integer stream every backend must reproduce;
* :func:`element`: one element ``(i, j)`` straight from the stated construction (seed tile,
  in-tile position, counter, lane, transform), on Python ints and NumPy scalars;
* :func:`reference_matrix`: a whole matrix, seed tile by seed tile, each tile drawn in one piece
  by NumPy's ``Philox`` from counter ``(0, ti, tj, part)`` and cut to the matrix (stride
  ``SEED_TILE`` in ragged tiles), transformed with plain NumPy expressions.

Used by ``tests/test_philox.py`` and ``tests/mpi/test_random.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "T",
    "M64",
    "philox4x64_10",
    "key_of",
    "element",
    "reference_matrix",
    "ulp_distance",
]

#: the seed-tile side the library documents
T = 256
M64 = (1 << 64) - 1
_M0, _M1 = 0xD2E7470EE14C6C93, 0xCA5A826395121157
_W0, _W1 = 0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B
TWO_PI = float(np.float64(2 * np.pi))
SQRT1_2 = float(np.sqrt(np.float64(0.5)))


def _mulhilo(a: int, b: int) -> tuple[int, int]:
    p = a * b
    return p >> 64, p & M64


def philox4x64_10(counter: tuple[int, int, int, int], key: tuple[int, int]) -> list[int]:
    """The four 64-bit outputs of Philox4x64-10 at ``counter`` under ``key``."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(10):
        hi0, lo0 = _mulhilo(_M0, c0)
        hi1, lo1 = _mulhilo(_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0, k1 = (k0 + _W0) & M64, (k1 + _W1) & M64
    return [c0, c1, c2, c3]


def key_of(seed: Any) -> tuple[int, int]:
    """``SeedSequence(seed).generate_state(2, uint64)`` as two ints."""
    k = np.random.SeedSequence(seed).generate_state(2, np.uint64)
    return int(k[0]), int(k[1])


def _u01(x: int) -> np.float64:
    return np.float64(x >> 11) * np.float64(2.0**-53)


def element(
    i: int, j: int, key: tuple[int, int], dist: str, part: int = 0, low=0.0, high=1.0, cplx=False
) -> np.float64:
    """The float64 value of part ``part`` of element ``(i, j)`` (``cplx``: of a complex
    matrix, whose normal parts are scaled by sqrt(1/2))."""
    ti, tj = i // T, j // T
    p = (i % T) * T + (j % T)
    x = philox4x64_10((p // 4 + 1, ti, tj, part), key)
    lane = p % 4
    if dist == "uniform":
        return np.float64(low) + np.float64(high - low) * _u01(x[lane])
    a, b = lane & 2, (lane & 2) + 1
    r = np.sqrt(np.float64(-2.0) * np.log1p(-_u01(x[a])))
    theta = np.float64(TWO_PI) * _u01(x[b])
    v = r * (np.cos(theta) if lane % 2 == 0 else np.sin(theta))
    return v * np.float64(SQRT1_2) if cplx else v


def _tile(key: tuple[int, int], ti: int, tj: int, part: int, dist: str, low, high, cplx):
    bitgen = np.random.Philox(key=np.array(key, np.uint64), counter=[0, ti, tj, part])
    u = np.random.Generator(bitgen).random(T * T)  # positions 0 .. T*T-1, counter 1, 2, ...
    if dist == "uniform":
        return (low + (high - low) * u).reshape(T, T)
    r = np.sqrt(-2.0 * np.log1p(-u[0::2]))
    theta = TWO_PI * u[1::2]
    v = np.empty(T * T)
    v[0::2] = r * np.cos(theta)
    v[1::2] = r * np.sin(theta)
    if cplx:
        v = v * SQRT1_2
    return v.reshape(T, T)


def reference_matrix(
    shape: tuple[int, int], seed: Any, dist: str, dtype: Any, low=0.0, high=1.0
) -> np.ndarray:
    """The documented matrix of ``seed``: ``dist`` 'uniform' (in ``[low, high)``) or
    'normal', rounded to ``dtype``."""
    m, n = shape
    key = key_of(seed)
    cplx = np.dtype(dtype).kind == "c"
    out = np.empty(shape, np.complex128 if cplx else np.float64)
    for ti in range(-(-m // T)):
        for tj in range(-(-n // T)):
            h, w = min(T, m - ti * T), min(T, n - tj * T)
            tile = _tile(key, ti, tj, 0, dist, low, high, cplx)[:h, :w]
            if cplx:
                tile = tile + 1j * _tile(key, ti, tj, 1, dist, low, high, cplx)[:h, :w]
            out[ti * T : ti * T + h, tj * T : tj * T + w] = tile
    return out.astype(dtype)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|a - b|`` in units of the last place of the larger magnitude, per real component, in
    the precision of the arrays (0 where both are equal)."""
    ra = np.asarray(a).view(np.asarray(a).real.dtype).astype(np.float64)
    rb = np.asarray(b).view(np.asarray(b).real.dtype).astype(np.float64)
    real = np.asarray(a).real.dtype
    scale = np.spacing(np.maximum(np.abs(ra), np.abs(rb)).astype(real)).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.where(ra == rb, 0.0, np.abs(ra - rb) / scale)
    return d
