"""``ops/engine/mirror.py`` (``X[I, J] := X[J, I]^T``, ``^H``, for chosen blocks) and the fill
of ``A.T @ A``'s balanced band built on it (``ops/blas3/syrk._fill_from_band``): the mirrored
blocks are exact copies of their (conjugated) mirrors, every other element is untouched, the
result does not depend on the memory budget (one step per block column or all in one), and the
band's fill gives exactly the matrix that the lower triangle's fill (a whole distributed
transpose) gives. Destinations start as NaN, so a block the plan leaves out shows up."""

from __future__ import annotations

import numpy as np
import pytest

import blasmp_array as bm
from blasmp_array.ops.blas3 import syrk
from blasmp_array.ops.engine.mirror import mirror_blocks

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]

# (n, block): K = ceil(n / block) block rows: even, odd, ragged last block, blocks of 1
CASES = [(16, 4), (18, 4), (13, 2), (5, 8), (6, 1)]


def _random(n: int, dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, n))
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal((n, n))
    return x.astype(dtype)


def _block_slices(n: int, nb: int, bi: int, bj: int) -> tuple[slice, slice]:
    return slice(bi * nb, min(n, (bi + 1) * nb)), slice(bj * nb, min(n, (bj + 1) * nb))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"n{c[0]}b{c[1]}")
@pytest.mark.parametrize("budget", ["one step", "a column a step"])
def test_mirror_blocks(grid, dtype, case, budget):
    n, nb = case
    k = -(-n // nb)
    blocks = syrk.outside_band(k)
    x = _random(n, dtype, n * nb)
    for bi, bj in blocks:  # poisoned destinations: every one must be written
        x[_block_slices(n, nb, bi, bj)] = np.nan
    X = bm.from_numpy(x, block=(nb, nb), grid=grid)
    conj = np.dtype(dtype).kind == "c"
    # the smallest budget puts every destination block column in a step of its own
    kw = {"memory_budget": 1} if budget == "a column a step" else {}
    mirror_blocks(grid.backend, X._data, X.layout, grid.rank, blocks, conj, **kw)
    got = X.to_numpy()
    expect = x.copy()
    for bi, bj in blocks:
        rows, cols = _block_slices(n, nb, bi, bj)
        mirror = x[cols, rows].T
        expect[rows, cols] = mirror.conj() if conj else mirror
    assert not np.isnan(got).any(), "a mirrored block was not written"
    assert np.array_equal(got, expect)


def test_mirror_blocks_rejects_the_diagonal(grid):
    X = bm.from_numpy(np.zeros((8, 8)), block=(4, 4), grid=grid)
    with pytest.raises(ValueError, match="diagonal"):
        mirror_blocks(grid.backend, X._data, X.layout, grid.rank, ((1, 1),), False)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"n{c[0]}b{c[1]}")
def test_band_fill_matches_the_transpose_fill(grid, dtype, case):
    """A symmetric (Hermitian) ``S`` with the blocks outside the band and the strict upper
    triangles of the diagonal blocks poisoned, completed by the band's fill; ``S`` with its
    strict upper triangle poisoned, completed by the triangle's fill: both give ``S``."""
    if grid.size == 1:
        pytest.skip("one process mirrors its own triangle, no fill")
    n, nb = case
    k = -(-n // nb)
    herm = np.dtype(dtype).kind == "c"
    a = _random(n, dtype, 3 * n + nb)
    s = a + (a.conj().T if herm else a.T)
    if herm:
        s[np.diag_indices(n)] = s[np.diag_indices(n)].real
    band_input = s.copy()
    for bi, bj in syrk.outside_band(k):
        band_input[_block_slices(n, nb, bi, bj)] = np.nan
    for j in range(k):
        d = band_input[_block_slices(n, nb, j, j)]
        d[np.triu_indices(d.shape[0], 1)] = np.nan
    tri_input = np.where(np.tri(n, dtype=bool), s, np.nan).astype(dtype)

    C = bm.from_numpy(band_input, block=(nb, nb), grid=grid)
    syrk._fill_from_band(C, syrk._LocalBand(C), herm)
    T = bm.from_numpy(tri_input, block=(nb, nb), grid=grid)
    syrk._fill_from_triangle(T, herm)
    by_band, by_triangle = C.to_numpy(), T.to_numpy()
    assert not np.isnan(by_band).any(), "the band's fill left an element out"
    assert np.array_equal(by_band, s)
    assert np.array_equal(by_band, by_triangle)
