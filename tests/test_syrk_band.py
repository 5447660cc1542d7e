"""The balanced band of ``A.T @ A`` on a grid (``ops/blas3/syrk.py``: ``band_half``,
``_LocalBand``): every off-diagonal pair of blocks is computed exactly once, every block column
holds about half the blocks, and the processes of a block-cyclic grid get about the same number of
products."""

from __future__ import annotations

import pytest

from blasmp_array.ops.blas3.syrk import band_half


def band(j: int, k: int) -> set[int]:
    return {(j + d) % k for d in range(band_half(j, k) + 1)}


@pytest.mark.parametrize("k", range(1, 26))
def test_every_pair_exactly_once(k: int) -> None:
    for i in range(k):
        assert i in band(i, k)  # the diagonal block
        for j in range(i + 1, k):
            assert (i in band(j, k)) + (j in band(i, k)) == 1, (i, j, k)


@pytest.mark.parametrize("k", range(1, 26))
def test_columns_hold_about_half(k: int) -> None:
    sizes = {len(band(j, k)) for j in range(k)}
    assert sizes <= {k // 2, k // 2 + 1}
    assert sum(len(band(j, k)) for j in range(k)) == k * (k + 1) // 2


@pytest.mark.parametrize("k,p", [(12, 2), (12, 3), (13, 2), (16, 4), (7, 2)])
def test_block_cyclic_columns_are_balanced(k: int, p: int) -> None:
    """1 x p grid: process q owns block columns q, q + p, ...; the lower triangle gives the
    first process up to 20% more products, the band at most one column's difference."""
    work = [sum(len(band(j, k)) for j in range(q, k, p)) for q in range(p)]
    tri = [sum(k - j for j in range(q, k, p)) for q in range(p)]
    assert max(work) - min(work) <= max(len(band(j, k)) for j in range(k))
    assert max(work) / (sum(work) / p) <= max(tri) / (sum(tri) / p)
