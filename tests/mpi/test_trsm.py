"""Distributed TRSM and solve_triangular (run on every rank under mpiexec).

Checks follow the PBLAS testers: rogue NaN in the triangle that must not be read (and on the
diagonal when it is unit), pass/fail in units of machine epsilon from the backward error
``||op(A) X - alpha B|| / (||A|| ||X|| n eps)`` and the forward error against SciPy on the
gathered matrices (bounded by the condition number), inputs unchanged after the call, many
grids, odd block sizes and ragged shapes. The default run samples the parameter product with a
seeded RNG (every side/uplo/trans/diag combination on every grid); the exhaustive product is
marked ``full_sweep``.
"""

from __future__ import annotations

import itertools
import os
import warnings
import zlib

import numpy as np
import pytest
import scipy.linalg as sla
from mpi4py import MPI

import blasmp_array as bm
from blasmp_array.array import BlockCyclicArray
from blasmp_array.layout import BlockCyclicLayout
from blasmp_array.ops.blas3.trsm import TrsmRedistributionWarning, solve_triangular, trsm

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
COMBOS = list(itertools.product(("left", "right"), (True, False), "NTC", (False, True)))
BLOCKS = [1, 2, 17, 64]
# (n, nrhs): n = order of A, nrhs = the other dimension of B; ragged for most blocks
SHAPES = [(37, 5), (23, 23), (6, 41), (70, 3)]


# -- helpers (independent of the creation module: layout maps only) -------------------------
def scatter(
    a: np.ndarray, grid: bm.ProcessGrid, block: tuple[int, int], src: tuple[int, int] = (0, 0)
) -> BlockCyclicArray:
    lay = BlockCyclicLayout(a.shape, block, grid.shape, src)
    rows, cols = lay.local_rows(grid.myrow), lay.local_cols(grid.mycol)
    local = grid.backend.asarray(np.ascontiguousarray(a[np.ix_(rows, cols)]))
    return BlockCyclicArray(local, lay, grid)


def gather(X: BlockCyclicArray) -> np.ndarray:
    X = X.resolve()
    lay, g = X.layout, X.grid
    parts = g.backend.allgather(
        (lay.local_rows(g.myrow), lay.local_cols(g.mycol), g.backend.asnumpy(X._data))
    )
    out = np.full(lay.shape, np.nan, X.dtype)
    for r, c, d in parts:
        out[np.ix_(r, c)] = d
    return out


def eps(dtype) -> float:
    return float(np.finfo(dtype).eps)


def make_triangular(rng, n, dtype, lower, unit):
    """A well-conditioned triangle with NaN in the other triangle (and on a unit diagonal).

    Returns (stored matrix with NaNs, the exact triangle it represents)."""
    cplx = np.dtype(dtype).kind == "c"
    a = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if cplx else 0)
    if unit:
        a /= max(n, 1)  # unit triangles with O(1) entries are exponentially ill-conditioned
    else:
        a[np.diag_indices(n)] = n + np.abs(rng.standard_normal(n))
    tri = np.tril(a) if lower else np.triu(a)
    if unit:
        np.fill_diagonal(tri, 1)
    stored = a.astype(dtype)
    stored[np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)] = np.nan
    if unit:
        stored[np.diag_indices(n)] = np.nan
    return stored, tri.astype(dtype).astype(np.complex128 if cplx else np.float64)


def op_of(t: np.ndarray, trans: str) -> np.ndarray:
    return {"N": t, "T": t.T, "C": t.conj().T}[trans]


