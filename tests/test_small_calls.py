"""The table of everyday small calls (``blasmp_array.bench.small_calls``) that
``tools/bench_vectors.py`` and the asv suite time: every call gives NumPy's value on our arrays
(one process), so the two sides of each timing compute the same thing."""

from __future__ import annotations

import numpy as np
import pytest

import blasmp_array as bm
from blasmp_array.bench.small_calls import CALLS


@pytest.mark.parametrize("call", list(CALLS))
def test_each_call_matches_numpy(call):
    n = 40
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n)) + n * np.eye(n)
    x = rng.standard_normal(n)
    grid = bm.ProcessGrid(1, 1)
    got = CALLS[call](
        bm.from_numpy(a, block=16, grid=grid), bm.from_numpy(x, block=16, grid=grid), np
    )
    want = CALLS[call](a, x, np)
    if isinstance(got, bm.BlockCyclicArray):
        got = got.to_numpy()
    assert np.shape(got) == np.shape(want) and np.result_type(got) == np.result_type(want)
    # sums and products in another order: n eps of the size of the terms
    scale = float(np.abs(a).sum() + np.abs(x).sum())
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * n * np.finfo(float).eps * scale)
