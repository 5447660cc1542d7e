"""Distributed BLAS3 (gemm, symm, syrk/herk, syr2k/her2k, trmm, matmul) in the PBLAS-tester style.

Every rank runs every test in the same order. The sweep draws its cases from the product
ops x variants x grids x blocks x ragged shapes x dtypes x num_stages with a seeded RNG
(identical on all ranks); the exhaustive product is behind ``-m full_sweep``. Results are
checked against higher-precision references with the componentwise bound of
``tests/blas3_reference.py``; rogue NaNs sit in every part that must be neither read nor written.
"""

from __future__ import annotations

import itertools
import os
import sys
import warnings

import numpy as np
import pytest

import blasmp_array as bm
from blasmp_array import linalg

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from blas3_reference import (  # noqa: E402
    DTYPES,
    assert_within_bound,
    herm_from,
    high,
    op,
    poison,
    random_matrix,
    sym_from,
    tri_from,
)

OPS = ["gemm", "symm", "syrk", "herk", "syr2k", "her2k", "trmm"]
BLOCKS = [1, 2, 17, 64, (3, 5), (16, 7)]
SHAPES = [(1, 1, 1), (5, 7, 3), (23, 17, 29), (40, 33, 19), (64, 64, 64), (70, 3, 45)]
STAGES = [1, 2, 3]
N_SAMPLED = 10  # cases per grid in the default (CI) run


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def _swap(block):
    return block[::-1]


def _scalar(rng, dtype, real=False, allow_zero=True):
    choices = [1.0, -0.5, 2.0] + ([0.0] if allow_zero else [])
    v = choices[rng.integers(len(choices))]
    if np.dtype(dtype).kind == "c" and not real and rng.integers(2):
        v = complex(v, 0.75)
    return v


