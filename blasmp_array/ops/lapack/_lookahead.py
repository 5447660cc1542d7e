"""The look-ahead of a blocked right-looking factorisation of a matrix that one process holds
whole, on the backend's two streams: the panel of step ``k + 1`` is factored on the comm stream
beside the rest of step ``k``'s update on the compute stream (MAGMA's ``xgetrf_gpu`` and
``xgeqrf_gpu``). One skeleton for the one-process LU (:func:`ops.lapack._lu_local.getrf_lookahead`)
and QR (:func:`ops.lapack._qr_local.geqrf_lookahead`); each supplies its :class:`Steps`.

Step ``k`` (panel ``k`` = columns ``[k0, k1)`` of the matrix, block column ``k + 1`` =
``[k1, k2)``; panel ``k`` already factored, or being factored, on the comm stream in a
column-major buffer):

1. host: ``take(k)`` -- what the host needs of the factored panel (LU: it waits for the
   ``getrf`` only, reads the pivots and uploads the rows that move; QR: nothing, or, for a
   panel factored by CholeskyQR2, it waits for the panel and reads its verdict);
2. compute stream, after the panel's event: ``accept(k)`` (LU: the interchanges on block column
   ``k + 1``; QR: the panel into the result, its explicit ``V`` and ``T``), ``update_next(k)``
   (block column ``k + 1`` brought up to date by step ``k``), ``load(k + 1)`` (panel ``k + 1``
   copied into the other buffer), an event;
3. comm stream, after that event: ``factor(k + 1)``, an event;
4. compute stream, beside 3: ``update_rest(k)``, the rest of step ``k``.

The critical path is the chain of panel factorisations with steps 1-2 between two of them;
the trailing updates run under it.

Buffers: two column-major panel buffers used in turn. Panel ``k + 2`` is loaded into panel
``k``'s buffer on the compute stream after ``update_rest(k)``, the last reader of panel ``k``
(the compute stream runs in order), and after panel ``k``'s factorisation ended (the compute
stream waited for it at step ``k``). Whatever the streams read after the host dropped it (the
outputs of every factorisation, the state of every step) is kept until the final
synchronisation. No signals and no communication: one process.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from ..._alloc import scratch
from ...backends.base import Backend

__all__ = ["Steps", "MatrixSteps", "run"]


class Steps(Protocol):
    """One factorisation's part of the skeleton (see the module docstring); every method but
    :meth:`outputs` and :meth:`take` only enqueues work on the stream it is given or on the
    compute stream."""

    def load(self, k: int, panel: Any) -> None:
        """Compute stream: panel ``k`` of the matrix into the column-major buffer ``panel``."""

    def outputs(self, k: int, panel: Any) -> Any:
        """Host: allocate what the factorisation of panel ``k`` writes besides the panel."""

    def factor(self, k: int, panel: Any, out: Any, stream: Any) -> None:
        """``stream`` (comm): factor ``panel`` in place, writing ``out``."""

    def take(self, k: int, out: Any, done: Any) -> Any:
        """Host: the state of step ``k`` from the factored panel (``done``: its event)."""

    def accept(self, k: int, panel: Any, state: Any) -> None:
        """Compute stream, after the panel's factorisation: what every later part needs."""

    def update_next(self, k: int, panel: Any, state: Any) -> None:
        """Compute stream: step ``k``'s update of block column ``k + 1``."""

    def update_rest(self, k: int, panel: Any, state: Any) -> None:
        """Compute stream: the rest of step ``k``."""


class MatrixSteps:
    """What the factorisations of a row-major local matrix ``a`` share: the bounds of their
    panels (``edges``: the first column of each, then ``min(m, n)``) and their loading."""

    def __init__(self, be: Backend, a: Any, edges: list[int]) -> None:
        self.be, self.a, self.edges = be, a, edges

    def block_columns(self, k: int) -> tuple[int, int, int]:
        """``k0, k1, k2``: panel ``k`` is ``[k0, k1)``, block column ``k + 1`` ``[k1, k2)``
        (empty at the last step)."""
        e = self.edges
        return e[k], e[k + 1], (e[k + 2] if k + 2 < len(e) else e[k + 1])

    def load(self, k: int, panel: Any) -> None:
        """Compute stream: ``a[k0:, k0:k1]`` into the column-major ``panel``."""
        k0, k1, _ = self.block_columns(k)
        self.be.launch(self.be.compute, self.be.copy_local, panel, self.a[k0:, k0:k1])


def run(be: Backend, edges: list[int], rows: int, dtype: Any, steps: Steps) -> None:
    """Run ``steps`` over the panels ``[edges[k], edges[k + 1])`` of a matrix of ``rows``
    rows (panel ``k`` has ``rows - edges[k]`` rows); synchronises at the end."""
    count = len(edges) - 1
    if count <= 0:
        return
    xp, comp = be.xp, be.compute
    width = int(max(np.diff(edges)))
    buf = scratch(xp, (2, rows * width), dtype)

    def panel_buffer(k: int) -> Any:  # column-major (rows - k0) x e view of buffer k % 2
        r, e = rows - edges[k], edges[k + 1] - edges[k]
        return buf[k % 2, : r * e].reshape(e, r).T

    keep: list[Any] = [buf]  # what the streams read after the host dropped it

    def factor_after(k: int, panel: Any) -> tuple[Any, Any]:
        ready = be.record_event(comp)
        out = steps.outputs(k, panel)
        keep.append(out)
        be.begin()  # (outputs allocated on the current stream: before the factorisation)
        be.wait_event(be.comm_stream, ready)
        steps.factor(k, panel, out, be.comm_stream)
        return out, be.record_event(be.comm_stream)

    be.begin()
    panel = panel_buffer(0)
    steps.load(0, panel)
    factored = factor_after(0, panel)
    for k in range(count):
        out, done = factored
        state = steps.take(k, out, done)
        keep.append(state)
        be.begin()  # uploads made by take() before the kernels that read them
        be.wait_event(comp, done)
        steps.accept(k, panel, state)
        nxt = panel
        if k + 1 < count:  # look-ahead: block column k + 1, then its factorisation beside
            steps.update_next(k, panel, state)  # the rest of step k
            nxt = panel_buffer(k + 1)
            steps.load(k + 1, nxt)
            factored = factor_after(k + 1, nxt)
        steps.update_rest(k, panel, state)
        panel = nxt
    be.synchronize()  # (keep's arrays are released after it)