def check_solution(x, tri, b, side, trans, alpha, dtype, lower):
    """Backward error < 10 (units of n eps) and forward error within the cond-based bound."""
    hi = np.complex128 if np.dtype(dtype).kind == "c" else np.float64
    x = x.astype(hi)
    b = b.astype(hi)
    opa = op_of(tri, trans)
    op_lower = lower != (trans != "N")
    n = tri.shape[0]
    e = eps(dtype)
    resid = (opa @ x - alpha * b) if side == "left" else (x @ opa - alpha * b)
    denom = np.linalg.norm(tri) * np.linalg.norm(x) * max(n, 1) * e
    backward = np.linalg.norm(resid) / denom if denom else np.linalg.norm(resid)
    assert backward < 10, f"backward error {backward:.3g} (units of n eps)"
    if side == "left":
        xref = sla.solve_triangular(opa, alpha * b, lower=op_lower)
    else:  # x opa = alpha b  <=>  opa^T x^T = alpha b^T
        xref = sla.solve_triangular(opa.T, (alpha * b).T, lower=not op_lower).T
    cond = np.linalg.cond(tri, 1) if n else 1.0
    forward = np.linalg.norm(x - xref) / max(np.linalg.norm(xref), np.finfo(hi).tiny)
    bound = 10 * max(n, 1) * e * cond
    assert forward <= bound, f"forward error {forward:.3g} > 10 n eps cond(A) = {bound:.3g}"


def run_case(
    grid, side, lower, trans, unit, dtype, nb, other_block, n, nrhs, num_stages, seed, alpha=None
):
    rng = np.random.default_rng(seed)
    stored, tri = make_triangular(rng, n, dtype, lower, unit)
    cplx = np.dtype(dtype).kind == "c"
    bshape = (n, nrhs) if side == "left" else (nrhs, n)
    b = rng.standard_normal(bshape) + (1j * rng.standard_normal(bshape) if cplx else 0)
    b = b.astype(dtype)
    if alpha is None:
        alpha = (1.5 - 0.5j) if cplx else -2.0
    A = scatter(stored, grid, (nb, nb))
    bblock = (nb, other_block) if side == "left" else (other_block, nb)
    B = scatter(b, grid, bblock)
    b_local = B.backend.asnumpy(B._data).copy()
    X = trsm(
        A,
        B,
        side=side,
        lower=lower,
        trans=trans,
        unit_diagonal=unit,
        alpha=alpha,
        num_stages=num_stages,
    )
    assert X.shape == B.shape and X.layout == B.layout and X.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(B.backend.asnumpy(B._data), b_local)  # B unchanged
    x = gather(X)
    assert np.isfinite(x).all()
    check_solution(x, tri, b, side, trans, alpha, dtype, lower)
    return X


def sampled_cases(count_per_combo: int = 1, seed: int = 1234):
    """Every side/uplo/trans/diag combination with a random block/shape/dtype/stages."""
    rng = np.random.default_rng(seed)
    cases = []
    for combo in COMBOS:
        for _ in range(count_per_combo):
            cases.append(
                (
                    *combo,
                    DTYPES[rng.integers(len(DTYPES))],
                    BLOCKS[rng.integers(len(BLOCKS))],
                    int(rng.integers(1, 6)),
                    SHAPES[rng.integers(len(SHAPES))],
                    int(rng.integers(1, 3)),
                )
            )
    return cases


def case_id(c):
    side, lower, trans, unit, dtype, nb, ob, shape, stages = c
    return (
        f"{side[0].upper()}{'L' if lower else 'U'}{trans}{'U' if unit else 'N'}-"
        f"{np.dtype(dtype).name}-nb{nb}x{ob}-{shape[0]}x{shape[1]}-s{stages}"
    )


# -- the sweep ---------------------------------------------------------------------------------
@pytest.mark.parametrize("case", sampled_cases(), ids=case_id)
def test_trsm_sampled(grid, case):
    side, lower, trans, unit, dtype, nb, ob, (n, nrhs), stages = case
    run_case(
        grid,
        side,
        lower,
        trans,
        unit,
        dtype,
        nb,
        ob,
        n,
        nrhs,
        stages,
        seed=zlib.crc32(case_id(case).encode()),
    )


_SWEEP_GRIDS: dict[tuple[int, int], bm.ProcessGrid] = {}


def _sweep_shapes() -> list[tuple[int, int]]:
    size = MPI.COMM_WORLD.Get_size()
    return list(dict.fromkeys([(1, size), (size, 1), bm.square_grid_shape(size)]))


