"""The balanced band of ``A.T @ A`` on a grid (``ops/blas3/syrk.py``: ``band_half``,
``_LocalBand``): every off-diagonal pair of blocks is computed exactly once, every block column
holds about half the blocks, and the processes of a block-cyclic grid get about the same number of
products."""

from __future__ import annotations

import numpy as np
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


@pytest.mark.parametrize("grid_shape", [(1, 2), (2, 1), (2, 2), (1, 3), (2, 3)])
@pytest.mark.parametrize("n,nb", [(3072, 256), (18, 4), (13, 2)])
def test_band_fill_moves_only_the_blocks_outside(grid_shape, n, nb) -> None:
    """The fill's plan (``engine/mirror.py``) writes each block outside the band once, from its
    mirror, and nothing else: about half the matrix, where a distributed transpose moves all of
    it; a budget of one element makes one step per destination block column."""
    from blasmp_array.layout import BlockCyclicLayout
    from blasmp_array.ops.blas3.syrk import outside_band
    from blasmp_array.ops.engine import mirror

    layout = BlockCyclicLayout((n, n), (nb, nb), grid_shape)
    k = layout.nblocks[0]
    blocks = outside_band(k)
    assert len(blocks) == k * (k - 1) // 2  # the mirrors of the band's off-diagonal blocks
    nranks = grid_shape[0] * grid_shape[1]
    for budget, steps in ((mirror.MEMORY_BUDGET_BYTES, 1), (1, len({j for _, j in blocks}))):
        written: list[tuple[int, int, int, int, int]] = []
        for me in range(nranks):
            plan = mirror._plan(layout, me, blocks, 8, budget, 2)
            assert len(plan.steps) == steps
            for step in plan.steps:
                for msg in step:
                    if me in msg.receivers:  # what this rank writes, in its local matrix
                        written += [(me, b.dr, b.dc, b.nc, b.nr) for b in msg.unpack]
        assert len(written) == len(set(written)) == len(blocks)
        moved = sum(nr * nc for *_, nr, nc in written)
        expect = sum(np.prod(layout.block_extent(i, j)) for i, j in blocks)
        assert moved == expect and moved < 0.55 * n * n