class Case:
    """One randomly drawn operator call: builds inputs, runs, checks."""

    def __init__(self, seed: int, grid, index: int) -> None:
        rng = np.random.default_rng(seed)
        self.rng = rng
        self.grid = grid
        self.op = OPS[index % len(OPS)]  # every operator on every grid
        blk = BLOCKS[rng.integers(len(BLOCKS))]
        self.blk = (blk, blk) if isinstance(blk, int) else blk
        self.m, self.n, self.k = SHAPES[rng.integers(len(SHAPES))]
        self.dtype = np.dtype(DTYPES[rng.integers(len(DTYPES))])
        if self.op in ("herk", "her2k") and self.dtype.kind != "c":
            self.dtype = np.dtype(np.complex128 if self.dtype == np.float64 else np.complex64)
        self.stages = STAGES[rng.integers(len(STAGES))]
        self.step_width = [None, 1, 40][rng.integers(3)]
        self.seed = seed

    def __repr__(self) -> str:
        return (
            f"Case(seed={self.seed}, {self.op}, m,n,k={self.m},{self.n},{self.k}, "
            f"block={self.blk}, {self.dtype}, stages={self.stages}, width={self.step_width})"
        )

    def dist(self, x, block):
        return bm.from_numpy(x, block=block, grid=self.grid)

    def call(self, fn, *args, **kw):
        """``fn`` on the case's pipeline settings; operands have compatible layouts, so any
        (redistribution) warning is an error."""
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return fn(
                *args, **kw, num_stages=self.stages, method="summa", step_width=self.step_width
            )

    def run(self) -> None:
        method = {"herk": "syrk", "syr2k": "syrk", "her2k": "syrk"}.get(self.op, self.op)
        getattr(self, "_" + method)()

    # -- gemm -------------------------------------------------------------------------------
    def _gemm(self):
        rng, dt = self.rng, self.dtype
        m, n, k = self.m, self.n, self.k
        bm_, bk = self.blk
        bn = [bm_, bk, 5][rng.integers(3)]
        ta, tb = "NTC"[rng.integers(3)], "NTC"[rng.integers(3)]
        a = random_matrix(rng, (m, k) if ta == "N" else (k, m), dt)
        b = random_matrix(rng, (k, n) if tb == "N" else (n, k), dt)
        alpha, beta = _scalar(rng, dt), _scalar(rng, dt)
        with_c = bool(rng.integers(2)) or beta != 0
        c0 = random_matrix(rng, (m, n), dt)
        if with_c and beta == 0:
            c0 = poison(c0, "all")
        A = self.dist(a, (bm_, bk) if ta == "N" else (bk, bm_))
        B = self.dist(b, (bk, bn) if tb == "N" else (bn, bk))
        C = self.dist(c0, (bm_, bn)) if with_c else None
        out = self.call(linalg.gemm, A, B, C, alpha=alpha, beta=beta, trans_a=ta, trans_b=tb)
        if with_c:
            assert out is C
        got = out.to_numpy()
        oa, ob = op(high(a), ta), op(high(b), tb)
        beta_eff = beta if with_c else 0
        ref = alpha * (oa @ ob)
        scale = abs(alpha) * (np.abs(oa) @ np.abs(ob))
        if beta_eff != 0:
            ref = ref + beta_eff * high(c0)
            scale = scale + abs(beta_eff) * np.abs(high(c0))
        assert_within_bound(got, ref, scale.astype(np.float64), k, dt, repr(self))
        assert _same(A.to_numpy(), a) and _same(B.to_numpy(), b), "inputs changed"

    # -- symm -------------------------------------------------------------------------------
    def _symm(self):
        rng, dt = self.rng, self.dtype
        m, n = self.m, self.n
        side = ["left", "right"][rng.integers(2)]
        lower = bool(rng.integers(2))
        b1, b2 = self.blk
        na = m if side == "left" else n
        a = poison(random_matrix(rng, (na, na), dt), "upper" if lower else "lower")
        b = random_matrix(rng, (m, n), dt)
        alpha, beta = _scalar(rng, dt), _scalar(rng, dt)
        with_c = bool(rng.integers(2))
        c0 = random_matrix(rng, (m, n), dt)
        if with_c and beta == 0:
            c0 = poison(c0, "all")
        blk_b = (b1, b2) if side == "left" else (b2, b1)
        A = self.dist(a, (b1, b1))
        B = self.dist(b, blk_b)
        C = self.dist(c0, blk_b) if with_c else None
        out = self.call(linalg.symm, A, B, C, side=side, lower=lower, alpha=alpha, beta=beta)
        got = out.to_numpy()
        s = sym_from(np.nan_to_num(high(a)), lower)
        hb = high(b)
        prod = s @ hb if side == "left" else hb @ s
        absprod = np.abs(s) @ np.abs(hb) if side == "left" else np.abs(hb) @ np.abs(s)
        beta_eff = beta if with_c else 0
        ref = alpha * prod + (beta_eff * high(c0) if beta_eff != 0 else 0)
        scale = abs(alpha) * absprod + (abs(beta_eff) * np.abs(high(c0)) if beta_eff else 0)
        assert_within_bound(got, ref, np.asarray(scale, np.float64), na, dt, repr(self) + side)
        assert _same(A.to_numpy(), a) and _same(B.to_numpy(), b), "inputs changed"

    # -- syrk / herk ------------------------------------------------------------------------
    def _syrk(self, two=False):
        rng, dt = self.rng, self.dtype
        herm = self.op in ("herk", "her2k")
        two = self.op in ("syr2k", "her2k")
        n, k = self.n, self.k
        trans = ("C" if herm else "NT"[rng.integers(2)]) if rng.integers(3) else "N"
        if herm and trans == "N":
            trans = "C"
        lower = bool(rng.integers(2))
        b1, b2 = self.blk
        shape = (n, k) if trans == "N" else (k, n)
        blk_a = (b1, b2) if trans == "N" else (b2, b1)
        a = random_matrix(rng, shape, dt)
        b = random_matrix(rng, shape, dt) if two else None
        alpha = _scalar(rng, dt, real=herm and not two)
        beta = _scalar(rng, dt, real=herm)
        with_c = bool(rng.integers(2))
        c0 = poison(random_matrix(rng, (n, n), dt), "upper" if lower else "lower")
        if herm:  # a Hermitian C has a real diagonal (BLAS ignores its imaginary part)
            d = np.arange(n)
            c0[d, d] = c0[d, d].real
        if with_c and beta == 0:
            c0 = poison(c0, "lower" if lower else "upper")
            c0 = poison(c0, "diag")
        A = self.dist(a, blk_a)
        C = self.dist(c0, (b1, b1)) if with_c else None
        kw = dict(trans=trans, lower=lower, alpha=alpha, beta=beta)
        if two:
            out = self.call(linalg.syr2k, A, self.dist(b, blk_a), C, **kw)
        else:
            out = self.call(linalg.syrk, A, C, **kw)
        got = out.to_numpy()
        oa = op(high(a), trans)
        flip = "C" if herm else "T"
        if two:
            ob = op(high(b), trans)
            alpha2 = np.conj(alpha) if herm else alpha
            prod = alpha * (oa @ op(ob, flip)) + alpha2 * (ob @ op(oa, flip))
            absprod = abs(alpha) * 2 * (np.abs(oa) @ np.abs(ob).T)
            absprod = abs(alpha) * (np.abs(oa) @ np.abs(ob).T + np.abs(ob) @ np.abs(oa).T)
        else:
            prod = alpha * (oa @ op(oa, flip))
            absprod = abs(alpha) * (np.abs(oa) @ np.abs(oa).T)
        beta_eff = beta if with_c else 0
        ref = prod + (beta_eff * high(np.nan_to_num(c0)) if beta_eff else 0)
        scale = absprod + (abs(beta_eff) * np.abs(high(np.nan_to_num(c0))) if beta_eff else 0)
        tri = np.tril(np.ones((n, n), bool)) if lower else np.triu(np.ones((n, n), bool))
        what = f"{self!r} trans={trans} lower={lower}"
        assert_within_bound(
            np.where(tri, got, 0), np.where(tri, ref, 0), np.asarray(scale, np.float64), k, dt, what
        )
        other = ~tri
        if with_c:
            assert _same(got[other], c0[other]), f"{what}: other triangle of C was written"
        else:
            assert np.all(got[other] == 0), f"{what}: other triangle of a new C is not zero"
        if herm:
            assert np.all(np.diag(got).imag == 0), f"{what}: HERK diagonal not real"
        assert _same(A.to_numpy(), a), "A changed"

    # -- trmm -------------------------------------------------------------------------------
    def _trmm(self):
        rng, dt = self.rng, self.dtype
        m, n = self.m, self.n
        side = ["left", "right"][rng.integers(2)]
        lower = bool(rng.integers(2))
        trans = "NTC"[rng.integers(3)]
        unit = bool(rng.integers(2))
        b1, b2 = self.blk
        na = m if side == "left" else n
        a = poison(random_matrix(rng, (na, na), dt), "upper" if lower else "lower")
        if unit:
            a = poison(a, "diag")
        b = random_matrix(rng, (m, n), dt)
        alpha = _scalar(rng, dt)
        blk_b = (b1, b2) if side == "left" else (b2, b1)
        A = self.dist(a, (b1, b1))
        B = self.dist(b, blk_b)
        out = self.call(
            linalg.trmm, A, B, side=side, lower=lower, trans=trans, unit_diagonal=unit, alpha=alpha
        )
        got = out.to_numpy()
        t = op(tri_from(high(a), lower, unit), trans)
        hb = high(b)
        ref = alpha * (t @ hb if side == "left" else hb @ t)
        scale = abs(alpha) * (np.abs(t) @ np.abs(hb) if side == "left" else np.abs(hb) @ np.abs(t))
        what = f"{self!r} side={side} lower={lower} trans={trans} unit={unit}"
        assert_within_bound(got, ref, np.asarray(scale, np.float64), na, dt, what)
        assert _same(A.to_numpy(), a) and _same(B.to_numpy(), b), "inputs changed"


