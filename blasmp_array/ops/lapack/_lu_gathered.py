"""LU with partial pivoting of a matrix whose processes all compute on one device: gathered on
process 0, factored there by the one-process kernels, the factor scattered back.

Why: processes that share one device (several ranks on one GPU under MPS) run the distributed
pipeline's exchanges and its panel factorisations on the same hardware, and its critical path
is a chain of host-synchronised exchanges between two ``getrf`` s: on one H100 at n = 16384,
4 ranks (2 x 2) took 0.18 s through the pipeline where one process took 0.13 s, and 0.153 s
through this route (docs/lu.md). Processes on different devices keep the pipeline
(``ops/lapack/lu.py``).

Protocol (collective; every step is the same on every rank):

1. ``# device keys -> every process`` (one host ``allgather``,
   :func:`ops.engine.devices.one_device`, called by ``lu.factor_working``).
2. The warm-up of the dtype's kernels on every process, then ``gather_to_backend``: row panels
   put device to device into one C-ordered array on process 0.
3. ``Backend.run_on_root``: process 0 factors it in place (:func:`._lu_local.factor_local`:
   the look-ahead LU on a GPU, one ``getrf`` elsewhere); the others wait at a non-blocking
   barrier; an exception there is raised on every rank.
4. One host ``bcast`` of the pivots and of the first zero pivot's column (``int32``, ``n``
   numbers), then ``scatter_from_backend`` of the factor into ``w``'s block, source process
   ``(0, 0)``; a factor wanted in ``w``'s layout with a shifted source process, or in ``w``'s
   own storage, is stored there by one more exchange.

``w`` is the working copy of ``lu.factor_working``: in the working block of
``ops/engine/_factor_block.py`` where the rule gives one, as for the pipeline: on one H100,
4 ranks, n = 16384, the route took 0.153 s from the working block (2048) and 0.221 s when it
gathered and scattered in the caller's block 256 (docs/lu.md; which of the moves costs the
difference was not profiled), and the redistribution into the working block and back costs a
few milliseconds each way.

Memory on process 0: the gathered matrix (factored in place) and the look-ahead's panels beside
its share of ``w`` (:func:`root_bytes`); where the device has not that much free, the processes
run the pipeline instead (``ops.engine.devices.one_device``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._alloc import new_array
from ...array import BlockCyclicArray
from ...creation import gather_to_backend, scatter_from_backend
from ..engine import _checks as ck
from ..engine._warmup import begin_pipeline
from ._lu_local import PANEL, factor_local

__all__ = ["gathered_lu", "root_bytes"]


def root_bytes(w: BlockCyclicArray) -> int:
    """Device bytes of process 0's work arrays: the gathered matrix (factored in place) and
    the look-ahead's two column-major panels."""
    m, n = w.shape
    return w.dtype.itemsize * (m * n + 2 * m * min(n, PANEL))


def gathered_lu(w: BlockCyclicArray, in_place: bool) -> tuple[BlockCyclicArray, np.ndarray, int]:
    """``(lu, piv, zero)`` of the stored ``w`` (square blocks, ``min(m, n) > 0``) through
    process 0, as :func:`ops.lapack.lu.factor_working` returns them: the factor in ``w``'s
    layout (in ``w``'s storage with ``in_place``), LAPACK's 0-based interchanges and the column
    of the first exactly zero pivot (``-1`` if none). Collective."""
    be, grid = w.backend, w.grid
    begin_pipeline(be, w.dtype)
    full = gather_to_backend(w, root=0)

    def factor() -> tuple[Any, np.ndarray, int]:
        assert full is not None  # process 0 holds the gathered matrix
        piv, zero = factor_local(be, full)  # synchronises
        return full, piv, zero

    found = be.run_on_root(factor)
    root_lu, piv, zero = found if found is not None else (None, None, -1)
    piv, zero = be.bcast((piv, zero) if grid.rank == 0 else None)
    lu = scatter_from_backend(root_lu, w.shape, w.block, grid, w.dtype)
    if in_place or lu.layout != w.layout:
        target = w if in_place else new_array(w.layout, grid, w.dtype)
        ck.store(target, lu)
        lu = target
    return lu, np.asarray(piv, dtype=np.int32), int(zero)
