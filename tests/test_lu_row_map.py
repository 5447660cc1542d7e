"""``ops.lu._row_map``: LAPACK's interchanges composed into a row map, against the sequential
definition (a swap per pivot, in order), on random pivot vectors."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from blasmp_array.ops.lu import _row_map


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
    src = _row_map(piv, k0, n)
    np.testing.assert_array_equal(src, _swaps(piv, k0, n))
    assert np.array_equal(np.sort(src), np.arange(n)), "not a permutation"