# -- the sweep ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", range(N_SAMPLED))
def test_sweep_sampled(grid, case):
    seed = 1000 * (grid.nprow * 10 + grid.npcol) + case
    Case(seed, grid, case).run()


@pytest.mark.full_sweep
@pytest.mark.parametrize("chunk", range(20))
def test_sweep_full(grid, chunk):
    # 20 cases per test: each test builds a grid (two communicators), keep their number low
    for case in range(20 * chunk, 20 * chunk + 20):
        seed = 7_000_000 + 1000 * (grid.nprow * 10 + grid.npcol) + case
        Case(seed, grid, case).run()


# -- stages and the race detector -----------------------------------------------------------
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_gemm_stages_bit_identical(grid, stages):
    rng = np.random.default_rng(5)
    a = random_matrix(rng, (45, 38), np.float64)
    b = random_matrix(rng, (38, 29), np.float64)
    A, B = bm.from_numpy(a, block=4, grid=grid), bm.from_numpy(b, block=4, grid=grid)
    first = None
    for _ in range(3):
        got = linalg.gemm(A, B, num_stages=stages, method="summa", step_width=4).to_numpy()
        if first is None:
            first = got
            ref = high(a) @ high(b)
            scale = np.abs(a) @ np.abs(b)
            assert_within_bound(got, ref, scale, 38, np.float64, f"stages={stages}")
        else:
            assert np.array_equal(got, first), "pipelined gemm is not reproducible (race?)"