@pytest.fixture(params=_sweep_shapes(), ids=lambda s: f"{s[0]}x{s[1]}")
def sweep_grid(request):
    """The ``grid`` fixture's shapes, one cached grid each: the sweep runs thousands of tests
    and every new ProcessGrid splits two communicators (MPICH has 2048 context ids)."""
    g = _SWEEP_GRIDS.get(request.param)
    if g is None:
        g = _SWEEP_GRIDS[request.param] = bm.ProcessGrid(
            *request.param, backend=os.environ.get("BLASMP_BACKEND", "cpu")
        )
    return g


@pytest.mark.full_sweep
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("nb", BLOCKS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize(
    "combo", COMBOS, ids=lambda c: f"{c[0]}-{'L' if c[1] else 'U'}{c[2]}{'U' if c[3] else 'N'}"
)
@pytest.mark.parametrize("stages", [1, 2])
def test_trsm_full_sweep(sweep_grid, combo, shape, nb, dtype, stages):
    side, lower, trans, unit = combo
    run_case(sweep_grid, side, lower, trans, unit, dtype, nb, 3, *shape, stages, seed=11)


# -- special cases -----------------------------------------------------------------------------
@pytest.mark.parametrize("stages", [1, 2])
def test_repeat_bit_identical(grid, stages):
    """Race detector: the same solve, repeated, gives bit-identical results."""
    rng = np.random.default_rng(5)
    n = 45
    stored, _tri = make_triangular(rng, n, np.float64, True, False)
    A = scatter(stored, grid, (4, 4))
    B = scatter(rng.standard_normal((n, 7)), grid, (4, 2))
    ref = gather(trsm(A, B, num_stages=stages))
    for side in ("left", "right"):
        Bs = B if side == "left" else scatter(rng.standard_normal((7, n)), grid, (3, 4))
        first = gather(trsm(A, Bs, side=side, trans="T", num_stages=stages))
        for _ in range(2):
            again = gather(trsm(A, Bs, side=side, trans="T", num_stages=stages))
            np.testing.assert_array_equal(again, first)
    for _ in range(2):
        np.testing.assert_array_equal(gather(trsm(A, B, num_stages=stages)), ref)


@pytest.mark.parametrize("unit", [False, True])
def test_singular_diagonal_raises_everywhere(grid, unit):
    rng = np.random.default_rng(3)
    n = 19
    stored, tri = make_triangular(rng, n, np.float64, True, unit)
    stored[13, 13] = 0.0
    stored[16, 16] = 0.0
    A = scatter(stored, grid, (5, 5))
    B = scatter(rng.standard_normal((n, 2)), grid, (5, 2))
    if unit:  # the diagonal is not read: zeros there are fine
        x = gather(trsm(A, B, unit_diagonal=True))
        tri2 = tri.copy()
        check_solution(x, tri2, gather(B), "left", "N", 1, np.float64, True)
        return
    with pytest.raises(np.linalg.LinAlgError, match=r"A\[13, 13\]"):
        trsm(A, B)
    with pytest.raises(np.linalg.LinAlgError, match="13"):
        solve_triangular(A, B, lower=True)


def test_overwrite_b(grid):
    rng = np.random.default_rng(4)
    n = 30
    stored, tri = make_triangular(rng, n, np.complex128, False, False)
    b = rng.standard_normal((n, 6)) + 1j * rng.standard_normal((n, 6))
    A = scatter(stored, grid, (7, 7))
    B = scatter(b, grid, (7, 4))
    X = trsm(A, B, lower=False, trans="C", overwrite_b=True)
    assert X is B
    check_solution(gather(B), tri, b, "left", "C", 1, np.complex128, False)


def test_alpha_zero_does_not_read_a(grid):
    n = 11
    A = scatter(np.full((n, n), np.nan), grid, (3, 3))
    B = scatter(np.ones((n, 4)), grid, (3, 2))
    np.testing.assert_array_equal(gather(trsm(A, B, alpha=0)), np.zeros((n, 4)))


@pytest.mark.parametrize("view", ["T", "H"])
def test_views_are_folded(grid, view):
    """trsm(T.T, B) and trsm(T.H, B) solve with the viewed matrix (lower names the view);
    the NaN triangle of the storage stays unread through the fold."""
    rng = np.random.default_rng(8)
    n = 26
    stored, tri = make_triangular(rng, n, np.complex64, True, False)
    b = (rng.standard_normal((n, 3)) + 1j * rng.standard_normal((n, 3))).astype(np.complex64)
    A = scatter(stored, grid, (6, 6))
    B = scatter(b, grid, (6, 3))
    Av = A.T if view == "T" else A.H
    viewed = tri.T if view == "T" else tri.conj().T
    for trans in "NTC":
        # ('T', 'C') and ('H', 'T') compose to conj(A): materialised by a distributed transpose
        x = gather(trsm(Av, B, lower=False, trans=trans))
        check_solution(x, viewed, b, "left", trans, 1, np.complex64, False)


def test_nonconforming_blocks_redistribute_with_warning(grid):
    rng = np.random.default_rng(9)
    n = 33
    stored, tri = make_triangular(rng, n, np.float64, True, False)
    b = rng.standard_normal((9, n))
    A = scatter(stored, grid, (4, 6))  # non-square blocks
    B = scatter(b, grid, (3, 5))  # right side: column blocks differ from A's
    with pytest.warns(TrsmRedistributionWarning, match="redistributing"):
        X = trsm(A, B, side="right", trans="T")
    assert X.layout == B.layout
    check_solution(gather(X), tri, b, "right", "T", 1, np.float64, True)


def test_a_on_another_grid_is_redistributed_with_warning(grid):
    rng = np.random.default_rng(12)
    n = 31
    stored, tri = make_triangular(rng, n, np.float64, True, False)
    b = rng.standard_normal((n, 7))
    other = _SWEEP_GRIDS.get(grid.shape[::-1]) or bm.ProcessGrid(
        *grid.shape[::-1], backend=grid.backend.name
    )
    _SWEEP_GRIDS.setdefault(grid.shape[::-1], other)
    A = scatter(stored, other, (5, 5))
    B = scatter(b, grid, (5, 3))
    if other.same_as(grid):  # a square grid: nothing to move, and no warning
        X = trsm(A, B)
    else:
        with pytest.warns(TrsmRedistributionWarning, match="redistributing A to B's grid"):
            X = trsm(A, B)
    assert X.grid is grid and X.layout == B.layout
    check_solution(gather(X), tri, b, "left", "N", 1, np.float64, True)


def test_different_sources(grid):
    """A and B whose first blocks sit on different processes (src != (0, 0))."""
    rng = np.random.default_rng(10)
    n = 29
    stored, tri = make_triangular(rng, n, np.float64, False, False)
    b = rng.standard_normal((n, 8))
    pr, pc = grid.shape
    A = scatter(stored, grid, (5, 5), src=(pr - 1, pc - 1))
    B = scatter(b, grid, (5, 3), src=(pr // 2, 0))
    for trans in "NT":
        x = gather(trsm(A, B, lower=False, trans=trans))
        check_solution(x, tri, b, "left", trans, 1, np.float64, False)


# -- solve_triangular (SciPy's signature) ---------------------------------------------------
@pytest.mark.parametrize("trans", [0, 1, 2, "N", "T", "C"])
def test_solve_triangular_matches_scipy(grid, trans):
    rng = np.random.default_rng(12)
    n = 21
    stored, tri = make_triangular(rng, n, np.complex128, False, False)  # default: upper
    b = rng.standard_normal((n, 4)) + 1j * rng.standard_normal((n, 4))
    A = scatter(stored, grid, (4, 4))
    B = scatter(b, grid, (4, 4))
    x = gather(solve_triangular(A, B, trans=trans, check_finite=True))
    ref = sla.solve_triangular(tri, b, trans=trans)
    tchar = {0: "N", 1: "T", 2: "C"}.get(trans, trans)
    check_solution(x, tri, b, "left", tchar, 1, np.complex128, False)
    np.testing.assert_allclose(x, ref, rtol=1e-10, atol=1e-12)


def test_solve_triangular_check_finite(grid):
    n = 8
    stored, _ = make_triangular(np.random.default_rng(0), n, np.float64, True, True)
    A = scatter(stored, grid, (3, 3))
    b = np.ones((n, 2))
    b[5, 1] = np.inf
    B = scatter(b, grid, (3, 1))
    with pytest.raises(ValueError, match="infs or NaNs"):
        solve_triangular(A, B, lower=True, unit_diagonal=True)
    # NaN only where a is not read: accepted
    x = gather(
        solve_triangular(A, scatter(np.ones((n, 2)), grid, (3, 1)), lower=True, unit_diagonal=True)
    )
    assert np.isfinite(x).all()
    # a NaN in the referenced triangle is caught
    stored2 = stored.copy()
    stored2[6, 2] = np.nan
    with pytest.raises(ValueError, match="infs or NaNs"):
        solve_triangular(
            scatter(stored2, grid, (3, 3)),
            scatter(np.ones((n, 2)), grid, (3, 1)),
            lower=True,
            unit_diagonal=True,
        )


def test_solve_triangular_rejects_vectors(grid):
    A = scatter(np.eye(4), grid, (2, 2))
    with pytest.raises(TypeError, match=r"\(n, 1\) matrix"):
        solve_triangular(A, np.ones(4))


# -- argument validation (identical on every rank, before any communication) ------------------
def test_argument_errors(grid):
    A = scatter(np.eye(6), grid, (2, 2))
    B = scatter(np.ones((6, 3)), grid, (2, 2))
    R = scatter(np.ones((6, 4)), grid, (2, 2))
    with pytest.raises(ValueError, match="'left' or 'right'"):
        trsm(A, B, side="up")
    with pytest.raises(ValueError, match="'N', 'T' or 'C'"):
        trsm(A, B, trans="X")
    with pytest.raises(ValueError, match="0, 1, 2"):
        solve_triangular(A, B, trans=3)
    with pytest.raises(ValueError, match="square"):
        trsm(R, B)
    with pytest.raises(ValueError, match="B must have 6 columns"):
        trsm(A, B, side="right")
    with pytest.raises(ValueError, match="num_stages"):
        trsm(A, B, num_stages=0)
    with pytest.raises(TypeError, match="complex alpha"):
        trsm(A, B, alpha=1j)
    with pytest.raises(TypeError, match="BlockCyclicArray"):
        trsm(np.eye(6), B)
    with pytest.raises(TypeError, match="lower must be a bool"):
        trsm(A, B, lower="yes")


def test_linalg_namespace_exports():
    # the public names wrap the operators with NumPy's operands (ops/lapack/solves.py)
    assert bm.linalg.trsm.__wrapped__ is trsm
    assert bm.linalg.solve_triangular.__wrapped__ is solve_triangular


def test_no_warning_when_conforming(grid):
    A = scatter(np.eye(5) * 2, grid, (2, 2))
    B = scatter(np.ones((5, 3)), grid, (2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = gather(trsm(A, B))
    np.testing.assert_allclose(x, 0.5)
    # a complex alpha with zero imaginary part scales a real B
    np.testing.assert_allclose(gather(trsm(A, B, alpha=2 + 0j)), 1.0)


def test_empty_operands(grid):
    A = scatter(np.eye(5) * 2, grid, (2, 2))
    assert gather(trsm(A, scatter(np.ones((5, 0)), grid, (2, 2)))).shape == (5, 0)
    A0 = scatter(np.zeros((0, 0)), grid, (2, 2))
    B0 = scatter(np.ones((0, 3)), grid, (2, 2))
    assert gather(solve_triangular(A0, B0)).shape == (0, 3)
    assert gather(trsm(A0, scatter(np.ones((3, 0)), grid, (2, 2)), side="right")).shape == (3, 0)
