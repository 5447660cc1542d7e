"""The local triangle helpers of ``ops/engine/_triangle.py`` against NumPy on the global matrix:
``triangle_nonfinite_flag`` reads exactly the triangle, ``zero_triangle`` writes exactly it, for
any layout, process, diagonal offset and panel width (rows wholly inside, crossing, outside)."""

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from blasmp_array.layout import BlockCyclicLayout
from blasmp_array.ops.engine import _triangle


@st.composite
def local_cases(draw):
    m, n = draw(st.integers(1, 30)), draw(st.integers(1, 30))
    mb, nb = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    pr, pc = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    src = (draw(st.integers(0, pr - 1)), draw(st.integers(0, pc - 1)))
    layout = BlockCyclicLayout((m, n), (mb, nb), (pr, pc), src)
    grid = SimpleNamespace(
        myrow=draw(st.integers(0, pr - 1)),
        mycol=draw(st.integers(0, pc - 1)),
        backend=SimpleNamespace(xp=np, asarray=np.asarray),
    )
    uplo = draw(st.sampled_from("LU"))
    k = draw(st.integers(-5, 5))
    panel = draw(st.integers(1, 9))
    bad = draw(st.tuples(st.integers(0, m - 1), st.integers(0, n - 1)))
    return layout, grid, uplo, k, panel, bad


def _local(layout, grid, x):
    return x[np.ix_(layout.local_rows(grid.myrow), layout.local_cols(grid.mycol))]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(local_cases())
def test_triangle_helpers_match_numpy(case):
    layout, grid, uplo, k, panel, (bi, bj) = case
    m, n = layout.shape
    inside = (np.tril if uplo == "L" else np.triu)(np.ones((m, n), bool), k)
    x = np.arange(1.0, m * n + 1).reshape(m, n)
    x[bi, bj] = np.nan
    local = _local(layout, grid, x)
    mask = _local(layout, grid, inside)
    expected = bool(np.isnan(local[mask]).any())
    got = bool(_triangle.triangle_nonfinite_flag(layout, grid, local, uplo, k, panel=panel))
    assert got == expected
    zeroed = local.copy()
    _triangle.zero_triangle(layout, grid, zeroed, uplo, k, panel=panel)
    np.testing.assert_array_equal(zeroed, np.where(mask, 0.0, local))


@settings(max_examples=100, deadline=None, derandomize=True)
@given(
    st.integers(1, 40),
    st.sampled_from("LU"),
    st.booleans(),
    st.one_of(st.none(), st.integers(1, 17)),
)
def test_mirror_triangle_matches_numpy(n, uplo, conjugate, panel):
    """``c := tril(c) + tril(c, -1)^H`` (``'L'``; ``triu`` for ``'U'``), any size and panel;
    the strict other triangle starts as NaN, so an unwritten element shows."""
    rng = np.random.default_rng(n)
    z = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    keep = np.tril(np.ones((n, n), bool)) if uplo == "L" else np.triu(np.ones((n, n), bool))
    c = np.where(keep, z, np.nan)
    _triangle.mirror_triangle(np, c, uplo, conjugate, panel)
    tri = np.where(keep, z, 0)
    strict = tri - np.diag(np.diag(z))
    other = strict.conj().T if conjugate else strict.T
    np.testing.assert_array_equal(c, tri + other)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.integers(0, 12),
    st.integers(0, 12),
    st.sampled_from([np.float32, np.float64, np.complex64, np.complex128]),
    st.sampled_from(["none", "nan", "inf", "-inf", "nan-imag", "overflow"]),
    st.data(),
)
def test_host_nonfinite_flag_matches_isfinite(m, n, dtype, kind, data):
    """The host check (a sum first, the elementwise test only when the sum is not finite)
    agrees with ``~isfinite(x).any()``, also when finite values overflow the sum."""
    x = np.ones((m, n), dtype)
    if m and n and kind != "none":
        i, j = data.draw(st.integers(0, m - 1)), data.draw(st.integers(0, n - 1))
        big = np.finfo(np.dtype(dtype)).max
        if kind == "overflow":
            x[...] = big  # every element finite, their sum is not
        elif kind == "nan-imag":
            x[i, j] = complex(1, np.nan) if np.dtype(dtype).kind == "c" else np.nan
        else:
            x[i, j] = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}[kind]
    view = x[:, 1:] if n > 1 else x  # a strided view as well as the whole
    for a in (x, view):
        expected = bool((~np.isfinite(a)).any())
        assert bool(_triangle.nonfinite_flag(np, a)) == expected