def test_local_path_matches_summa():
    g = bm.ProcessGrid(1, 1, comm=_self_comm(), backend="cpu")
    rng = np.random.default_rng(3)
    a, b = random_matrix(rng, (20, 13), np.complex128), random_matrix(rng, (20, 9), np.complex128)
    A, B = bm.from_numpy(a, block=6, grid=g), bm.from_numpy(b, block=6, grid=g)
    x = linalg.gemm(A, B, trans_a="C", method="local").to_numpy()
    y = linalg.gemm(A, B, trans_a="C", method="summa", num_stages=1).to_numpy()
    assert_within_bound(x, a.conj().T @ b, np.abs(a).T @ np.abs(b), 20, np.complex128, "local")
    assert_within_bound(y, a.conj().T @ b, np.abs(a).T @ np.abs(b), 20, np.complex128, "summa")


def _self_comm():
    from mpi4py import MPI

    return MPI.COMM_SELF


# -- matmul routing -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_matmul_routes(grid, dtype):
    rng = np.random.default_rng(11)
    a = random_matrix(rng, (37, 22), dtype)
    b = random_matrix(rng, (22, 15), dtype)
    c = random_matrix(rng, (37, 15), dtype)
    A = bm.from_numpy(a, block=(8, 8), grid=grid)
    B = bm.from_numpy(b, block=(8, 5), grid=grid)
    Cm = bm.from_numpy(c, block=(8, 5), grid=grid)
    ha, hb, hc = high(a), high(b), high(c)
    assert_within_bound((A @ B).to_numpy(), ha @ hb, np.abs(a) @ np.abs(b), 22, dtype, "A @ B")
    assert_within_bound(
        np.matmul(A, B).to_numpy(), ha @ hb, np.abs(a) @ np.abs(b), 22, dtype, "np.matmul"
    )
    # A.T @ C: gemm with a transpose flag (no copy)
    assert_within_bound(
        (A.T @ Cm).to_numpy(), ha.T @ hc, np.abs(a).T @ np.abs(c), 37, dtype, "A.T @ C"
    )
    # A.T @ A: SYRK, full symmetric result
    s = (A.T @ A).to_numpy()
    assert_within_bound(s, ha.T @ ha, np.abs(a).T @ np.abs(a), 37, dtype, "A.T @ A")
    assert np.array_equal(s, s.T), "A.T @ A is not exactly symmetric"
    s = (A @ A.T).to_numpy()
    assert_within_bound(s, ha @ ha.T, np.abs(a) @ np.abs(a).T, 22, dtype, "A @ A.T")
    assert np.array_equal(s, s.T)
    h = (A.conj().T @ A).to_numpy()
    assert_within_bound(h, ha.conj().T @ ha, np.abs(a).T @ np.abs(a), 37, dtype, "A^H A")
    assert np.array_equal(h, h.conj().T), "A.conj().T @ A is not exactly Hermitian"
    h = (A @ A.H).to_numpy()
    assert_within_bound(h, ha @ ha.conj().T, np.abs(a) @ np.abs(a).T, 22, dtype, "A A^H")
    assert np.array_equal(h, h.conj().T)


