"""The block of a factorisation's working copy (Cholesky, LU, and ``solve``/``inv`` through them;
the Householder QR, and ``qr_multiply``/``lstsq`` through it).

The distributed factorisations factor a copy of their input anyway. The step count, the size of
every panel and of every trailing update follow the block of that copy, and the block that is
fastest depends on the backend far more than on the caller's arrays: on one H200 shared by
4 ranks (2x2, n = 16384, float64) ``np.linalg.cholesky`` took 0.174 s at block 256, 0.060 s at
512 and 0.061 s at 1024, ``lu_factor`` 0.351 s at 256 and 0.170-0.176 s at 1024-2048, while the
redistribution that makes the copy moves 2 GiB in about 4 ms there. So the copy is made in the
block of :data:`TABLE` (one redistribution instead of the plain copy) and the result goes back
to the caller's block (a second one); ``solve`` and ``inv`` solve in the working block and
move only their result back.

The rule: for a grid of more than one process whose backend has an entry for the
factorisation, the block of the row of :data:`TABLE` with the largest ``n_min <= n``, lowered
(halving) until every process row and column holds at least :data:`MIN_BLOCKS_PER_PROCESS`
blocks (``block <= n / (MIN_BLOCKS_PER_PROCESS * max(Pr, Pc))``), and never below
:data:`MIN_BLOCK`. Otherwise -- one process (whose factorisation ignores blocks), a backend
without an entry, sizes below every ``n_min``, an input whose layout does not start on process
``(0, 0)`` -- the caller's block is kept and the copy is a plain copy.

The CPU backend has no entry: on the 2-core machine of this project (``docs/defaults.md``) the
two redistributions cost more than any block gained over the default 256. The table and the
tool that measures it (``tools/factor_block_sweep.py``) are described in ``docs/defaults.md``.
"""

from __future__ import annotations

from ...array import BlockCyclicArray
from .redistribute import redistribute

__all__ = [
    "TABLE",
    "MIN_BLOCKS_PER_PROCESS",
    "MIN_BLOCK",
    "block_for",
    "enabled",
    "plain",
    "to_block",
    "working_block",
]

#: backend -> factorisation ('cholesky', 'lu' or 'qr') -> rows ``(n_min, block)``, ascending
#: ``n_min``
TABLE: dict[str, dict[str, tuple[tuple[int, int], ...]]] = {
    # one H200 (Cholesky, LU) or H100 (QR: 0.646 s at 1024, 0.686 s at 256, 1.047 s at 2048)
    # shared by 4 ranks (2x2, MPS), n = 16384, float64 (docs/defaults.md, docs/qr.md)
    "gpu": {"cholesky": ((0, 1024),), "lu": ((0, 2048),), "qr": ((0, 1024),)},
}

#: the working block leaves at least this many blocks to every process row and column
MIN_BLOCKS_PER_PROCESS = 2

#: the rule never goes below this block (nor below the caller's)
MIN_BLOCK = 256

#: False: keep the caller's block (``tools/factor_block_sweep.py`` times each block as given)
enabled = True


def working_block(
    backend: str, grid_shape: tuple[int, int], n: int, factorisation: str, current: int
) -> int:
    """The square block of the working copy of an ``n x n`` (``n`` the smaller dimension)
    ``factorisation`` ('cholesky', 'lu' or 'qr') on a ``grid_shape`` grid of ``backend``, whose
    input has square blocks ``current``. Pure: the same on every rank."""
    if not enabled or grid_shape[0] * grid_shape[1] == 1:
        return current
    rows = TABLE.get(backend, {}).get(factorisation, ())
    chosen = None
    for n_min, block in rows:
        if n >= n_min:
            chosen = block
    if chosen is None:
        return current
    cap = n // (MIN_BLOCKS_PER_PROCESS * max(grid_shape))
    while chosen > cap and chosen // 2 >= MIN_BLOCK:
        chosen //= 2
    if chosen <= current or chosen > cap:
        return current
    return chosen


def block_for(w: BlockCyclicArray, factorisation: str) -> int | None:
    """The working block for the stored (resolved) matrix ``w`` with square blocks, or None to
    factor a plain copy in ``w``'s own layout."""
    if w.is_view or w.block[0] != w.block[1] or tuple(w.layout.src) != (0, 0):
        return None
    nb = working_block(w.backend.name, w.grid.shape, min(w.shape), factorisation, w.block[0])
    return None if nb == w.block[0] else nb


def plain(x: BlockCyclicArray) -> bool:
    """Whether ``x`` is a stored matrix whose layout starts on process ``(0, 0)`` (what a
    redistribution back to its block reproduces exactly)."""
    return not x.is_view and tuple(x.layout.src) == (0, 0)


def to_block(x: BlockCyclicArray, rows: int, cols: int | None = None) -> BlockCyclicArray:
    """``x`` redistributed to block ``(rows, cols)`` (default ``x``'s column block) on its grid;
    ``x`` itself when it is there already. No warning: the library chose this copy."""
    block = (rows, x.block[1] if cols is None else cols)
    if tuple(x.block) == block:
        return x
    return redistribute(x, grid=x.grid, block=block)
