"""The LU's host helpers: ``_interchanges.row_map`` (LAPACK's interchanges composed into a row map,
against the sequential definition: a swap per pivot, in order, on random pivot vectors) and
``ops.lapack._lu_local.panel_edges``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from blasmp_array._interchanges import row_map
from blasmp_array.ops.lapack._lu_local import panel_edges


def _swaps(piv: np.ndarray, k0: int, n: int) -> np.ndarray:
    src = np.arange(n)
    for i, p in enumerate(piv, start=k0):
        src[i], src[p] = src[p], src[i]
    return src


@st.composite
def pivots(draw: st.DrawFn) -> tuple[np.ndarray, int, int]:
    n = draw(st.integers(1, 80))
    k0 = draw(st.integers(0, n - 1))
    e = draw(st.integers(0, n - k0))
    piv = [draw(st.integers(i, n - 1)) for i in range(k0, k0 + e)]
    return np.array(piv, dtype=np.int64), k0, n


@settings(max_examples=300, deadline=None)
@given(pivots())
def test_row_map_composes_the_interchanges_in_order(case):
    piv, k0, n = case
    src = row_map(piv, k0, n)
    np.testing.assert_array_equal(src, _swaps(piv, k0, n))
    assert np.array_equal(np.sort(src), np.arange(n)), "not a permutation"


@given(st.integers(1, 300), st.integers(1, 64), st.integers(0, 80))
def test_panel_edges_cover_the_columns_once(mn, nb, first):
    """Increasing edges from 0 to ``mn``: the first panel ``first`` wide (if narrower than the
    matrix), then ``nb`` each, only the last one narrower."""
    edges = panel_edges(mn, nb, first)
    widths = np.diff(edges)
    assert edges[0] == 0 and edges[-1] == mn and (widths > 0).all()
    rest = widths[1:] if 0 < first < mn else widths
    if 0 < first < mn:
        assert widths[0] == first
    assert (rest[:-1] == nb).all() and 0 < rest[-1] <= nb