def test_matmul_uses_syrk(grid, monkeypatch):
    """``A.T @ A`` goes through the rank-k path, not GEMM."""
    import blasmp_array.linalg as L

    calls = []
    monkeypatch.setattr(L, "gemm", lambda *a, **k: calls.append("gemm"))
    A = bm.from_numpy(np.arange(12.0).reshape(4, 3), block=2, grid=grid)
    s = (A.T @ A).to_numpy()
    assert calls == []
    x = np.arange(12.0).reshape(4, 3)
    assert np.array_equal(s, x.T @ x)


def test_mixed_dtypes_promote(grid):
    rng = np.random.default_rng(2)
    a = random_matrix(rng, (9, 7), np.float32)
    b = random_matrix(rng, (7, 5), np.complex128)
    A, B = bm.from_numpy(a, block=3, grid=grid), bm.from_numpy(b, block=3, grid=grid)
    C = linalg.gemm(A, B)
    assert C.dtype == np.complex128
    assert_within_bound(
        C.to_numpy(), high(a) @ high(b), np.abs(a) @ np.abs(b), 7, np.complex128, "mixed"
    )


def test_incompatible_blocks_warn_and_work(grid):
    rng = np.random.default_rng(4)
    a, b = random_matrix(rng, (30, 20), np.float64), random_matrix(rng, (20, 10), np.float64)
    A, B = bm.from_numpy(a, block=(4, 6), grid=grid), bm.from_numpy(b, block=(5, 3), grid=grid)
    with pytest.warns(UserWarning, match="redistributing B"):
        C = linalg.gemm(A, B)
    assert_within_bound(
        C.to_numpy(), high(a) @ high(b), np.abs(a) @ np.abs(b), 20, np.float64, "redistributed"
    )
    s = random_matrix(rng, (30, 30), np.float64)
    S = bm.from_numpy(s, block=(4, 6), grid=grid)
    with pytest.warns(UserWarning, match="square"):
        out = linalg.symm(S, A)
    assert_within_bound(
        out.to_numpy(),
        sym_from(high(s), True) @ high(a),
        np.abs(sym_from(s, True)) @ np.abs(a),
        30,
        np.float64,
        "symm",
    )


def test_syrk_into_c_with_mismatched_blocks(grid):
    rng = np.random.default_rng(8)
    a = random_matrix(rng, (14, 9), np.float64)
    c0 = poison(random_matrix(rng, (14, 14), np.float64), "upper")
    A = bm.from_numpy(a, block=3, grid=grid)
    C = bm.from_numpy(c0, block=(4, 5), grid=grid)
    with pytest.warns(UserWarning):
        out = linalg.syrk(A, C, alpha=2.0, beta=1.0)
    assert out is C
    got = C.to_numpy()
    tri = np.tril(np.ones((14, 14), bool))
    ref = 2 * high(a) @ high(a).T + high(np.nan_to_num(c0))
    assert_within_bound(
        np.where(tri, got, 0),
        np.where(tri, ref, 0),
        2 * np.abs(a) @ np.abs(a).T + np.abs(np.nan_to_num(c0)),
        9,
        np.float64,
        "syrk C",
    )
    assert np.all(np.isnan(got[~tri]))


def test_symm_and_herk_hermitian_helpers(grid):
    """herk with trans='C' equals A^H A on the lower triangle (and herm_from rebuilds it)."""
    rng = np.random.default_rng(9)
    a = random_matrix(rng, (11, 6), np.complex128)
    A = bm.from_numpy(a, block=4, grid=grid)
    got = linalg.syrk(A, trans="C").to_numpy()
    full = herm_from(got, True)
    assert_within_bound(full, a.conj().T @ a, np.abs(a).T @ np.abs(a), 11, np.complex128, "herk")


