"""``A.T @ A`` (and ``A @ A.T``, ``A.H @ A``) on a grid through the balanced band of
``ops/blas3/syrk.py`` (``rank_k(full=True)``), through the lower triangle and its fill, and
through the split of K on one-dimensional grids (``_syrk_ksplit``): the full
symmetric (Hermitian) matrix, exactly symmetric, within the SYRK error bound of NumPy's
product, for an odd and an even number of block rows, ragged last blocks, one block larger than
the matrix, and blocks of 1."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import blasmp_array as bm

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blas3_reference import DTYPES, assert_within_bound, high, random_matrix  # noqa: E402

# (rows m, columns n, block): K = ceil(n / block) block rows of the result: 4 (even), 5 and 7
# (odd), ragged, 1 (one block), n blocks of 1
CASES = [(13, 16, 4), (9, 18, 4), (11, 13, 2), (6, 5, 8), (7, 6, 1)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}b{c[2]}")
@pytest.mark.parametrize("shape", ["band", "triangle", "ksplit"])
def test_gram_matrix(grid, dtype, case, shape, monkeypatch):
    from blasmp_array.ops.blas3 import _syrk_ksplit, syrk

    # the band on this backend, or the lower triangle and its fill (the GPU's default), or K
    # split over a one-dimensional grid (every case has 2 k >= n)
    monkeypatch.setattr(syrk, "BALANCED_BAND", {grid.backend.name} if shape == "band" else set())
    # the route runs on host arrays: the CPU backend only
    ksplit = shape == "ksplit" and grid.backend.name == "cpu" and grid.size > 1 and 1 in grid.shape
    monkeypatch.setattr(_syrk_ksplit, "BACKENDS", {grid.backend.name} if ksplit else set())
    sent: list = []  # operands each pipeline sends (one process row: SYRK sends only the rows)
    run = syrk.run_pipeline
    monkeypatch.setattr(
        syrk,
        "run_pipeline",
        lambda b, name, specs, *rest: sent.append(len(specs)) or run(b, name, specs, *rest),
    )
    m, n, nb = case
    a = random_matrix(np.random.default_rng(m * n + nb), (m, n), dtype)
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)
    herm = np.dtype(dtype).kind == "c"
    for got, ref, x in (
        ((A.H if herm else A.T) @ A, (a.conj().T if herm else a.T) @ a, a),
        (A @ (A.H if herm else A.T), a @ (a.conj().T if herm else a.T), a.T),
    ):
        c = got.to_numpy()
        scale = np.abs(high(x)).T @ np.abs(high(x))
        if x is a.T:
            scale = np.abs(high(a)) @ np.abs(high(a)).T
        assert_within_bound(c, ref, scale, x.shape[0], dtype, "A^H A" if x is a else "A A^H")
        assert np.array_equal(c, c.conj().T), "the result is not exactly symmetric/Hermitian"
        if herm:
            assert np.all(np.diag(c).imag == 0)
    assert np.array_equal(A.to_numpy(), a), "input modified"
    if ksplit:  # A A^H has no local HERK kernel of its op: it keeps the pipeline
        assert sent == ([2] if herm else []), "K split ran the panel pipeline"
    elif grid.size > 1:
        one = shape == "band" and grid.nprow == 1 and not herm
        assert sent == [1 if one else 2] * 2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}b{c[2]}")
@pytest.mark.parametrize("shape", ["band", "triangle", "ksplit"])
def test_new_lower_triangle(grid, dtype, case, shape, monkeypatch):
    """``bm.linalg.syrk(A)`` (HERK for complex dtypes) into a new result, lower triangle: on
    the band (its blocks above the diagonal moved below it, then zeroed), on the triangle or
    by splitting K, the same bound; the strict upper triangle exactly zero; the diagonal real
    for HERK."""
    from blasmp_array.ops.blas3 import _syrk_ksplit, syrk

    monkeypatch.setattr(syrk, "BALANCED_BAND", {grid.backend.name} if shape == "band" else set())
    # the route runs on host arrays: the CPU backend only
    ksplit = shape == "ksplit" and grid.backend.name == "cpu" and grid.size > 1 and 1 in grid.shape
    monkeypatch.setattr(_syrk_ksplit, "BACKENDS", {grid.backend.name} if ksplit else set())
    moved: list = []
    real = syrk._lower_from_band
    monkeypatch.setattr(syrk, "_lower_from_band", lambda *x: (moved.append(1), real(*x))[1])
    m, n, nb = case
    a = random_matrix(np.random.default_rng(m + n * nb), (m, n), dtype)
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)
    herm = np.dtype(dtype).kind == "c"
    c = bm.linalg.syrk(A, trans="C" if herm else "T").to_numpy()
    ref = (a.conj().T if herm else a.T) @ a
    scale = np.abs(high(a)).T @ np.abs(high(a))
    assert_within_bound(np.tril(c), np.tril(ref), scale, m, dtype, "tril(A^H A)")
    assert np.all(np.triu(c, 1) == 0), "the upper triangle of a new lower result is not zero"
    if herm:
        assert np.all(np.diag(c).imag == 0)
    assert len(moved) == (1 if shape == "band" and grid.size > 1 and n else 0)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("case", CASES[:3], ids=lambda c: f"{c[0]}x{c[1]}b{c[2]}")
def test_new_lower_triangle_syr2k(grid, dtype, case, monkeypatch):
    """``bm.linalg.syr2k(A, B)`` (HER2K for complex dtypes) into a new lower result on the
    band: the bound of ``op(A) op(B)^T + op(B) op(A)^T``, zeros above the diagonal."""
    from blasmp_array.ops.blas3 import syrk

    monkeypatch.setattr(syrk, "BALANCED_BAND", {grid.backend.name})
    m, n, nb = case
    rng = np.random.default_rng(m * nb + n)
    a, b = random_matrix(rng, (m, n), dtype), random_matrix(rng, (m, n), dtype)
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)
    B = bm.from_numpy(b, block=(nb, nb), grid=grid)
    herm = np.dtype(dtype).kind == "c"
    t = "C" if herm else "T"
    c = bm.linalg.syr2k(A, B, trans=t).to_numpy()
    h = (lambda x: x.conj().T) if herm else (lambda x: x.T)
    ref = h(a) @ b + h(b) @ a
    scale = 2 * np.abs(high(a)).T @ np.abs(high(b))
    assert_within_bound(np.tril(c), np.tril(ref), scale, m, dtype, "tril(A^H B + B^H A)")
    assert np.all(np.triu(c, 1) == 0), "the upper triangle of a new lower result is not zero"


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", ["N", "T"])
@pytest.mark.parametrize("case", [(10, 13, 3), (12, 7, 4), (9, 9, 9)], ids=str)
def test_ksplit_into_c(grid, dtype, lower, trans, case, monkeypatch):
    """K split into a given ``C`` with ``alpha`` and ``beta`` (HERK ``A^H A`` for a complex
    ``trans='T'``, complex symmetric ``A A^T`` for ``'N'``): the triangle within the bound of
    ``alpha op(A) op(A)^H + beta C``, the other triangle, poisoned with NaN, never written; the
    route taken on every one-dimensional grid, and the panel pipeline where ``2 k < n``."""
    from blasmp_array.ops.blas3 import _syrk_ksplit, syrk

    calls: list = []
    real = _syrk_ksplit.update
    monkeypatch.setattr(_syrk_ksplit, "update", lambda *x: (calls.append(1), real(*x))[1])
    m, n, nb = case
    herm = np.dtype(dtype).kind == "c" and trans == "T"
    rng = np.random.default_rng(m * n + nb + lower)
    a = random_matrix(rng, (m, n), dtype)
    t = ("C" if herm else "T") if trans == "T" else "N"
    opa = a if trans == "N" else (a.conj().T if herm else a.T)
    nout, k = opa.shape
    c0 = random_matrix(rng, (nout, nout), dtype)
    if herm:
        c0 = c0 + c0.conj().T
    other = np.triu_indices(nout, 1) if lower else np.tril_indices(nout, -1)
    c0[other] = np.nan
    A = bm.from_numpy(a, block=(nb, nb), grid=grid)
    C = bm.from_numpy(c0, block=(nb, nb), grid=grid)
    alpha, beta = 0.5, -2.0
    with np.errstate(invalid="ignore"):
        out = syrk.syrk(A, C, trans=t, lower=lower, alpha=alpha, beta=beta)
    c = out.to_numpy()
    ref = alpha * (opa @ (opa.conj().T if herm else opa.T)) + beta * np.nan_to_num(c0)
    tri = np.tril if lower else np.triu
    scale = abs(alpha) * np.abs(high(opa)) @ np.abs(high(opa)).T + abs(beta) * np.abs(
        np.nan_to_num(high(c0))
    )
    assert_within_bound(tri(c), tri(ref), scale, k + 1, dtype, "triangle of alpha A A^H + beta C")
    assert np.all(np.isnan(c[other])), "the other triangle of C was written"
    expect = grid.backend.name == "cpu" and grid.size > 1 and 1 in grid.shape and 2 * k >= nout
    assert len(calls) == (1 if expect else 0)
