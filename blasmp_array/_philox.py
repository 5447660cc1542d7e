"""Counter-based random values keyed by (seed, global position): Philox4x64-10 in NumPy.

This is the host side of :mod:`blasmp_array.random` (the contract is stated in
``docs/random.md``); the GPU backend computes the same values in one CUDA kernel
(``backends/_gpu_random.py``), and the tests hold both to a pure-Python Philox.

The values
----------
The key is ``SeedSequence(seed).generate_state(2, uint64)``. Element ``(i, j)`` of the global
matrix lies in *seed tile* ``(ti, tj) = (i // T, j // T)`` (``T =`` :data:`SEED_TILE`) at
in-tile position ``p = (i % T) * T + (j % T)`` (stride ``T`` also in ragged edge tiles, so a
value does not depend on the matrix shape). It takes lane ``p % 4`` of the Philox4x64-10 block
at counter ``(p // 4 + 1, ti, tj, part)``: ``part`` 0 for real values and real parts, 1 for
imaginary parts. With ``x`` that 64-bit lane:

* uniform: ``u = (x >> 11) * 2**-53`` (NumPy's ``Generator.random``), and
  ``uniform(low, high) = low + (high - low) * u`` rounded after the product and after the sum
  (no fused multiply-add);
* normal: Box-Muller on the lane pairs (0, 1) and (2, 3) of a block, ``r = sqrt(-2 log1p(-u_a))``,
  ``theta = 2pi * u_b``: lane ``a`` gets ``r cos(theta)``, lane ``b`` ``r sin(theta)``; a complex
  normal is ``(x + i y) * sqrt(1/2)``;
* float32 and complex64 values are the float64 values rounded to nearest.

How a process fills its part
----------------------------
NumPy's ``Philox`` bit generator increments its counter before each block and hands out the
four lanes in order, so setting its counter to ``(p0 // 4, ti, tj, part)`` (``p0`` a multiple
of 4) and drawing ``k`` doubles with ``Generator.random`` gives the values of positions
``p0 .. p0 + k - 1`` of a tile. :func:`fill_local` draws, per seed tile, only the tile rows
that meet the local rows (consecutive runs, small gaps drawn through rather than paying for a
new draw), transforms them in a scratch buffer that stays in cache, and copies the local
columns out (slices where they are contiguous). One bit generator is reused: setting its state
costs about 1 us, constructing one about 8 us.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "SEED_TILE",
    "DISTRIBUTIONS",
    "TWO_PI",
    "SQRT1_2",
    "philox_key",
    "fill_local",
]

#: Side of the seed tiles (fixed: changing it changes every random matrix).
SEED_TILE = 256

#: The distributions :func:`fill_local` draws: ``'uniform'`` (``low + (high - low) * u``) and
#: ``'normal'`` (standard normal; complex: standard complex normal).
DISTRIBUTIONS = ("uniform", "normal")

#: ``2 pi`` rounded to float64 (the GPU kernel writes the same constant).
TWO_PI = 6.283185307179586

#: ``sqrt(1/2)`` rounded to float64: the scale of the parts of a complex normal.
SQRT1_2 = 0.7071067811865476

#: Tile rows skipped inside one draw instead of starting a new draw: drawing (and transforming)
#: a row of 256 values costs a few microseconds, a new draw about 20 us of Python calls.
MAX_ROW_GAP = 4


def philox_key(seed: int | Sequence[int]) -> tuple[int, int]:
    """The Philox4x64 key ``(k0, k1)`` of ``seed``: ``SeedSequence(seed).generate_state(2,
    uint64)`` (``seed`` a non-negative int or a sequence of them, checked by the caller)."""
    k = np.random.SeedSequence(seed).generate_state(2, np.uint64)
    return int(k[0]), int(k[1])


def fill_local(
    out: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    key: tuple[int, int],
    dist: str,
    low: float = 0.0,
    high: float = 1.0,
) -> None:
    """Fill ``out[a, b]`` with the random value of global element ``(rows[a], cols[b])``.

    Parameters
    ----------
    out : ndarray, shape (len(rows), len(cols))
        float32, float64, complex64 or complex128; written in place.
    rows, cols : array of int
        Strictly increasing non-negative global indices of ``out``'s rows and columns (e.g. a
        process's local rows and columns in a block-cyclic layout).
    key : (int, int)
        The Philox key (:func:`philox_key`).
    dist : {'uniform', 'normal'}
        Uniform in ``[low, high)`` (each part of a complex value), or standard normal
        (standard complex normal for complex ``out``).
    low, high : float
        Bounds of ``'uniform'`` (ignored for ``'normal'``).
    """
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    if out.shape != (rows.size, cols.size):
        raise ValueError(f"out has shape {out.shape}, rows and cols give {rows.size, cols.size}")
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"dist must be one of {DISTRIBUTIONS}, got {dist!r}")
    if out.size == 0:
        return
    complex_ = out.dtype.kind == "c"
    targets = ((0, out.real), (1, out.imag)) if complex_ else ((0, out),)
    gen = _Drawer(key)
    scratch = _Scratch()
    col_tiles = [_ColumnSelection(tj, lo, hi, off) for tj, lo, hi, off in _by_tile(cols)]
    for ti, lo, _, off in _by_tile(rows):
        for a, b, rlo, rhi, rsel in _row_draws(off, lo):
            for cs in col_tiles:
                for part, view in targets:
                    u = gen.draw(a, b, ti, cs.tile, part, scratch.u)
                    dst = view[rlo:rhi, cs.lo : cs.hi]
                    if dist == "uniform":
                        _uniform(u[rsel][:, cs.sel], low, high, dst, scratch)
                    else:
                        _normal(u, rsel, cs, complex_, dst, scratch)


# -- drawing -----------------------------------------------------------------------------------
class _Drawer:
    """One Philox bit generator whose counter is set per draw."""

    def __init__(self, key: tuple[int, int]) -> None:
        self.bitgen = np.random.Philox(key=np.array(key, dtype=np.uint64))
        self.gen = np.random.Generator(self.bitgen)
        self.state = self.bitgen.state  # buffer_pos 4: the next value starts a new block
        self.counter = self.state["state"]["counter"]

    def draw(self, a: int, b: int, ti: int, tj: int, part: int, buf: np.ndarray) -> np.ndarray:
        """Rows ``a:b`` of seed tile ``(ti, tj)``'s ``part``, as uniform doubles ``(b - a, T)``."""
        t = SEED_TILE
        self.counter[:] = (a * t // 4, ti, tj, part)  # the first block drawn is counter + 1
        self.bitgen.state = self.state
        u = buf[: (b - a) * t]
        self.gen.random(out=u)
        return u.reshape(b - a, t)


class _Scratch:
    """Work buffers of one seed tile (2 MiB, reused for every draw)."""

    def __init__(self) -> None:
        n = SEED_TILE * SEED_TILE
        self.u = np.empty(n)
        self.w = np.empty(n)
        self.r = np.empty(n // 2)
        self.theta = np.empty(n // 2)


# -- index sets ------------------------------------------------------------------------------
def _as_slice(idx: np.ndarray) -> slice | np.ndarray:
    """A slice when the increasing indices ``idx`` are consecutive, else ``idx``."""
    if idx.size and int(idx[-1]) - int(idx[0]) + 1 == idx.size:
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


def _by_tile(idx: np.ndarray) -> list[tuple[int, int, int, np.ndarray]]:
    """``(t, lo, hi, offsets)``: the increasing global indices ``idx[lo:hi]`` lie in seed tile
    ``t`` at in-tile ``offsets``."""
    tiles = idx // SEED_TILE
    starts = np.flatnonzero(np.diff(tiles)) + 1
    bounds = [0, *starts.tolist(), idx.size]
    return [
        (int(tiles[lo]), lo, hi, idx[lo:hi] - int(tiles[lo]) * SEED_TILE)
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    ]


def _row_draws(off: np.ndarray, lo: int) -> list[tuple[int, int, int, int, slice | np.ndarray]]:
    """Draws covering the tile rows ``off`` (local rows ``lo, lo + 1, ...``): ``(a, b, rlo,
    rhi, rsel)`` draws tile rows ``a:b`` for local rows ``rlo:rhi``, which are rows ``rsel``
    of the draw. Runs closer than :data:`MAX_ROW_GAP` share one draw."""
    cuts = np.flatnonzero(np.diff(off) > MAX_ROW_GAP + 1) + 1
    bounds = [0, *cuts.tolist(), off.size]
    draws = []
    for s, e in zip(bounds[:-1], bounds[1:], strict=True):
        a, b = int(off[s]), int(off[e - 1]) + 1
        draws.append((a, b, lo + s, lo + e, _as_slice(off[s:e] - a)))
    return draws


class _ColumnSelection:
    """The local columns ``lo:hi`` that lie in seed tile column ``tile`` at in-tile offsets
    ``off``: ``sel`` selects them from a tile row; for the normal values, ``pairs`` selects the
    lane pairs ``(2k, 2k + 1)`` that hold them and ``pair_sel`` selects them from those pairs."""

    def __init__(self, tile: int, lo: int, hi: int, off: np.ndarray) -> None:
        self.tile, self.lo, self.hi = tile, lo, hi
        self.sel = _as_slice(off)
        pairs = np.unique(off // 2)
        self.pairs = _as_slice(pairs)
        self.pair_sel = _as_slice(np.searchsorted(pairs, off // 2) * 2 + off % 2)


# -- transforms ------------------------------------------------------------------------------
def _uniform(u: np.ndarray, low: float, high: float, dst: np.ndarray, scratch: _Scratch) -> None:
    """``dst = low + (high - low) * u``, both operations rounded in float64."""
    if low == 0.0 and high == 1.0:
        dst[...] = u  # 0 + 1 * u == u exactly
        return
    w = scratch.w[: u.size].reshape(u.shape)
    np.multiply(u, high - low, out=w)
    np.add(w, low, out=dst)  # the sum in float64, rounded once more to dst's precision


def _normal(
    u: np.ndarray,
    rsel: slice | np.ndarray,
    cs: _ColumnSelection,
    complex_: bool,
    dst: np.ndarray,
    scratch: _Scratch,
) -> None:
    """Box-Muller on the lane pairs that hold the selected rows and columns of ``u`` (h x T):
    rows are selected first, so rows drawn through a gap are not transformed."""
    pairs = u.reshape(u.shape[0], SEED_TILE // 2, 2)[rsel][:, cs.pairs]
    h, npairs = pairs.shape[:2]
    r = scratch.r[: h * npairs].reshape(h, npairs)
    theta = scratch.theta[: h * npairs].reshape(h, npairs)
    w = scratch.w[: 2 * h * npairs].reshape(h, npairs, 2)
    np.negative(pairs[..., 0], out=r)
    np.log1p(r, out=r)
    np.multiply(r, -2.0, out=r)
    np.sqrt(r, out=r)
    np.multiply(pairs[..., 1], TWO_PI, out=theta)
    trig = pairs[..., 0]  # lane a's uniforms are used up: its slots hold cos, then sin
    for lane, fn in ((0, np.cos), (1, np.sin)):
        fn(theta, out=trig)
        np.multiply(r, trig, out=w[..., lane])
    if complex_:
        np.multiply(w, SQRT1_2, out=w)
    dst[...] = w.reshape(h, 2 * npairs)[:, cs.pair_sel]