# -- bad inputs raise on every rank ---------------------------------------------------------
def test_bad_arguments_raise(grid):
    A = bm.from_numpy(np.ones((6, 4)), block=2, grid=grid)
    B = bm.from_numpy(np.ones((5, 3)), block=2, grid=grid)
    S = bm.from_numpy(np.ones((6, 6)), block=2, grid=grid)
    with pytest.raises(ValueError, match="gemm.*6x4.*5x3"):
        linalg.gemm(A, B)
    with pytest.raises(ValueError, match="trans_a must be one of 'N', 'T', 'C'"):
        linalg.gemm(A, A, trans_a="X")
    with pytest.raises(ValueError, match="side"):
        linalg.symm(S, A, side="middle")
    with pytest.raises(TypeError, match="lower"):
        linalg.trmm(S, A, lower="yes")
    with pytest.raises(ValueError, match="num_stages"):
        linalg.gemm(A.T, A, num_stages=0)
    with pytest.raises(TypeError, match="BlockCyclicArray"):
        linalg.gemm(np.ones((6, 4)), A)
    with pytest.raises(ValueError, match="symm"):
        linalg.symm(A, S)
    with pytest.raises(ValueError, match="C must be"):
        linalg.syrk(A, B)
    with pytest.raises(TypeError, match="complex"):
        linalg.gemm(A.T, A, alpha=1j)
    with pytest.raises(ValueError, match="matmul"):
        A @ B
    with pytest.raises(TypeError, match="C has dtype float32"):
        C32 = bm.from_numpy(np.ones((4, 4), np.float32), block=2, grid=grid)
        linalg.gemm(A.T, A, C32)


def test_trans_lowercase_and_views(grid):
    rng = np.random.default_rng(12)
    a = random_matrix(rng, (10, 7), np.complex128)
    b = random_matrix(rng, (10, 5), np.complex128)
    A, B = bm.from_numpy(a, block=3, grid=grid), bm.from_numpy(b, block=3, grid=grid)
    x = linalg.gemm(A, B, trans_a="c").to_numpy()
    y = linalg.gemm(A.H, B).to_numpy()
    z = linalg.gemm(A.conj(), B, trans_a="t").to_numpy()
    ref = a.conj().T @ b
    for got in (x, y, z):
        assert_within_bound(got, ref, np.abs(a).T @ np.abs(b), 10, np.complex128, "views")
    assert np.array_equal(x, y) and np.array_equal(x, z)


# -- exhaustive small product (behind full_sweep) -------------------------------------------
@pytest.mark.full_sweep
@pytest.mark.parametrize("ta,tb", list(itertools.product("NTC", "NTC")))
@pytest.mark.parametrize("dtype", DTYPES)
def test_gemm_full_trans_product(grid, ta, tb, dtype):
    rng = np.random.default_rng(21)
    for (m, n, k), blk, st in itertools.product(SHAPES, [1, 17, 64], STAGES):
        a = random_matrix(rng, (m, k) if ta == "N" else (k, m), dtype)
        b = random_matrix(rng, (k, n) if tb == "N" else (n, k), dtype)
        A, B = bm.from_numpy(a, block=blk, grid=grid), bm.from_numpy(b, block=blk, grid=grid)
        got = linalg.gemm(A, B, trans_a=ta, trans_b=tb, num_stages=st, method="summa").to_numpy()
        oa, ob = op(high(a), ta), op(high(b), tb)
        assert_within_bound(got, oa @ ob, np.abs(oa) @ np.abs(ob), k, dtype, f"{m, n, k, blk, st}")


