"""Householder QR of a matrix whose processes all compute on one device: gathered on process
0, factored there by the one-process kernels, its factors scattered back.

Why: processes that share one device (several ranks on one GPU under MPS) gain nothing from
the distributed pipeline of :mod:`ops.lapack._householder`; they run its exchanges and its
panel factorisations (redundant on every process, the pipeline's one-exchange design) on the
same hardware: on one H100 at n = 16384, 4 ranks (2 x 2) took 0.640 s through the pipeline
where one process took 0.383 s (docs/qr.md). Processes on different devices keep the pipeline,
which then runs on all of them.

Protocol (collective; every step is the same on every rank):

1. ``# device keys -> every process`` (one host ``allgather``,
   :func:`ops.engine.devices.one_device`, called by ``qr``): the route is taken only when every
   process names the same device.
2. The warm-up of the dtype's kernels on every process (collective on the GPU, so never on the
   root alone), then ``gather_to_backend``: row panels put device to device into one
   C-ordered array on process 0.
3. ``Backend.run_on_root``: process 0 factors (``geqrf``, or the look-ahead on a GPU) and forms
   ``R`` and ``Q`` in its own memory (no symmetric allocation, nothing collective); the others
   wait at a non-blocking barrier. An exception there is raised on every rank.
4. ``scatter_from_backend`` of ``R``, then of ``Q``: new arrays with square blocks of the
   input's row block, source process ``(0, 0)``, as the distributed route returns them.

Memory on process 0: the gathered matrix, ``geqrf``'s column-major copy, ``Q`` and ``R`` (about
three times the matrix beside its share of the distributed one, :func:`root_bytes`); where the
device has not that much free, the processes run the pipeline instead
(``ops.engine.devices.one_device``).
"""

from __future__ import annotations

from typing import Any

from ..._alloc import scratch
from ...array import BlockCyclicArray
from ...creation import gather_to_backend, scatter_from_backend
from ..engine._warmup import begin_pipeline
from . import _householder as hh

__all__ = ["gathered_qr", "root_bytes"]


def root_bytes(a: BlockCyclicArray, want_q: bool, complete: bool) -> int:
    """Device bytes of process 0's work arrays: the gathered matrix, ``geqrf``'s column-major
    copy, ``R`` and (``want_q``) ``Q``."""
    m, n = a.shape
    k = min(m, n)
    q = m * (m if complete else k) if want_q else 0
    return a.dtype.itemsize * (2 * m * n + k * n + q)


def gathered_qr(
    a: BlockCyclicArray, want_q: bool, complete: bool
) -> tuple[BlockCyclicArray | None, BlockCyclicArray]:
    """``(Q or None, R)`` of ``a`` (as viewed, ``min(m, n) > 0``) through process 0: ``R`` is
    ``min(m, n) x n``, ``Q`` ``m x m`` (``complete``) or ``m x min(m, n)``. Collective."""
    be, grid = a.backend, a.grid
    m, n = a.shape
    k = min(m, n)
    ncols = m if complete else k
    b = int(a.block[0])
    begin_pipeline(be, a.dtype)
    full = gather_to_backend(a, root=0)

    def solve() -> tuple[Any, Any]:
        assert full is not None  # process 0 holds the gathered matrix
        xp = be.xp
        fa, tau = hh.local_geqrf(be, full)
        r = scratch(xp, (k, n), a.dtype)
        be.launch(be.compute, hh.triu_into, xp, r, fa[:k])
        q = None
        if want_q:
            q = scratch(xp, (m, ncols), a.dtype)
            hh.local_q(be, fa, tau, q)  # synchronises
        be.synchronize()
        return q, r

    found = be.run_on_root(solve)
    q_root, r_root = found if found is not None else (None, None)
    r = scatter_from_backend(r_root, (k, n), (b, b), grid, a.dtype)
    q = scatter_from_backend(q_root, (m, ncols), (b, b), grid, a.dtype) if want_q else None
    return q, r