# -- the plan (pure index math; the same on every rank) -------------------------------------
@pytest.mark.parametrize("structure", ["general", "sym", "tri"])
def test_plan_tiles_every_panel_exactly(structure):
    """Pieces and zero fills tile each active panel exactly once, every piece holds the block
    of ``M`` it claims (checked by packing the global matrix of block indices), and each
    sender sends one segment per group and step."""
    from blasmp_array.layout import BlockCyclicLayout
    from blasmp_array.ops.engine.panels import (
        PanelSpec,
        Source,
        _masked,
        make_steps,
        plan_panels,
    )

    rng = np.random.default_rng(17)
    for _ in range(6):
        pr, pc = [(1, 1), (2, 3), (3, 2), (1, 4)][rng.integers(4)]
        b = int(rng.integers(1, 6))
        n = int(rng.integers(1, 25))
        kb = b if structure != "general" else int(rng.integers(1, 6))
        kdim = n if structure != "general" else int(rng.integers(1, 25))
        opc = "NTCR"[rng.integers(4)]
        uplo = "LU"[rng.integers(2)]
        unit = bool(rng.integers(2))
        xshape = (n, kdim) if opc in "NR" else (kdim, n)
        xblock = (b, kb) if opc in "NR" else (kb, b)
        xl = BlockCyclicLayout(xshape, xblock, (pr, pc), (int(rng.integers(pr)), 0))
        src = Source(xl, opc, structure, uplo, unit)
        axis = int(rng.integers(2))
        tshape = (n, 7) if axis == 0 else (7, n)
        tblock = (b, 3) if axis == 0 else (3, b)
        tl = BlockCyclicLayout(tshape, tblock, (pr, pc), (0, int(rng.integers(pc))))
        steps = make_steps(kdim, kb, [None, 2 * kb, 100][rng.integers(3)])
        plan = plan_panels(PanelSpec(src, tl, axis), steps)
        # X holds a unique complex number per element; M is built from it with numpy
        x = (np.arange(xshape[0])[:, None] * 1000 + np.arange(xshape[1])[None, :]) * (1 + 1j)
        if structure == "sym":
            t = np.tril(x) if uplo == "L" else np.triu(x)
            xe = t + (np.tril(x, -1) if uplo == "L" else np.triu(x, 1)).T
        elif structure == "tri":
            xe = tri_from(x, uplo == "L", unit)
        else:
            xe = x
        m_full = {"N": xe, "T": xe.T, "C": xe.conj().T, "R": xe.conj()}[opc]
        locals_ = {
            (p, q): x[np.ix_(xl.local_rows(p), xl.local_cols(q))]
            for p in range(pr)
            for q in range(pc)
        }
        for k, (b0, _b1) in enumerate(steps):
            k0 = b0 * kb
            for g, gs in enumerate(plan[k]):
                if not gs.receivers:
                    continue
                rows = tl.local_rows(g) if axis == 0 else tl.local_cols(g)
                cover = np.zeros((gs.hi - gs.lo, gs.width), int)
                panel = np.full(cover.shape, np.nan + 0j)
                senders = [seg[0] for seg in gs.segments]
                assert len(senders) == len(set(senders)), "one segment per sender"
                for sender, _, _, pieces in gs.segments:
                    local = locals_[divmod(sender, pc)]
                    for p in pieces:
                        blk = local[p.sr0 : p.sr0 + p.snr, p.sc0 : p.sc0 + p.snc]
                        blk = _masked(np, blk, p.mask)
                        blk = {"N": blk, "T": blk.T, "C": blk.conj().T, "R": blk.conj()}[p.op]
                        panel[p.dr : p.dr + p.nr, p.dc : p.dc + p.nc] = blk
                        cover[p.dr : p.dr + p.nr, p.dc : p.dc + p.nc] += 1
                for dr, dc, nr, nc in gs.zeros:
                    panel[dr : dr + nr, dc : dc + nc] = 0
                    cover[dr : dr + nr, dc : dc + nc] += 1
                assert np.all(cover == 1), "pieces must tile the panel exactly once"
                want = m_full[np.ix_(rows[gs.lo : gs.hi], np.arange(k0, k0 + gs.width))]
                assert np.array_equal(panel, want)
                outside = np.r_[0 : gs.lo, gs.hi : len(rows)]
                trimmed = m_full[np.ix_(rows[outside], np.arange(k0, k0 + gs.width))]
                assert np.all(trimmed == 0), "only zero rows may be trimmed"


def test_conjugate_view_and_empty_dimensions(grid):
    rng = np.random.default_rng(13)
    a = random_matrix(rng, (10, 7), np.complex64)
    b = random_matrix(rng, (7, 5), np.complex64)
    A, B = bm.from_numpy(a, block=3, grid=grid), bm.from_numpy(b, block=3, grid=grid)
    # conj(A) @ B: the 'R' (conjugate, no transpose) panel op, on the pipeline
    got = linalg.gemm(A.conj(), B, method="summa").to_numpy()
    assert_within_bound(got, a.conj() @ b, np.abs(a) @ np.abs(b), 7, np.complex64, "conj(A) B")
    got = (A.conj() @ B.conj()).to_numpy()
    ref = a.conj() @ b.conj()
    assert_within_bound(got, ref, np.abs(a) @ np.abs(b), 7, np.complex64, "conj(A) conj(B)")
    # k = 0: C := beta C; m = 0: an empty result
    z1 = bm.from_numpy(np.zeros((6, 0), np.float64), block=2, grid=grid)
    z2 = bm.from_numpy(np.zeros((0, 4), np.float64), block=2, grid=grid)
    c0 = random_matrix(rng, (6, 4), np.float64)
    C = bm.from_numpy(c0, block=2, grid=grid)
    out = linalg.gemm(z1, z2, C, beta=0.5)
    assert np.array_equal(out.to_numpy(), 0.5 * c0)
    assert linalg.gemm(z2.T, z2).shape == (4, 4)
    assert linalg.syrk(z1).to_numpy().tolist() == np.zeros((6, 6)).tolist()


def test_structured_ops_on_views_and_overwrite(grid):
    rng = np.random.default_rng(14)
    a = random_matrix(rng, (13, 13), np.complex128)
    b = random_matrix(rng, (13, 8), np.complex128)
    A, B = bm.from_numpy(a, block=4, grid=grid), bm.from_numpy(b, block=4, grid=grid)
    scale = np.abs(a) @ np.abs(b)
    # the lower triangle of the view A.T is A's upper triangle, conjugated for A.conj()
    got = linalg.symm(A.T, B, lower=True).to_numpy()
    assert_within_bound(got, sym_from(a, False) @ b, scale, 13, np.complex128, "symm(A.T)")
    got = linalg.symm(A.conj(), B, lower=False).to_numpy()
    assert_within_bound(got, sym_from(a.conj(), False) @ b, scale, 13, np.complex128, "conj")
    got = linalg.trmm(A.H, B, lower=True, trans="N", alpha=2).to_numpy()
    ref = 2 * np.triu(a).conj().T @ b
    assert_within_bound(got, ref, 2 * scale, 13, np.complex128, "trmm(A.H)")
    got = linalg.trmm(A, B.T, side="right", lower=False, trans="T").to_numpy()
    ref = b.T @ np.triu(a).T
    assert_within_bound(got, ref, np.abs(b).T @ np.abs(a), 13, np.complex128, "trmm(B.T)")
    out = linalg.trmm(A, B, unit_diagonal=True, overwrite_b=True)
    assert out is B
    ref = tri_from(a, True, True) @ b
    assert_within_bound(B.to_numpy(), ref, scale, 13, np.complex128, "overwrite_b")


def test_pipeline_stress_small_blocks(grid):
    """Many tiny steps with pieces from many owners (block 1, mirrored SYMM panels): the
    pattern that exposed a shared-ack-counter race (a slot overwritten while still read)."""
    rng = np.random.default_rng(31)
    a = random_matrix(rng, (23, 23), np.complex64)
    b = random_matrix(rng, (23, 17), np.complex64)
    A, B = bm.from_numpy(a, block=1, grid=grid), bm.from_numpy(b, block=1, grid=grid)
    s = sym_from(high(a), True)
    first = None
    for stages in (1, 1, 2):
        got = linalg.symm(A, B, num_stages=stages, method="summa", step_width=1).to_numpy()
        assert_within_bound(got, s @ high(b), np.abs(s) @ np.abs(b), 23, np.complex64, "stress")
        if first is None:
            first = got
        assert np.array_equal(got, first), "results differ between identical calls (race?)"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_kernel_warmup_runs_every_helper(grid, dtype):
    """The warm-up (run on GPUs before a pipeline's first signal wait) calls the operators'
    launched helpers with their current signatures; on a backend marked ``jit_kernels`` it runs
    once per dtype, and operators still give the right result after it."""
    from blasmp_array.ops.engine._warmup import begin_pipeline, registered_samples

    b = grid.backend
    was = b.jit_kernels
    b.jit_kernels = True
    try:
        b.__dict__.pop("_warmed_kernels", None)
        begin_pipeline(b, dtype)
        b.synchronize()
        assert b._warmed_kernels == {(name, np.dtype(dtype)) for name in registered_samples()}
        a = np.arange(1, 21, dtype=np.float64).reshape(4, 5).astype(dtype)
        A = bm.from_numpy(a, block=2, grid=grid)
        np.testing.assert_allclose((A @ A.T).to_numpy(), a @ a.T, rtol=0, atol=0)
    finally:
        b.jit_kernels = was
        b.__dict__.pop("_warmed_kernels", None)
